"""The leak filter: the last check before memory items reach a caller or a prompt.

Row-level security already confines every query to one tenant and every read filters on the
subject. This filter is defence in depth against *text* that names someone else — a summary that
merged two people, a prompt-injected note, a planted row. An item is dropped when

- it cites evidence messages that are not the subject's own (``foreign_evidence``), or
- its text mentions an identifier that does not belong to the subject and does not occur in the
  subject's own evidence messages (content, speaker, image caption):
  - another subject id of the same tenant (``foreign_subject``; looked up in ``sessions``),
  - another tenant's id (``foreign_tenant``; tenants register a salted digest of their id in
    Redis when they append messages, so the registry does not list tenant names),
  - an e-mail address (``email``) or a phone number (``phone``, compared digits-only).

What occurs in the subject's own evidence is legitimate by construction (the subject's friends'
names, their own e-mail address, a colleague's phone number they dictated), so the filter only
drops what the subject's memory could not have learnt from the subject. The subject's own id and
tenant id are always allowed. A marker is looked up in the messages the items cite first, then in
the subject's other messages, through a scan in Postgres that returns only the rows that may hold
it (`_evidence_for`): a check never reads every message of the subject into the worker.

Drops are counted in Postgres (agent_memory.store.counters: `leak_drops:total` and `leak_drops:{reason}`
per tenant; `agent-memory stats --tenant T` shows them), so they survive restarts. Counts carry no
content; a log line names the memory id and the reason only.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis

from agent_memory.store import counters
from agent_memory.store.db import joined_tenant_transaction

log = logging.getLogger(__name__)

TENANT_REGISTRY_KEY = "am:registry:tenant_digests"
REASONS = ("foreign_evidence", "foreign_subject", "foreign_tenant", "email", "phone")

T = TypeVar("T")


class ContextLike(Protocol):
    """What filter_context needs of a context item (agent_memory.recall.context.ContextItem)."""
    memory_id: str
    content: str
    cited_message_ids: list[str]


C = TypeVar("C", bound=ContextLike)

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
# A run of digits with the separators phone numbers are written with (one line, no letters).
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d[\d ().\-]{5,}\d(?![\w])")
_NOT_PHONE = (re.compile(r"^\d{4}[-./]\d{1,2}[-./]\d{1,2}$"),  # 2024-05-01
              re.compile(r"^\d{1,2}[-./]\d{1,2}[-./]\d{4}$"),  # 01.05.2024
              re.compile(r"^\d{4} ?- ?\d{4}$"))  # 2019-2023
# Identifier-shaped runs (the alphabet of check_identifier); trailing punctuation is also tried off.
_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_NON_DIGIT = re.compile(r"\D+")


def tenant_digest(tenant_id: str) -> str:
    return hashlib.sha256(f"agent-memory/tenant\x1f{tenant_id}".encode()).hexdigest()[:32]


async def register_tenant(redis: Redis, tenant_id: str) -> None:
    """Called on append: lets other tenants' filters recognise this tenant's id in text."""
    await redis.sadd(TENANT_REGISTRY_KEY, tenant_digest(tenant_id))


def phone_digits(text: str) -> list[str]:
    found = []
    for match in _PHONE.finditer(text):
        raw = match.group(0).strip()
        if any(p.match(raw) for p in _NOT_PHONE):
            continue
        digits = _NON_DIGIT.sub("", raw)
        # a bare run of digits is a phone number only from 10 digits (not an amount like 1500000)
        if 7 <= len(digits) <= 15 and (len(digits) >= 10 or digits != raw):
            found.append(digits)
    return found


def emails(text: str) -> list[str]:
    return [m.group(0).lower().rstrip(".") for m in _EMAIL.finditer(text)]


def identifier_tokens(text: str) -> set[str]:
    tokens: set[str] = set()
    for run in _RUN.findall(_EMAIL.sub(" ", text)):
        for candidate in (run, run.rstrip("._-")):
            if candidate and len(candidate) <= 64:
                tokens.add(candidate)
    return tokens


def context_item_text(item: ContextLike) -> str:
    """The part of a rendered context item that came from memory (not the rendering template)."""
    return item.content


@dataclass
class LeakReport:
    dropped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    dropped_ids: list[str] = field(default_factory=list)

    def add(self, reason: str, memory_id: str) -> None:
        self.dropped += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        self.dropped_ids.append(memory_id)

    def merge(self, other: LeakReport) -> None:
        self.dropped += other.dropped
        for reason, n in other.reasons.items():
            self.reasons[reason] = self.reasons.get(reason, 0) + n
        self.dropped_ids.extend(other.dropped_ids)


@dataclass
class _Markers:
    tokens: set[str]
    emails: list[str]
    phones: list[str]
    cited: list[str]


class _Evidence:
    """What the checked markers find in the subject's own evidence messages; grows by rows."""

    def __init__(self) -> None:
        self.tokens: set[str] = set()
        self.lowered: list[str] = []
        self.digits: list[str] = []

    def add(self, rows: Iterable[tuple[str | None, ...]]) -> None:
        for row in rows:
            text = " ".join(part for part in row if part)
            self.tokens.update(t.lower() for t in identifier_tokens(text))
            self.lowered.append(text.lower())
            self.digits.append(_NON_DIGIT.sub("", text))

    def has_token(self, token: str) -> bool:
        return token.lower() in self.tokens

    def has_email(self, email: str) -> bool:
        return any(email in text for text in self.lowered)

    def has_phone(self, digits: str) -> bool:
        return any(digits in d for d in self.digits)


