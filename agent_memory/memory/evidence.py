"""Session messages: append-only evidence in Postgres, plus the Redis working-memory cache."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import psycopg
from psycopg.rows import class_row
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, Field
from redis.asyncio import Redis

from agent_memory.core.errors import Conflict, Forbidden, InvalidInput
from agent_memory.core.models import Message, Session, check_identifier
from agent_memory.memory.operations import RecordNotFoundError
from agent_memory.security.leak_filter import register_tenant
from agent_memory.store.db import fetch_one, key_limits, tenant_transaction
from agent_memory.store.redis_keys import redis_prefix, register
from agent_memory.store.scope import Mode, enter_subject

WORKING_MEMORY_TTL_SECONDS = 4 * 3600
WORKING_MEMORY_MAX_MESSAGES = 50


class MessageConflictError(Conflict):
    """A message id was re-sent with a different body."""


class SessionScopeConflictError(Conflict):
    """A message would make a private session shared, a shared one private, or mix two agents."""


class TurnConflictError(Conflict):
    """A new message takes a position of the session (turn_index) another message already holds."""


class AppendConflictError(Conflict):
    """The session moved on since the caller last saw it: its last stored message is not the
    caller's expected parent. Nothing of the call was written; re-read the session and retry."""

    def __init__(self, tenant_id: str, session_id: str, expected_parent: str | None, actual_parent: str | None):
        self.tenant_id = tenant_id
        self.session_id = session_id
        self.expected_parent = expected_parent
        self.actual_parent = actual_parent
        super().__init__(
            f"append conflict on session {session_id!r}: expected parent {expected_parent or None!r}, but its last "
            f"stored message is {actual_parent!r}; nothing was written — re-read the session and retry")


class AppendResult(BaseModel):
    session_id: str
    inserted: int
    duplicates: int
    last_message_id: str | None = None  # the session's parent for the next append (expected_parent)
    # The session's idle timer after the append (MemoryClient): "armed", or "pending" when
    # Temporal could not be reached (the rows are committed all the same; the idle-timer sweep
    # or the next append arms it). None: no idle timer (none configured, or nothing appended).
    idle_timer: Literal["armed", "pending"] | None = None
    # Positions the new messages passed over after the session's last one (the first
    # SKIPPED_TURNS_SHOWN): legitimate when turns are left out on purpose, a lost message otherwise.
    skipped_turns: list[int] = Field(default_factory=list)


SKIPPED_TURNS_SHOWN = 20

# expected_parent for a session that must not have any message yet.
NO_PARENT = ""


