"""What a tenant lets a remote model see (migration 034): data minimization toward providers.

A hosted model is sent the session's transcript, the subject's current facts and the texts to
embed. Before every call to a remote provider, identifiers of the kinds the tenant's policy
names (e-mail addresses, phone numbers, card numbers, IBANs) are replaced by stable placeholders
(`[EMAIL_1]`: the same value is the same placeholder throughout one call, so the model can still
tell two addresses apart), and the placeholders in the model's answer (fact values, summary
sentences, a rationale) are replaced back by the values. Current facts of the namespaces the
policy excludes are not sent at all. What was redacted is counted by kind, never with its value,
on the call's recorded operation (`ProviderResult.redacted`).

A tenant with no policy gets every kind redacted (secure by default). Providers that compute in
the worker's own process (the offline extractor, the hashing and e5 embedders) send nothing
anywhere and are given the data as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Literal, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from agent_memory.db import tenant_transaction
from agent_memory.models import (
    EmbeddingResult,
    ExtractionResult,
    ImportanceResult,
    KnownFact,
    Message,
    ProviderResult,
    SummaryResult,
)
from agent_memory.providers.base import Embedder, runs_in_worker

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
            raise ValueError(f"--redact: unknown kind {part!r}; use a comma-separated list of "
                             f"{', '.join(REDACT_KINDS)}, or none")
        if part not in kinds:
            kinds.append(part)
    return kinds


# --- detection -------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
# Groups of four (as printed) or one run; checked by mod 97 below.
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?(?![A-Za-z0-9])")
# 13-19 digits, spaces or dashes between them; checked by Luhn below.
_CARD = re.compile(r"(?<![\d\w])\d(?:[ -]?\d){12,18}(?![\d\w])")
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


def _is_card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _is_phone(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    if _DATE.fullmatch(text.strip("() ")):
        return False
    return 8 <= len(digits) <= 15 if text.startswith("+") else 9 <= len(digits) <= 15


_DETECTORS: tuple[tuple[RedactKind, re.Pattern[str], object], ...] = (
    ("email", _EMAIL, None),
    ("iban", _IBAN, iban_valid),
    ("card", _CARD, _is_card),
    ("phone", _PHONE, _is_phone),
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
        for kind, pattern, check in _DETECTORS:
            if kind not in self.kinds:
                continue

            def replace(match: re.Match[str], kind: str = kind, check: object = check) -> str:
                found = match.group(0)
                if callable(check) and not check(found):
                    return found
                return self._name(kind, found)

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
    elif isinstance(result, SummaryResult):
        update["sentences"] = [s.model_copy(update={"text": redactor.restore(s.text)}) for s in result.sentences]
        update["observations"] = [o.model_copy(update={"text": redactor.restore(o.text)}) for o in result.observations]
    elif isinstance(result, ImportanceResult):
        update["rationale"] = redactor.restore(result.rationale)
    elif not isinstance(result, EmbeddingResult):
        raise TypeError(f"no restore rule for {type(result).__name__}")
    return result.model_copy(update=update) if update else result


async def shielded_embed(pool: AsyncConnectionPool, tenant_id: str, embedder: Embedder,
                         texts: list[str]) -> EmbeddingResult:
    """`embedder.embed(texts)`, the tenant's identifiers redacted first when the embedder is
    remote (a vector needs no restoring; the counts are recorded on the result)."""
    shield = await ProviderShield.for_provider(pool, tenant_id, embedder)
    if not shield.remote:
        return await embedder.embed(texts)
    redactor = shield.redactor()
    return restored(await embedder.embed(redactor.texts(texts)), redactor)


async def text_for_embedder(pool: AsyncConnectionPool, tenant_id: str, embedder: Embedder, text: str) -> str:
    """A query as `embedder` may be sent it: the tenant's identifiers redacted for a remote one."""
    shield = await ProviderShield.for_provider(pool, tenant_id, embedder)
    return shield.redactor().redact(text) if shield.remote else text


async def namespaces_kept_from(pool: AsyncConnectionPool, tenant_id: str, provider: object) -> frozenset[str]:
    """The namespaces whose facts `provider` is never sent (none for one in the worker): a fact
    of one is not embedded by a remote embedder, and is found by keyword only."""
    shield = await ProviderShield.for_provider(pool, tenant_id, provider)
    return frozenset(shield.policy.exclude_namespaces) if shield.remote else frozenset()
