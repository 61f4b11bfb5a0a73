"""Operation keys: the typed identity of a recorded operation, and the only place its id is built.

Every recorded operation (`operations.py`) is identified by a deterministic operation id, the
primary key of its row: a retried activity finds the recorded result under the same id. The ids
are built here, from typed fields, and nowhere else; the same fields are stored in real columns
of the row (`KEY_COLUMNS`, migration 010), so a reader queries those columns and never parses an
id back.

The rendered strings are pinned (tests/core/test_operation_keys.py): rows recorded before these types
existed must keep matching, so a retry after an upgrade finds its recorded result.

    embed/{memory id}/{version}/{model}-{model version}/{text digest}   EmbedKey
    embed-batch/{digest of the batch's operation ids}                   EmbedBatchKey
    {extract|importance|summary}/{subject}/{session}/{provider}-{version}/{messages digest}   ProviderStepKey
    plan/{session}/{extraction digest}/{round}                          PlanKey
    commit/{session}/{request digest}                                   CommitKey
    live/{request digest}                                               LiveWriteKey
    {rederive|rederive-dry}/{request}/{subject}/{session}               RederiveKey
    review/{request digest}                                             ReviewKey

`{model}-{model version}` is ambiguous when read back (both halves may hold dashes:
`hashing-embedder-1`, `openai-compatible-embedder-1-text-embedding-3-small-1536`), which is why
the fields are stored as they are given. Rows recorded before migration 010 have no model
columns (the backfill cannot split the tag); `EmbedKey.legacy_candidates` lists every key an old
id may stand for, and only those rows are matched that way (agent_memory/projection/rebuild.py).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple, Protocol

__all__ = ["KEY_COLUMNS", "CommitKey", "EmbedBatchKey", "EmbedKey", "KeyColumns", "LiveWriteKey", "OperationKey",
           "PlanKey", "ProviderStep", "ProviderStepKey", "RederiveKey", "ReviewKey", "Versioned", "request_hash", "text_digest"]


def request_hash(request: dict[str, Any]) -> str:
    """The digest of a request (recorded with its operation; keys take prefixes of it)."""
    return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()


class Versioned(Protocol):
    """A provider (extractor, scorer, summarizer, embedder): its name and version key its calls."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...


class KeyColumns(NamedTuple):
    """The key's fields as stored on its `operations` row (NULL where a key has no such field)."""

    memory_id: uuid.UUID | None = None
    memory_version: int | None = None
    session_id: str | None = None
    model: str | None = None  # embedder, or the provider of a provider step
    model_version: str | None = None
    key_digest: str | None = None  # text, messages, request or extraction digest
    plan_round: int | None = None


# Column names, in KeyColumns order (statements list them after the row's own columns).
KEY_COLUMNS: tuple[str, ...] = KeyColumns._fields


class _Key:
    """Common behaviour: `operation_id` renders the id, `columns()` the stored fields. Each key
    also has `kind` (the row's `kind` column) and `prefix` (the id's first segment; the crash
    suite's fault points are named after it)."""

    @property
    def operation_id(self) -> str:
        raise NotImplementedError

    def columns(self) -> KeyColumns:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.operation_id


@dataclass(frozen=True)
class EmbedKey(_Key):
    """One embedding per (memory, version, model, text): a change in how a memory reads makes a
    new operation, never a mismatch with one recorded for the old text."""

    memory_id: uuid.UUID
    version: int
    model: str
    model_version: str
    text_digest: str

    kind: ClassVar[str] = "embed"
    prefix: ClassVar[str] = "embed"

    @classmethod
    def for_text(cls, memory_id: uuid.UUID, version: int, embedder: Versioned, text: str) -> EmbedKey:
        return cls(memory_id, version, embedder.name, embedder.version, text_digest(text))

    @property
    def operation_id(self) -> str:
        return f"embed/{self.memory_id}/{self.version}/{self.model}-{self.model_version}/{self.text_digest}"

    def columns(self) -> KeyColumns:
        return KeyColumns(memory_id=self.memory_id, memory_version=self.version, model=self.model,
                          model_version=self.model_version, key_digest=self.text_digest)

    def request(self, text: str) -> dict[str, Any]:
        """The request recorded (hashed) with the operation."""
        return {"text": text, "model": self.model, "version": self.model_version}

    @classmethod
    def legacy_candidates(cls, operation_id: str) -> list[EmbedKey]:
        """Every key that renders `operation_id` (one per dash of `{model}-{version}`), for rows
        recorded without key columns; [] when it is not an embed id."""
        m = _LEGACY_EMBED.match(operation_id)
        if m is None:
            return []
        memory_id, version, tag, digest = m.groups()
        return [cls(uuid.UUID(memory_id), int(version), tag[:i], tag[i + 1:], digest)
                for i in range(len(tag)) if tag[i] == "-"]


_LEGACY_EMBED = re.compile(r"embed/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/(\d+)/(.+)/([^/]+)\Z")


def text_digest(text: str) -> str:
    return request_hash({"text": text})[:12]


@dataclass(frozen=True)
class EmbedBatchKey(_Key):
    """A provider call's bookkeeping (request id, tokens, cost), once per batch of embed operations."""

    digest: str

    kind: ClassVar[str] = "embed-batch"
    prefix: ClassVar[str] = "embed-batch"

    @classmethod
    def for_operations(cls, keys: list[EmbedKey]) -> EmbedBatchKey:
        return cls(request_hash(cls.request(keys))[:24])

    @staticmethod
    def request(keys: list[EmbedKey]) -> dict[str, Any]:
        return {"operations": [k.operation_id for k in keys]}

    @property
    def operation_id(self) -> str:
        return f"embed-batch/{self.digest}"

    def columns(self) -> KeyColumns:
        return KeyColumns(key_digest=self.digest)