def session_lock_key(tenant_id: str, subject_id: str, session_id: str) -> int:
    """63-bit advisory lock key per (tenant, subject, session); a different namespace than subject locks."""
    digest = hashlib.blake2b(f"session\x1f{tenant_id}\x1f{subject_id}\x1f{session_id}".encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


LAST_MESSAGE_SQL = ("SELECT message_id FROM messages WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
                    "ORDER BY turn_index DESC, created_at DESC, message_id DESC LIMIT 1")


async def last_message_id(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, session_id: str) -> str | None:
    """The session's last message in turn order (what load_session lists last): the parent to pass
    as expected_parent; None when the session has no message."""
    async with tenant_transaction(pool, tenant_id) as conn:
        return await _last_stored_message(conn, tenant_id, subject_id, session_id)


def working_memory_key(tenant_id: str, subject_id: str, session_id: str) -> str:
    return f"{redis_prefix(tenant_id, subject_id)}wm:{session_id}"


def content_digest(message: Message) -> str:
    # Metadata and scope ids join the body only when there are some: a message stored without any
    # keeps its digest.
    body = json.dumps([message.role, message.speaker, message.content, message.image_caption,
                       message.turn_index, message.created_at.isoformat()]
                      + ([message.metadata] if message.metadata else [])
                      + ([message.scope] if message.scope else []), sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


async def append_messages(pool: AsyncConnectionPool, redis: Redis | None, tenant_id: str, subject_id: str,
                          session: Session, *, subject_digest: str, expected_parent: str | None = None) -> AppendResult:
    """Append a session's messages. Re-sending a message is a no-op; a different body under the
    same id raises MessageConflictError and nothing of the call is written.

    Appends to one session are serialised (a transaction-scoped advisory lock per session: the app
    role has no UPDATE on `sessions`, which SELECT ... FOR UPDATE would need). `expected_parent` is
    the id of the last message the caller saw in the session, in turn order (turn_index,
    created_at, message_id; see `last_message_id`), or NO_PARENT ("") for a session the caller
    believes empty; None skips the check. When the call has a new message and the session's last
    stored message differs, AppendConflictError names the session, the expected and the actual
    parent, and nothing is written. A call whose messages are all stored already (a retry) is an
    idempotent no-op whatever its expected_parent."""
    check_identifier("tenant", tenant_id)
    check_identifier("subject", subject_id)
    session = as_writing_agent(session)
    private_to = session_private_to(session)
    async with tenant_transaction(pool, tenant_id) as conn:
        await _lock_session(conn, tenant_id, subject_id, subject_digest, session.session_id)
        await _open_session(conn, tenant_id, subject_id, session, private_to)
        parent = await _last_stored_message(conn, tenant_id, subject_id, session.session_id)
        last_turn, taken = await _positions(conn, tenant_id, subject_id, session)
        digests = [content_digest(m) for m in session.messages]
        new_ids = await _insert_messages(conn, tenant_id, subject_id, session, digests, private_to)
        outcome = _sort_by_insertion(session, digests, new_ids, taken)
        # Refusals roll the whole call back: a changed body, a moved-on session, a taken position.
        duplicates = await _check_resent_bodies(conn, tenant_id, subject_id, session.session_id, outcome.resent)
        if outcome.inserted:
            _check_expected_parent(tenant_id, session.session_id, expected_parent, parent)
        _check_free_positions(session.session_id, outcome.misplaced, last_turn)
        last = await _last_stored_message(conn, tenant_id, subject_id, session.session_id)
        if redis is not None and outcome.inserted:
            # Still holding the shared subject lock: an erasure (exclusive lock) either waits for
            # this push and then deletes it, or came first and this call was refused.
            await register_tenant(redis, tenant_id)
            await push_working_memory(redis, tenant_id, subject_id, session.session_id, outcome.inserted)
    return AppendResult(session_id=session.session_id, inserted=len(outcome.inserted), duplicates=duplicates,
                        last_message_id=last, skipped_turns=_skipped_turns(last_turn, outcome.inserted))


async def _lock_session(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, subject_digest: str,
                        session_id: str) -> None:
    """Enter the subject's scope for writing and take the session's append lock (to the end of
    the transaction)."""
    await enter_subject(conn, tenant_id, subject_id, subject_digest, Mode.WRITE)
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (session_lock_key(tenant_id, subject_id, session_id),))


async def _open_session(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, session: Session,
                        private_to: str | None) -> None:
    """Create the session on its first append; a later append must keep its privacy
    (SessionScopeConflictError)."""
    # Session ids are per subject (migration 021): another subject's "s1" is another session.
    # A session's privacy is set by its first append and never changes (migration 046).
    cur = await conn.execute(
        "INSERT INTO sessions (tenant_id, session_id, subject_id, started_at, private_to) "
        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant_id, subject_id, session_id) DO NOTHING",
        (tenant_id, session.session_id, subject_id, session.started_at, private_to))
    if cur.rowcount:
        return
    cur = await conn.execute("SELECT private_to FROM sessions WHERE tenant_id = %s AND subject_id = %s "
                             "AND session_id = %s", (tenant_id, subject_id, session.session_id))
    if (held := (await fetch_one(cur))[0]) != private_to:
        raise SessionScopeConflictError(
            f"messages[0].private: session {session.session_id!r} is "
            + (f"private to agent {held!r}" if held else "shared")
            + "; every message of a session is private to the same agent or none is: send these "
            + "messages in a session of their own")


