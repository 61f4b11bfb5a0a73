"""The table registry: one declaration per tenant table, from which every table list derives.

Erasure (what is deleted, in which order, under which store name), the residue scan, the
compaction ticket, rebuild's digest and swap columns, the chaos campaign's duplicate checks and
the isolation tests all read their lists from `TABLES`, so a new table is declared once and
cannot be forgotten by one of them. A test compares the registry with the database: every
table of the public schema with a `tenant_id` column must be declared here.

Each table says:

- `role`: evidence (what the user said), event_log (the source of truth of memory), projection
  (derived from the log, rebuildable), cache (derived, recomputable elsewhere), bookkeeping
  (idempotency, erasure and key records);
- `subject_column`: the column naming the subject whose data a row holds (None: no subject data);
- `erasure`: what an erasure does to the subject's rows — "delete" (under the erasure store
  `store`), "redact" (rewritten to the keyed digest), "shred" (the subject key, deleted by its
  own step), "pseudonymise" (kept, the clear subject id replaced by the digest at completion) or
  None (nothing of the subject's is there);
- `rebuild`: for the projections a rebuild replays, the columns its digest covers and the
  columns a swap writes, and the table's place in the digest order;
- `natural_key`: columns that identify a row's content (the crash campaign counts duplicates).

`TABLES` is in erasure order: derived-most first, evidence last, so a crash midway never leaves
something derived without its source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["evidence", "event_log", "projection", "cache", "bookkeeping"]
ErasureAction = Literal["delete", "redact", "shred", "pseudonymise"]

# Erasure's first store is not a table: the subject's Redis keys (working memory).
WORKING_MEMORY_STORE = "working_memory"


@dataclass(frozen=True)
class RebuildColumns:
    order: int  # position in the combined digest (changing it changes every digest)
    digest: tuple[str, ...]  # select expressions hashed; bookkeeping timestamps left out
    write: tuple[str, ...]  # columns written when a rebuilt table is swapped in


@dataclass(frozen=True)
class Table:
    name: str
    role: Role
    subject_column: str | None = "subject_id"
    erasure: ErasureAction | None = None
    store: str | None = None  # the erasure store (step name) that deletes or redacts it
    label: str | None = None  # short name in reports (chaos duplicate counts)
    natural_key: str | None = None
    rebuild: RebuildColumns | None = None


TABLES: tuple[Table, ...] = (
    Table("memory_vectors", "projection", erasure="delete", store="vectors", label="vectors",
          natural_key="memory_kind, memory_id, version, model",
          rebuild=RebuildColumns(
              4, ("memory_id::text", "memory_kind", "version", "model", "embedding::real[]"),
              ("tenant_id", "subject_id", "memory_id", "memory_kind", "version", "model", "embedding",
               "created_at"))),
    Table("memory_search", "projection", erasure="delete", store="search_index", label="search_index",
          natural_key="memory_id, version",
          rebuild=RebuildColumns(
              3, ("memory_id::text", "memory_kind", "version", "search_text", "term_count", "happened_at"),
              # memory_search.tsv is generated
              ("tenant_id", "subject_id", "memory_id", "memory_kind", "version", "search_text", "term_count",
               "happened_at"))),
    # BM25's item counts and lengths per subject, kept by memory_search's triggers (deleting the
    # subject's index rows deletes its row; erasure deletes what would be left).
    Table("lexical_statistics", "projection", erasure="delete", store="search_index"),
    # The index's postings (item, lexeme), written and deleted by memory_search's triggers.
    Table("memory_postings", "projection", erasure="delete", store="search_index"),
    # BM25's document frequencies per lexeme, kept by the same triggers (a lexeme no item holds any
    # more loses its row).
    Table("lexical_frequencies", "projection", erasure="delete", store="search_index"),
    Table("projection_outbox", "projection", erasure="delete", store="outbox", label="outbox",
          natural_key="memory_id, version"),
    Table("observations", "projection", erasure="delete", store="observations", label="observations",
          natural_key="session_id, message_id",
          rebuild=RebuildColumns(
              2, ("memory_id::text", "session_id", "message_id", "version", "text", "happened_at",
                  "source_message_ids", "operation_id", "private_to"),
              ("memory_id", "tenant_id", "subject_id", "session_id", "message_id", "version", "text",
               "happened_at", "source_message_ids", "operation_id", "recorded_at", "private_to"))),
    Table("episodes", "projection", erasure="delete", store="episodes", label="episodes", natural_key="session_id",
          rebuild=RebuildColumns(
              1, ("memory_id::text", "session_id", "version", "summary", "sentences", "importance", "happened_at",
                  "source_message_ids", "operation_id", "private_to"),
              ("memory_id", "tenant_id", "subject_id", "session_id", "version", "summary", "sentences",
               "importance", "happened_at", "source_message_ids", "operation_id", "recorded_at", "private_to"))),
    Table("facts", "projection", erasure="delete", store="facts", label="facts",
          natural_key="namespace, key, value, version",
          rebuild=RebuildColumns(
              0, ("fact_id::text", "memory_id::text", "namespace", "key", "value", "version", "memory_version",
                  "status", "valid_from", "valid_to", "valid_until", "confidence", "claim_type", "permanence",
                  "task_session_id", "source_kind", "evidence_message_ids", "close_reason", "operation_id", "metadata",
                  "last_confirmed_at", "extracted_by"),
              ("fact_id", "tenant_id", "subject_id", "memory_id", "namespace", "key", "value", "version",
               "memory_version", "status", "valid_from", "valid_to", "valid_until", "recorded_at", "superseded_at",
               "confidence", "claim_type", "permanence", "task_session_id", "source_kind", "evidence_message_ids",
               "close_reason", "operation_id", "metadata", "last_confirmed_at", "extracted_by"))),
    # Edges between the subject's entities, each interval a row: deleted with its facts (before the
    # entities they join).
    Table("relations", "projection", erasure="delete", store="facts", label="relations",
          natural_key="memory_id, version",
          rebuild=RebuildColumns(
              7, ("relation_id::text", "memory_id::text", "source_entity_id::text", "relation", "role",
                  "target_entity_id::text", "valid_from", "valid_to", "version", "closed_version",
                  "started_event_id::text", "closed_event_id::text", "evidence_message_ids", "operation_id"),
              ("relation_id", "tenant_id", "subject_id", "memory_id", "source_entity_id", "relation", "role",
               "target_entity_id", "valid_from", "valid_to", "version", "closed_version", "started_event_id",
               "closed_event_id", "evidence_message_ids", "operation_id", "recorded_at"))),
    # The subject's entities and the messages that mention them: deleted with its facts.
    Table("entity_mentions", "projection", erasure="delete", store="facts", label="entity_mentions",
          natural_key="memory_id, message_id",
          rebuild=RebuildColumns(
              6, ("memory_id::text", "message_id", "session_id", "version"),
              ("tenant_id", "subject_id", "memory_id", "message_id", "session_id", "version"))),
    Table("entities", "projection", erasure="delete", store="facts", label="entities", natural_key="memory_id",
          rebuild=RebuildColumns(
              5, ("memory_id::text", "version", "name", "entity_type", "aliases", "first_seen_at", "last_seen_at",
                  "operation_id"),
              ("memory_id", "tenant_id", "subject_id", "version", "name", "entity_type", "aliases", "first_seen_at",
               "last_seen_at", "operation_id", "recorded_at"))),
    # The review's marks of memories that may have gone stale (ids, reason codes, times):
    # projected from their events, deleted with the subject's facts.
    Table("stale_marks", "projection", erasure="delete", store="facts", label="stale_marks", natural_key="memory_id",
          rebuild=RebuildColumns(
              8, ("memory_id::text", "marked_memory_id::text", "marked_kind", "fact_id::text", "reason",
                  "related_memory_ids::text[]", "confirmed_at", "state", "marked_at", "resolved_at", "resolution",
                  "version", "operation_id"),
              ("tenant_id", "subject_id", "memory_id", "marked_memory_id", "marked_kind", "fact_id", "reason",
               "related_memory_ids", "confirmed_at", "state", "marked_at", "resolved_at", "resolution", "version",
               "operation_id", "recorded_at"))),
    # Forgotten memories in their grace period and swept memories' tombstones (ids and versions):
    # deleted with the subject's facts (the subject's tombstone outlives them).
    Table("forgotten_memories", "bookkeeping", erasure="delete", store="facts"),
    # The subject's consents to storing a namespace: deleted with its facts.
    Table("consents", "bookkeeping", erasure="delete", store="facts"),
    # Recorded provider results (extractions, summaries, embeddings): recomputable by the provider.
    Table("operations", "cache", erasure="delete", store="operations"),
    # What each subject showed in a rebuild (digests and counts); deleted with the operations.
    Table("rebuild_reports", "bookkeeping", erasure="delete", store="operations"),
    # An agent's tool calls made once (memory/tool_calls.py): results under the subject key.
    Table("tool_calls", "bookkeeping", erasure="delete", store="operations"),
    # Webhook deliveries about the subject (memory/webhooks.py): ids and counts, never content.
    Table("webhook_deliveries", "bookkeeping", erasure="delete", store="operations"),
    # How often and how recently each memory was recalled (store/access.py): usage telemetry outside
    # the event log (a rebuild does not reproduce it); deleted with the operations.
    Table("memory_access", "bookkeeping", erasure="delete", store="operations"),
    Table("messages", "evidence", erasure="delete", store="messages"),
    Table("sessions", "evidence", erasure="delete", store="messages"),
    Table("subject_keys", "bookkeeping", erasure="shred"),
    # Payloads are crypto-shredded with the key; the clear-text metadata is redacted last.
    Table("memory_events", "event_log", erasure="redact", store="event_metadata", label="events",
          natural_key="namespace, key_digest, aggregate_version"),
    Table("erasure_requests", "bookkeeping", erasure="pseudonymise"),
    Table("tombstones", "bookkeeping", erasure="pseudonymise"),
    # Tenant ids only: the tenants registry the Schedules list tenants from.
    Table("tenants", "bookkeeping", subject_column=None),
    # The tenant's recall policy: configuration, no subject data.
    Table("recall_policies", "bookkeeping", subject_column=None),
    # The tenant's retention policy: configuration, no subject data.
    Table("retention_policies", "bookkeeping", subject_column=None),
    # Which embedding model the tenant's recall reads, and a re-embedding's target: no subject data.
    Table("embedding_models", "bookkeeping", subject_column=None),
    # The tenant's write policy and the write gate's counters: no subject data.
    Table("write_policies", "bookkeeping", subject_column=None),
    Table("write_gate_counts", "bookkeeping", subject_column=None),
    # The tenant's provider data policy (what a remote model may see): no subject data.
    Table("provider_policies", "bookkeeping", subject_column=None),
    # The tenant's daily model-token budget: configuration, no subject data.
    Table("token_budgets", "bookkeeping", subject_column=None),
    Table("memory_categories", "bookkeeping", subject_column=None),
    # Operator counters (reads, leak-filter drops): no subject data.
    Table("operator_counters", "bookkeeping", subject_column=None),
    # The HTTP API's keys (hashes): no subject data.
    Table("api_keys", "bookkeeping", subject_column=None),
    # The tenant's webhook endpoints (URLs, event types, encrypted signing secrets): no subject data.
    Table("webhook_endpoints", "bookkeeping", subject_column=None),
)
BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}


def tenant_tables() -> frozenset[str]:
    """Every table holding tenant data (row-level security by app.tenant_id)."""
    return frozenset(BY_NAME)


def subject_tables() -> tuple[str, ...]:
    """Tables whose rows name a subject (erasure order)."""
    return tuple(t.name for t in TABLES if t.subject_column is not None)


def erasure_sql_stores() -> dict[str, tuple[str, ...]]:
    """Erasure store → the tables it deletes the subject's rows from, in erasure order."""
    stores: dict[str, tuple[str, ...]] = {}
    for t in TABLES:
        if t.erasure == "delete" and t.store is not None:
            stores[t.store] = (*stores.get(t.store, ()), t.name)
    return stores


