"""What a tenant lets a remote model see (migration 034): data minimization toward providers.

A hosted model is sent the session's transcript, the subject's current facts and the texts to
embed. Before every call to a remote provider, identifiers of the kinds the tenant's policy
names (e-mail addresses, phone numbers, card numbers, IBANs) are replaced by stable placeholders
(`[EMAIL_1]`: the same value is the same placeholder throughout one call, so the model can still
tell two addresses apart), and the placeholders in the model's answer (fact values, entity names,
summary sentences, a rationale) are replaced back by the values. Current facts of the namespaces the
policy excludes are not sent at all. What was redacted is counted by kind, never with its value,
on the call's recorded operation (`ProviderResult.redacted`).

A tenant with no policy gets every kind redacted (secure by default). Providers that compute in
the worker's own process (the offline extractor, the hashing and e5 embedders) send nothing
anywhere and are given the data as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.core.entities import entity_names
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import (
    EmbeddingResult,
    ExtractedEntity,
    ExtractionResult,
    ImportanceResult,
    KnownFact,
    Message,
    ProviderResult,
    SummaryResult,
)
from agent_memory.providers.base import Embedder, runs_in_worker
from agent_memory.providers.metering import metered
from agent_memory.store.db import tenant_transaction

RedactKind = Literal["email", "phone", "card", "iban"]
REDACT_KINDS: tuple[RedactKind, ...] = ("email", "phone", "card", "iban")


class ProviderPolicy(BaseModel):
    """A tenant's rule for remote providers: the identifier kinds replaced before a call, and
    the namespaces whose current facts are never sent."""

    model_config = ConfigDict(extra="forbid")

    redact: list[RedactKind] = Field(default_factory=lambda: list(REDACT_KINDS))
    exclude_namespaces: list[str] = Field(default_factory=list)


DEFAULT_PROVIDER_POLICY = ProviderPolicy()


async def read_provider_policy(conn: psycopg.AsyncConnection, tenant_id: str) -> ProviderPolicy:
    cur = await conn.execute("SELECT policy FROM provider_policies WHERE tenant_id = %s", (tenant_id,))
    row = await cur.fetchone()
    return DEFAULT_PROVIDER_POLICY if row is None else ProviderPolicy.model_validate(row[0])


async def write_provider_policy(conn: psycopg.AsyncConnection, tenant_id: str, policy: ProviderPolicy | None) -> None:
    """Store the tenant's policy (None: back to the default, every kind redacted)."""
    if policy is None:
        await conn.execute("DELETE FROM provider_policies WHERE tenant_id = %s", (tenant_id,))
        return
    await conn.execute(
        "INSERT INTO provider_policies (tenant_id, policy) VALUES (%s, %s::jsonb) "
        "ON CONFLICT (tenant_id) DO UPDATE SET policy = excluded.policy, updated_at = now()",
        (tenant_id, json.dumps(policy.model_dump(mode="json"))))


def parse_kinds(raw: str) -> list[RedactKind]:
    """`email,phone` (or `none`) for the CLI; an unknown kind is named with the allowed ones."""
    if raw.strip().lower() in ("none", ""):
        return []
    kinds: list[RedactKind] = []
    for part in (p.strip().lower() for p in raw.split(",")):
        if part not in REDACT_KINDS:
            raise InvalidInput(f"--redact: unknown kind {part!r}; use a comma-separated list of "
                               f"{', '.join(REDACT_KINDS)}, or none")
        if part not in kinds:
            kinds.append(part)
    return kinds


# --- detection -------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
# Two letters, two check digits, then letters and digits in groups (as printed) or one run, also
# written against a word; the IBAN is the longest stretch of the match that passes mod 97.
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,}")
_IBAN_START = re.compile(r"(?=[A-Z]{2}\d{2})")
# A run of digits, spaces or dashes between them, also written against a word; the card number
# (13-19 digits, checked by Luhn) is the whole run, or the longest stretch of whole groups of three
# or more digits in it: a card number followed by its expiry date or preceded by a count.
_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,}")
_DIGIT_GROUP = re.compile(r"\d+")
# An international number (+ and 8-15 digits) or a national one of 9-15 digits, with the usual
# separators; a calendar date (2024-05-01) is not a phone number.
_PHONE = re.compile(r"(?<![\w+])(?:\+\d[\d ().-]{6,}\d|\(?\d[\d ().-]{7,}\d)(?![\w])")
_DATE = re.compile(r"\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4}")


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_valid(iban: str) -> bool:
    compact = iban.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