async def _last_stored_message(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                               session_id: str) -> str | None:
    """The id of the session's last stored message in turn order (None: it has none)."""
    cur = await conn.execute(LAST_MESSAGE_SQL, (tenant_id, subject_id, session_id))
    row = await cur.fetchone()
    return None if row is None else row[0]


async def _insert_messages(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, session: Session,
                           digests: list[str], private_to: str | None) -> set[str]:
    """Insert the call's messages whose ids the session does not hold yet; the ids inserted."""
    # One statement for the whole call (not a round trip per message): new ids are returned,
    # the others are re-sends, checked against the stored body afterwards.
    messages = session.messages
    cur = await conn.execute(
        """
        INSERT INTO messages (tenant_id, session_id, message_id, subject_id, turn_index, role, speaker,
                              content, image_caption, created_at, content_sha256, metadata, agent_id, app_id,
                              run_id, private_to)
        SELECT %(t)s, %(s)s, m.message_id, %(u)s, m.turn_index, m.role, m.speaker, m.content, m.image_caption,
               m.created_at::timestamptz, m.digest, m.metadata::jsonb, m.agent_id, m.app_id, m.run_id, %(private)s
          FROM unnest(%(ids)s::text[], %(turns)s::int[], %(roles)s::text[], %(speakers)s::text[],
                      %(contents)s::text[], %(captions)s::text[], %(created)s::text[], %(digests)s::text[],
                      %(metadata)s::text[], %(agents)s::text[], %(apps)s::text[], %(runs)s::text[])
               WITH ORDINALITY AS m(message_id, turn_index, role, speaker, content, image_caption, created_at,
                                    digest, metadata, agent_id, app_id, run_id, position)
         ORDER BY m.position
        ON CONFLICT (tenant_id, subject_id, session_id, message_id) DO NOTHING
        RETURNING message_id
        """,
        {"t": tenant_id, "s": session.session_id, "u": subject_id,
         "ids": [m.message_id for m in messages], "turns": [m.turn_index for m in messages],
         "roles": [m.role for m in messages], "speakers": [m.speaker for m in messages],
         "contents": [m.content for m in messages], "captions": [m.image_caption for m in messages],
         # As text, each with its own offset: an array of datetimes is dumped with one type, so a
         # session mixing times with and without an offset would lose the offsets.
         "created": [m.created_at.isoformat() for m in messages], "digests": digests,
         "metadata": [json.dumps(m.metadata) for m in messages],
         "agents": [m.agent_id for m in messages], "apps": [m.app_id for m in messages],
         "runs": [m.run_id for m in messages], "private": private_to})
    return {row[0] for row in await cur.fetchall()}


@dataclass(frozen=True)
class _InsertOutcome:
    """The call's messages by what the insert did with them."""

    inserted: list[Message]
    resent: list[tuple[Message, str]]  # with the body's digest
    # Inserted at a position another stored message holds: (index in the call, message, holder).
    misplaced: list[tuple[int, Message, str]]


def _sort_by_insertion(session: Session, digests: list[str], new_ids: set[str],
                       taken: dict[int, str]) -> _InsertOutcome:
    """Sort the call's messages into inserted (and of those, misplaced) and re-sent ones."""
    outcome = _InsertOutcome(inserted=[], resent=[], misplaced=[])
    first_occurrences = set(new_ids)
    for index, (message, digest) in enumerate(zip(session.messages, digests, strict=True)):
        if message.message_id in first_occurrences:  # its first occurrence in the call was inserted
            first_occurrences.discard(message.message_id)
            if (holder := taken.get(message.turn_index)) is not None:
                outcome.misplaced.append((index, message, holder))
            outcome.inserted.append(message)
        else:
            outcome.resent.append((message, digest))
    return outcome