# The subject's messages that may hold a marker the cited messages did not: a superset of those
# _Evidence would find it in (it decides on these rows), computed in Postgres so a check reads a
# few rows instead of shipping every message of the subject to Python. Markers are ASCII and
# hold no space: a text marker lies within one column, lower-cased ASCII-only (collation "C"),
# with "k" and "i" matching any character in the pattern (KELVIN SIGN and I WITH DOT ABOVE are
# the characters whose Python lower-case is ASCII); a phone marker is a run of the row's ASCII
# digits (a run of them stays a run when other digits are removed around it), which may span
# columns as it does in the joined text.
_ROWS_MENTIONING_SQL = """
SELECT content, speaker, image_caption FROM messages
 WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s
   AND (lower(content COLLATE "C") LIKE ANY(%(texts)s::text[])
     OR lower(speaker COLLATE "C") LIKE ANY(%(texts)s::text[])
     OR lower(image_caption COLLATE "C") LIKE ANY(%(texts)s::text[])
     OR (cardinality(%(digits)s::text[]) > 0
         AND regexp_replace(concat_ws(' ', content, speaker, image_caption), '[^0-9]+', '', 'g')
             LIKE ANY(%(digits)s::text[])))
"""
_CITED_SQL = ("SELECT DISTINCT message_id FROM messages "
              "WHERE tenant_id = %s AND subject_id = %s AND message_id = ANY(%s)")
_CITED_WITH_TEXT_SQL = ("SELECT message_id, content, speaker, image_caption FROM messages "
                        "WHERE tenant_id = %s AND subject_id = %s AND message_id = ANY(%s)")
_ALL_ROWS_SQL = ("SELECT content, speaker, image_caption FROM messages "
                 "WHERE tenant_id = %(tenant)s AND subject_id = %(subject)s")