ProviderStep = Literal["extract", "importance", "summary"]


@dataclass(frozen=True)
class ProviderStepKey(_Key):
    """A consolidation step's provider call over exactly these messages of a subject's session.

    Session ids are per subject (migration 021), so the id names the subject: two subjects' "s1"
    with the same messages are two operations. Rows recorded before (`{step}/{session}/...`) are
    not found under the new id: a consolidation in flight across that upgrade calls its provider
    once more. Plan and commit ids need no subject: their digests cover the subject already."""

    step: ProviderStep
    subject_id: str
    session_id: str
    provider: str
    provider_version: str
    messages_digest: str

    @classmethod
    def for_messages(cls, step: ProviderStep, subject_id: str, session_id: str, provider: Versioned,
                     messages_digest: str) -> ProviderStepKey:
        return cls(step, subject_id, session_id, provider.name, provider.version, messages_digest)

    @property
    def kind(self) -> str:
        return self.step

    @property
    def prefix(self) -> str:
        return self.step

    @property
    def operation_id(self) -> str:
        return (f"{self.step}/{self.subject_id}/{self.session_id}/{self.provider}-{self.provider_version}/"
                f"{self.messages_digest}")

    def columns(self) -> KeyColumns:
        return KeyColumns(session_id=self.session_id, model=self.provider, model_version=self.provider_version,
                          key_digest=self.messages_digest)


@dataclass(frozen=True)
class PlanKey(_Key):
    """The conflict plan made for an extraction, per planning round."""

    session_id: str
    extraction_digest: str
    round: int

    kind: ClassVar[str] = "plan"
    prefix: ClassVar[str] = "plan"

    @classmethod
    def for_extraction(cls, session_id: str, extraction_operation_id: str, round_: int) -> PlanKey:
        # Keyed on the extraction (whose id names the subject): a later run over more messages
        # makes its own plan.
        return cls(session_id, request_hash({"extraction": extraction_operation_id})[:16], round_)

    @property
    def operation_id(self) -> str:
        return f"plan/{self.session_id}/{self.extraction_digest}/{self.round}"

    def columns(self) -> KeyColumns:
        return KeyColumns(session_id=self.session_id, key_digest=self.extraction_digest, plan_round=self.round)


@dataclass(frozen=True)
class CommitKey(_Key):
    """A consolidation's commit of one session, for exactly this request."""

    session_id: str
    request_digest: str

    kind: ClassVar[str] = "commit"
    prefix: ClassVar[str] = "commit"

    @classmethod
    def for_request(cls, session_id: str, request: dict[str, Any]) -> CommitKey:
        # A consolidation's request names its subject, so the digest tells two subjects' "s1" apart.
        return cls(session_id, request_hash(request)[:16])

    @property
    def operation_id(self) -> str:
        return f"commit/{self.session_id}/{self.request_digest}"

    def columns(self) -> KeyColumns:
        return KeyColumns(session_id=self.session_id, key_digest=self.request_digest)


@dataclass(frozen=True)
class LiveWriteKey(_Key):
    """A live `write_fact`: recorded as a commit (its outcome is a CommitOutcome)."""

    request_digest: str

    kind: ClassVar[str] = "commit"
    prefix: ClassVar[str] = "live"

    @classmethod
    def for_request_hash(cls, req_hash: str) -> LiveWriteKey:
        return cls(req_hash[:24])

    @property
    def operation_id(self) -> str:
        return f"live/{self.request_digest}"

    def columns(self) -> KeyColumns:
        return KeyColumns(key_digest=self.request_digest)


@dataclass(frozen=True)
class RederiveKey(_Key):
    """One session's re-derivation within one operator request: its differences (a dry run) or
    its differences and the events that applied them. Recorded once, so a retried activity or a
    resumed run finds the session done; the extractor's name and version are stored with it, so
    later runs know which sessions the current extractor has re-derived."""

    request_id: str
    subject_id: str
    session_id: str
    extractor: str
    extractor_version: str
    dry_run: bool

    @property
    def kind(self) -> str:
        return "rederive-dry" if self.dry_run else "rederive"

    @property
    def prefix(self) -> str:
        return self.kind

    @property
    def operation_id(self) -> str:
        return f"{self.kind}/{self.request_id}/{self.subject_id}/{self.session_id}"

    def columns(self) -> KeyColumns:
        return KeyColumns(session_id=self.session_id, model=self.extractor, model_version=self.extractor_version,
                          key_digest=self.request_id)



@dataclass(frozen=True)
class ReviewKey(_Key):
    """The review's commit of one subject's marks (or a resolution of one mark), for exactly this
    request: the same findings reviewed again find the recorded outcome and append nothing."""

    request_digest: str

    kind: ClassVar[str] = "commit"
    prefix: ClassVar[str] = "review"

    @classmethod
    def for_request(cls, request: dict[str, Any]) -> ReviewKey:
        return cls(request_hash(request)[:24])

    @property
    def operation_id(self) -> str:
        return f"review/{self.request_digest}"

    def columns(self) -> KeyColumns:
        return KeyColumns(key_digest=self.request_digest)


OperationKey = (EmbedKey | EmbedBatchKey | ProviderStepKey | PlanKey | CommitKey | LiveWriteKey | RederiveKey
                | ReviewKey)