async def _check_resent_bodies(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, session_id: str,
                               resent: list[tuple[Message, str]]) -> int:
    """The number of re-sent messages, each stored already with the same body; a different body
    raises MessageConflictError."""
    if not resent:
        return 0
    cur = await conn.execute(
        "SELECT message_id, content_sha256 FROM messages WHERE tenant_id = %s AND subject_id = %s "
        "AND session_id = %s AND message_id = ANY(%s)",
        (tenant_id, subject_id, session_id, [m.message_id for m, _ in resent]))
    stored: dict[str, str] = dict(await cur.fetchall())
    for message, digest in resent:
        if stored.get(message.message_id) != digest:
            raise MessageConflictError(
                f"message {message.message_id!r} of session {session_id!r} was already stored with "
                "a different body; messages are append-only evidence, send the change under a new message "
                "id")
    return len(resent)


def _check_expected_parent(tenant_id: str, session_id: str, expected_parent: str | None,
                           parent: str | None) -> None:
    """Refuse new messages when the session's last stored message is not the caller's expected
    parent (AppendConflictError; None: no check)."""
    if expected_parent is not None and (expected_parent or None) != parent:
        raise AppendConflictError(tenant_id, session_id, expected_parent, parent)


def _check_free_positions(session_id: str, misplaced: list[tuple[int, Message, str]], last_turn: int) -> None:
    """Refuse a new message at a position another stored message holds (TurnConflictError)."""
    if misplaced:
        index, message, holder = misplaced[0]
        raise TurnConflictError(
            f"messages[{index}].turn_index: position {message.turn_index} of session {session_id!r} "
            f"is held by message {holder!r}; give message {message.message_id!r} a free position (after "
            f"{last_turn}, the session's last)")


def _skipped_turns(last_turn: int, inserted: list[Message]) -> list[int]:
    """The positions the new messages passed over after the session's last one (the first
    SKIPPED_TURNS_SHOWN)."""
    new_turns = {m.turn_index for m in inserted}
    # Lazily: a position may be up to 2**31 - 1, and only the first few passed over are listed.
    passed_over = (t for t in range(last_turn + 1, max(new_turns, default=-1)) if t not in new_turns)
    return list(itertools.islice(passed_over, SKIPPED_TURNS_SHOWN))


def as_writing_agent(session: Session) -> Session:
    """The session's messages as a key limited to an agent or an app may write them: its own
    agent's and app's (a message naming none is stamped with the key's); a message of another
    agent or app is refused."""
    limits = key_limits()
    stamps = {field: value for field, value in (("agent_id", limits.agent_id), ("app_id", limits.app_id)) if value}
    if not stamps:
        return session
    for index, message in enumerate(session.messages):
        for field, value in stamps.items():
            if getattr(message, field) not in (None, value):
                raise Forbidden(f"messages[{index}].{field}: this key writes as {field.removesuffix('_id')} "
                                f"{value!r} only, not {getattr(message, field)!r}")
    return session.model_copy(update={"messages": [
        m.model_copy(update={field: value for field, value in stamps.items() if getattr(m, field) is None})
        for m in session.messages]})


def session_private_to(session: Session) -> str | None:
    """The agent the call's messages are private to (None: shared); they must agree."""
    for index, message in enumerate(session.messages):
        if message.private and message.agent_id is None:
            raise InvalidInput(f"messages[{index}].private: a private message needs an agent_id, the agent it is "
                               "private to")
    first = session.messages[0].private_to
    for index, message in enumerate(session.messages):
        if message.private_to != first:
            raise InvalidInput(f"messages[{index}].private: every message of a session is private to the same agent "
                               "(private: true with one agent_id) or none is")
    return first


async def _positions(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str,
                     session: Session) -> tuple[int, dict[int, str]]:
    """The session's last stored turn_index (-1: none) and which stored message holds each of the
    positions the call's messages name."""
    cur = await conn.execute(
        "SELECT coalesce(max(turn_index), -1), "
        "       coalesce(array_agg(turn_index) FILTER (WHERE turn_index = ANY(%s)), '{}'), "
        "       coalesce(array_agg(message_id) FILTER (WHERE turn_index = ANY(%s)), '{}') "
        "  FROM messages WHERE tenant_id = %s AND subject_id = %s AND session_id = %s",
        (turns := [m.turn_index for m in session.messages], turns, tenant_id, subject_id, session.session_id))
    last_turn, held_turns, holders = await fetch_one(cur)
    return last_turn, dict(zip(held_turns, holders, strict=True))