def _containing(needle: str, *, loose: str = "") -> str:
    """A LIKE pattern (default escape character) matching text that contains `needle`, with the
    characters in `loose` matching any character."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return "%" + "".join("_" if c in loose else c for c in escaped) + "%"


async def _evidence_for(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                        cited_rows: list[tuple[str | None, ...]], tokens: set[str], addresses: set[str],
                        phones: set[str]) -> _Evidence:
    """The subject's evidence as far as these markers go: the cited messages first (a note usually
    cites the message its e-mail address or number came from), then the other messages that may
    mention what those did not."""
    evidence = _Evidence()
    evidence.add(cited_rows)
    texts = sorted({t.lower() for t in tokens if not evidence.has_token(t)}
                   | {e for e in addresses if not evidence.has_email(e)})
    digits = sorted(p for p in phones if not evidence.has_phone(p))
    if not texts and not digits:
        return evidence
    params = {"tenant": tenant_id, "subject": subject_id, "texts": [_containing(t, loose="ki") for t in texts],
              "digits": [_containing(d) for d in digits]}
    ascii_only = all(n.isascii() for n in (*texts, *digits))
    cur = await conn.execute(_ROWS_MENTIONING_SQL if ascii_only else _ALL_ROWS_SQL, params)
    evidence.add(await cur.fetchall())
    return evidence


async def filter_items(pool: AsyncConnectionPool, redis: Redis | None, tenant_id: str, subject_id: str,
                       items: Sequence[T], *, text_of: Callable[[T], str], cited_of: Callable[[T], list[str]],
                       id_of: Callable[[T], str], conn: psycopg.AsyncConnection | None = None,
                       count: bool = True) -> tuple[list[T], LeakReport]:
    """Keep the items that mention nothing foreign to the subject; count (unless `count` is
    false: items that would not have been shown) and log the drops.
    Without `redis`, other tenants' ids are not recognised (their registry is in Redis). The
    lookups run on `conn` when the caller holds a tenant transaction (the drops are counted in a
    transaction of their own, as they happen)."""
    report = LeakReport()
    if not items:
        return list(items), report
    markers = []
    # The subject's own tenant and subject ids are never foreign, nor a phone number ("t-0141473…").
    own_ids = re.compile("|".join(rf"(?<![\w.-]){re.escape(i)}(?![\w.-])" for i in (tenant_id, subject_id)))
    for item in items:
        text = text_of(item) or ""
        contacts = own_ids.sub(" ", text)
        markers.append(_Markers(identifier_tokens(text), emails(contacts), phone_digits(contacts),
                                [c for c in cited_of(item) or []]))
    all_tokens = set().union(*(m.tokens for m in markers)) - {subject_id, tenant_id}
    all_cited = sorted({c for m in markers for c in m.cited})

    foreign_tenants: set[str] = set()
    if redis is not None and all_tokens:
        ordered = sorted(all_tokens)
        flags = await redis.smismember(TENANT_REGISTRY_KEY, [tenant_digest(t) for t in ordered])
        foreign_tenants = {t for t, hit in zip(ordered, flags, strict=True) if hit}

    async with joined_tenant_transaction(pool, tenant_id, conn) as tx:
        other_subjects: set[str] = set()
        if all_tokens:
            cur = await tx.execute(
                "SELECT DISTINCT subject_id FROM sessions WHERE tenant_id = %s AND subject_id = ANY(%s) "
                "AND subject_id <> %s", (tenant_id, sorted(all_tokens), subject_id))
            other_subjects = {row[0] for row in await cur.fetchall()}
        checks_markers = bool(other_subjects or foreign_tenants or any(m.emails or m.phones for m in markers))
        own_cited: set[str] = set()
        cited_rows: list[tuple[str | None, ...]] = []
        if all_cited:
            # The cited messages' texts only when some marker is to be looked up in them.
            cur = await tx.execute(
                _CITED_WITH_TEXT_SQL if checks_markers else _CITED_SQL, (tenant_id, subject_id, all_cited))
            for message_id, *texts in await cur.fetchall():
                own_cited.add(message_id)
                cited_rows.append(tuple(texts))
        evidence: _Evidence | None = None
        if checks_markers:
            named = {t for m in markers for t in m.tokens if t in other_subjects or t in foreign_tenants}
            evidence = await _evidence_for(tx, tenant_id, subject_id, cited_rows, named,
                                           {e for m in markers for e in m.emails},
                                           {p for m in markers for p in m.phones})

    kept: list[T] = []
    for item, m in zip(items, markers, strict=True):
        reason = None
        if any(c not in own_cited for c in m.cited):
            reason = "foreign_evidence"
        elif evidence is not None:
            if any(t in other_subjects and not evidence.has_token(t) for t in m.tokens):
                reason = "foreign_subject"
            elif any(t in foreign_tenants and not evidence.has_token(t) for t in m.tokens):
                reason = "foreign_tenant"
            elif any(not evidence.has_email(e) for e in m.emails):
                reason = "email"
            elif any(not evidence.has_phone(p) for p in m.phones):
                reason = "phone"
        if reason is None:
            kept.append(item)
        else:
            report.add(reason, id_of(item))
            log.warning("leak filter dropped memory %s of tenant %s: %s", id_of(item), tenant_id, reason)
    if report.dropped and count:
        await count_drops(pool, tenant_id, report)
    return kept, report


async def count_drops(pool: AsyncConnectionPool, tenant_id: str, report: LeakReport) -> None:
    await counters.add_counts(pool, tenant_id, {"leak_drops:total": report.dropped,
                                                **{f"leak_drops:{r}": n for r, n in report.reasons.items()}})


async def drop_counts(pool: AsyncConnectionPool, tenant_id: str) -> dict[str, int]:
    """{"total": n, "<reason>": n, ...} for a tenant (zeros when nothing was dropped)."""
    totals = await counters.read_counts(pool, tenant_id, [f"leak_drops:{r}" for r in ("total", *REASONS)])
    return {name.removeprefix("leak_drops:"): n for name, n in totals.items()}


async def filter_context(pool: AsyncConnectionPool, redis: Redis | None, tenant_id: str, subject_id: str,
                         candidates: list[C], pack: Callable[[list[C]], list[C]], *,
                         conn: psycopg.AsyncConnection | None = None) -> tuple[list[C], LeakReport]:
    """Pack, filter what was packed, and re-pack without the dropped items until the packed set is
    clean: the budget is filled with clean items and only items that would have been shown count.
    The lookups run on `conn` when given (see filter_items)."""
    total = LeakReport()
    remaining = list(candidates)
    while True:
        chosen = pack(remaining)
        kept, report = await filter_items(pool, redis, tenant_id, subject_id, chosen, text_of=context_item_text,
                                          cited_of=lambda i: i.cited_message_ids, id_of=lambda i: i.memory_id,
                                          conn=conn)
        if not report.dropped:
            return kept, total
        total.merge(report)
        dropped = set(report.dropped_ids)
        remaining = [i for i in remaining if i.memory_id not in dropped]