Span = tuple[int, int]


def _is_card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _card_span(text: str) -> Span | None:
    """Where the card number is in a run of digit groups (the longest valid stretch), if any."""
    if _is_card(text):
        return 0, len(text)
    groups = [(m.start(), m.end()) for m in _DIGIT_GROUP.finditer(text)]
    best: Span | None = None
    for i, (start, _) in enumerate(groups):
        digits = ""
        for j in range(i, len(groups)):
            first, end = groups[j]
            digits += text[first:end]
            if end - first < 3 or len(digits) > 19:  # a stretch is at most 19 digits: linear in the run
                break
            if len(digits) >= 13 and luhn_valid(digits) and (best is None or end - start > best[1] - best[0]):
                best = start, end
    return best


def _iban_span(text: str) -> Span | None:
    """Where the IBAN is in a run of letter and digit groups (the longest valid stretch), if any."""
    best: Span | None = None
    for head in _IBAN_START.finditer(text):
        start = head.start()
        # mod 97 of the country code and check digits moved to the end, kept as the IBAN grows by a
        # character: linear in the run, whatever it holds.
        moved = int("".join(str(int(ch, 36)) for ch in text[start:start + 4]))
        remainder, length = 0, 0
        for end in range(start + 5, min(len(text), start + 42) + 1):  # 34 characters, 8 spaces at most
            ch = text[end - 1]
            if ch == " ":
                continue
            value = int(ch, 36)
            remainder = (remainder * (100 if value > 9 else 10) + value) % 97
            length += 1
            if length + 4 > 34:
                break
            if (length + 4 >= 15 and (remainder * 1_000_000 + moved) % 97 == 1
                    and (best is None or end - start > best[1] - best[0])):
                best = start, end
    return best