async def push_working_memory(redis: Redis, tenant_id: str, subject_id: str, session_id: str,
                              messages: list[Message]) -> None:
    key = working_memory_key(tenant_id, subject_id, session_id)
    async with redis.pipeline(transaction=True) as pipe:
        pipe.rpush(key, *(m.model_dump_json() for m in messages))
        pipe.ltrim(key, -WORKING_MEMORY_MAX_MESSAGES, -1)
        pipe.expire(key, WORKING_MEMORY_TTL_SECONDS)
        register(pipe, tenant_id, subject_id, key, WORKING_MEMORY_TTL_SECONDS)  # erasure finds it there
        await pipe.execute()


async def recent_messages(redis: Redis, tenant_id: str, subject_id: str, session_id: str) -> list[Message]:
    raw = await redis.lrange(working_memory_key(tenant_id, subject_id, session_id), 0, -1)
    return [Message.model_validate_json(item) for item in raw]


async def load_session(pool: AsyncConnectionPool, tenant_id: str, subject_id: str, session_id: str, *,
                       through: datetime | None = None) -> tuple[list[Message], datetime | None]:
    """The subject's session: its messages in turn order (only those recorded at or before
    `through`, when given) and when the newest of them was recorded."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute("SELECT 1 FROM sessions WHERE tenant_id = %s AND subject_id = %s AND session_id = %s",
                                 (tenant_id, subject_id, session_id))
        if await cur.fetchone() is None:
            raise RecordNotFoundError(f"session {session_id!r} of subject {subject_id!r} has no messages in "
                                      f"tenant {tenant_id!r}")
        async with conn.cursor(row_factory=class_row(Message)) as mcur:
            await mcur.execute(
                "SELECT message_id, turn_index, role, speaker, content, image_caption, created_at FROM messages "
                "WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
                "AND recorded_at <= coalesce(%s::timestamptz, 'infinity') ORDER BY turn_index, created_at, message_id",
                (tenant_id, subject_id, session_id, through))
            messages = await mcur.fetchall()
        cur = await conn.execute(
            "SELECT max(recorded_at) FROM messages WHERE tenant_id = %s AND subject_id = %s AND session_id = %s "
            "AND recorded_at <= coalesce(%s::timestamptz, 'infinity')", (tenant_id, subject_id, session_id, through))
        newest = (await fetch_one(cur))[0]
    return messages, newest


async def unconsolidated_messages(pool: AsyncConnectionPool, tenant_id: str, subject_id: str,
                                  session_id: str) -> int:
    """Messages of the session recorded after everything its successful consolidations covered
    (the session's commits through an index, migration 021: no scan of the tenant's operations)."""
    return (await session_idle_state(pool, tenant_id, subject_id, session_id))[0]


# The session's messages after the newest commit that covered it (bench end-session explains it).
SESSION_IDLE_STATE_SQL = """
SELECT count(*), extract(epoch FROM now() - max(m.recorded_at)) FROM messages m
 WHERE m.tenant_id = %(t)s AND m.subject_id = %(u)s AND m.session_id = %(s)s
   AND m.recorded_at > coalesce(
       (SELECT max((o.result ->> 'through')::timestamptz) FROM operations o
         WHERE o.tenant_id = %(t)s AND o.subject_id = %(u)s AND o.session_id = %(s)s
           AND o.kind = 'commit' AND o.status = 'succeeded'), '-infinity')
"""


async def session_idle_state(pool: AsyncConnectionPool, tenant_id: str, subject_id: str,
                             session_id: str) -> tuple[int, float | None]:
    """(messages no consolidation has covered, seconds since the newest of them was recorded)."""
    async with tenant_transaction(pool, tenant_id) as conn:
        cur = await conn.execute(SESSION_IDLE_STATE_SQL, {"t": tenant_id, "u": subject_id, "s": session_id})
        count, idle = await fetch_one(cur)
    return int(count), float(idle) if idle is not None else None