def erasure_stores() -> tuple[str, ...]:
    """The current erasure workflow's step list: working memory, the deleting stores, then the
    redacting ones (the event log's metadata, last)."""
    redacting = tuple(dict.fromkeys(t.store for t in TABLES if t.erasure == "redact" and t.store is not None))
    return (WORKING_MEMORY_STORE, *erasure_sql_stores(), *redacting)


def erasure_tables() -> tuple[str, ...]:
    """Every table an erasure deletes from or rewrites (the compaction ticket's tables)."""
    return tuple(t.name for t in TABLES if t.erasure is not None)


def rebuild_tables() -> tuple[Table, ...]:
    """The projections a rebuild replays, in digest order."""
    return tuple(sorted((t for t in TABLES if t.rebuild is not None),
                        key=lambda t: t.rebuild.order if t.rebuild else 0))


def digest_columns() -> dict[str, tuple[str, ...]]:
    return {t.name: t.rebuild.digest for t in rebuild_tables() if t.rebuild}


def write_columns() -> dict[str, tuple[str, ...]]:
    return {t.name: t.rebuild.write for t in rebuild_tables() if t.rebuild}


def duplicate_keys() -> dict[str, tuple[str, str]]:
    """Report label → (table, natural key) for the tables whose content rows must be unique."""
    return {t.label or t.name: (t.name, t.natural_key) for t in TABLES if t.natural_key}