def _is_phone(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    if _DATE.fullmatch(text.strip("() ")):
        return False
    return 8 <= len(digits) <= 15 if text.startswith("+") else 9 <= len(digits) <= 15


def _phone_span(text: str) -> Span | None:
    return (0, len(text)) if _is_phone(text) else None


def _email_span(text: str) -> Span | None:
    return 0, len(text)


# Each kind's pattern finds candidates; its span function says where in one the identifier is.
_DETECTORS: tuple[tuple[RedactKind, re.Pattern[str], Callable[[str], Span | None]], ...] = (
    ("email", _EMAIL, _email_span),
    ("iban", _IBAN, _iban_span),
    ("card", _CARD, _card_span),
    ("phone", _PHONE, _phone_span),
)
_PLACEHOLDER = re.compile(r"\[(EMAIL|PHONE|CARD|IBAN)_(\d+)\]")


class Redactor:
    """Replaces identifiers by placeholders for one provider call and puts them back in its
    answer. Each distinct value gets one placeholder; counts are occurrences per kind."""

    def __init__(self, kinds: Iterable[RedactKind]):
        self.kinds = frozenset(kinds)
        self._placeholder: dict[tuple[str, str], str] = {}
        self._value: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def _name(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self._placeholder:
            n = sum(1 for k, _ in self._placeholder if k == kind) + 1
            placeholder = f"[{kind.upper()}_{n}]"
            self._placeholder[key] = placeholder
            self._value[placeholder] = value
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return self._placeholder[key]

    def redact(self, text: str) -> str:
        if not self.kinds or not text:
            return text
        for kind, pattern, span in _DETECTORS:
            if kind not in self.kinds:
                continue

            def replace(match: re.Match[str], kind: str = kind,
                        span: Callable[[str], Span | None] = span) -> str:
                found = match.group(0)
                where = span(found)
                if where is None:
                    return found
                start, end = where
                return found[:start] + self._name(kind, found[start:end]) + found[end:]

            text = pattern.sub(replace, text)
        return text

    def restore(self, text: str) -> str:
        if not self._value or not text:
            return text
        return _PLACEHOLDER.sub(lambda m: self._value.get(m.group(0), m.group(0)), text)

    # --- what is sent ---------------------------------------------------------------------------

    def messages(self, messages: list[Message]) -> list[Message]:
        return [m.model_copy(update={"content": self.redact(m.content),
                                     "image_caption": None if m.image_caption is None else self.redact(m.image_caption),
                                     "speaker": None if m.speaker is None else self.redact(m.speaker)})
                for m in messages]

    def texts(self, texts: list[str]) -> list[str]:
        return [self.redact(t) for t in texts]


R = TypeVar("R", bound=ProviderResult)


class ProviderShield:
    """A tenant's policy applied to the calls of one provider: a pass-through for a provider
    that runs in the worker, the redactor otherwise (a fresh one per call: `redactor()`)."""

    def __init__(self, policy: ProviderPolicy, remote: bool):
        self.policy = policy
        self.remote = remote

    @classmethod
    async def for_provider(cls, pool: AsyncConnectionPool, tenant_id: str, provider: object) -> ProviderShield:
        """The shield of `provider`'s calls for the tenant (the policy is read only for a remote one)."""
        if runs_in_worker(provider):
            return cls(ProviderPolicy(redact=[]), remote=False)
        async with tenant_transaction(pool, tenant_id) as conn:
            return cls(await read_provider_policy(conn, tenant_id), remote=True)

    def redactor(self) -> Redactor:
        return Redactor(self.policy.redact if self.remote else ())

    def known_facts(self, facts: list[KnownFact], redactor: Redactor) -> list[KnownFact]:
        """The current facts a remote extractor may see: excluded namespaces left out, values redacted."""
        if not self.remote:
            return facts
        excluded = set(self.policy.exclude_namespaces)
        return [f.model_copy(update={"value": redactor.redact(f.value)}) for f in facts if f.namespace not in excluded]


def restored(result: R, redactor: Redactor) -> R:
    """The provider's answer with the placeholders replaced by the values, and the counts of
    what was redacted for the call recorded on it."""
    update: dict[str, object] = {"redacted": dict(sorted(redactor.counts.items()))} if redactor.counts else {}
    if isinstance(result, ExtractionResult):
        update["facts"] = [f.model_copy(update={"value": redactor.restore(f.value), "key": redactor.restore(f.key)})
                           for f in result.facts]
        update["entities"] = [_restored_entity(e, redactor) for e in result.entities]
        # The ends name entities: restored and bounded the same way, so they still match their names.
        update["relations"] = [r.model_copy(update={
            "source": (entity_names(redactor.restore(r.source), []) or (r.source, []))[0],
            "target": (entity_names(redactor.restore(r.target), []) or ("", []))[0]}) for r in result.relations]
    elif isinstance(result, SummaryResult):
        update["sentences"] = [s.model_copy(update={"text": redactor.restore(s.text)}) for s in result.sentences]
        update["observations"] = [o.model_copy(update={"text": redactor.restore(o.text)}) for o in result.observations]
    elif isinstance(result, ImportanceResult):
        update["rationale"] = redactor.restore(result.rationale)
    elif not isinstance(result, EmbeddingResult):
        raise TypeError(f"no restore rule for {type(result).__name__}")
    return result.model_copy(update=update) if update else result


def _restored_entity(entity: ExtractedEntity, redactor: Redactor) -> ExtractedEntity:
    """An entity's name and aliases with the values back (`[EMAIL_1]` named as the address), held
    to the bounds again: a value may be longer than its placeholder."""
    named = entity_names(redactor.restore(entity.name), [redactor.restore(a) for a in entity.aliases])
    if named is None:  # not after a restore of a non-empty name, which stays non-empty
        return entity
    return entity.model_copy(update={"name": named[0], "aliases": named[1]})


async def shielded_embed(pool: AsyncConnectionPool, tenant_id: str, embedder: Embedder,
                         texts: list[str]) -> EmbeddingResult:
    """`embedder.embed(texts)`, the tenant's identifiers redacted first when the embedder is
    remote (a vector needs no restoring; the counts are recorded on the result)."""
    shield = await ProviderShield.for_provider(pool, tenant_id, embedder)
    if not shield.remote:
        return await metered(tenant_id, embedder, "embed", embedder.embed(texts))
    redactor = shield.redactor()
    return restored(await metered(tenant_id, embedder, "embed", embedder.embed(redactor.texts(texts))), redactor)


async def text_for_embedder(pool: AsyncConnectionPool, tenant_id: str, embedder: Embedder, text: str) -> str:
    """A query as `embedder` may be sent it: the tenant's identifiers redacted for a remote one."""
    shield = await ProviderShield.for_provider(pool, tenant_id, embedder)
    return shield.redactor().redact(text) if shield.remote else text


async def namespaces_kept_from(pool: AsyncConnectionPool, tenant_id: str, provider: object) -> frozenset[str]:
    """The namespaces whose facts `provider` is never sent (none for one in the worker): a fact
    of one is not embedded by a remote embedder, and is found by keyword only."""
    shield = await ProviderShield.for_provider(pool, tenant_id, provider)
    return frozenset(shield.policy.exclude_namespaces) if shield.remote else frozenset()
