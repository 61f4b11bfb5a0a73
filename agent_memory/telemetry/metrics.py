"""The product's Prometheus metric families, defined once for every process (worker, API, `up`).

Names follow the Prometheus conventions: the `agent_memory_` namespace, base units (`_seconds`),
counters ending in `_total` (prometheus_client adds it to a counter's exposition name). Labels are
bounded: `tenant` passes through `tenant_label` (the top tenants by name, the rest `other`, or
`all` when tenant labels are switched off); subjects, sessions, memory text and free-form error
messages never become a label. `stats` reports the same counts under the same names.
"""

from __future__ import annotations

import threading
from collections import Counter as _Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
NAMESPACE = "agent_memory"

# Tenant labels: at most this many tenants by name (the first seen keep theirs), the rest `other`.
_TENANT_LABEL_CAP = 50
_TENANT_LABELS_ON = True
_named_tenants: _Tally[str] = _Tally()
_tenant_lock = threading.Lock()
OTHER_TENANTS = "other"
ALL_TENANTS = "all"


def configure_tenant_labels(*, cap: int, enabled: bool) -> None:
    """Set the tenant label's cap and switch (AGENT_MEMORY_METRICS_TENANT_CAP / _TENANT_LABELS)."""
    global _TENANT_LABEL_CAP, _TENANT_LABELS_ON
    with _tenant_lock:
        _TENANT_LABEL_CAP, _TENANT_LABELS_ON = max(0, cap), enabled
        _named_tenants.clear()


def tenant_label(tenant_id: str | None) -> str:
    """The bounded `tenant` label value for a tenant id."""
    if not _TENANT_LABELS_ON or not tenant_id:
        return ALL_TENANTS
    with _tenant_lock:
        if tenant_id in _named_tenants:
            _named_tenants[tenant_id] += 1
            return tenant_id
        if len(_named_tenants) < _TENANT_LABEL_CAP:
            _named_tenants[tenant_id] = 1
            return tenant_id
    return OTHER_TENANTS


def _counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
    return Counter(name, doc, labels, namespace=NAMESPACE, registry=REGISTRY)


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
    return Gauge(name, doc, labels, namespace=NAMESPACE, registry=REGISTRY)


def _histogram(name: str, doc: str, labels: tuple[str, ...] = (), buckets: tuple[float, ...] = Histogram.DEFAULT_BUCKETS
               ) -> Histogram:
    return Histogram(name, doc, labels, namespace=NAMESPACE, registry=REGISTRY, buckets=buckets)


SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LONG_SECONDS_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100)
TOKEN_BUCKETS = (0, 100, 250, 500, 1000, 2000, 4000, 8000, 16000)

# --- consolidation and models (worker) -------------------------------------------------------
CONSOLIDATIONS = _counter("consolidations", "Consolidation runs finished, by outcome (committed; "
                          "no_substance: the substance gate kept the session from an episode and no fact "
                          "was written; failed).", ("tenant", "outcome"))
MODEL_CALLS = _counter("model_calls", "Model calls made by the providers, by purpose "
                       "(extract, importance, summarize, embed, query: a read's query embedding) and "
                       "outcome (ok, error).", ("tenant", "model", "purpose", "outcome"))
MODEL_TOKENS = _counter("model_tokens", "Model tokens consumed, by direction (input, output).",
                        ("tenant", "model", "direction"))
MODEL_COST = _counter("model_cost_usd", "Estimated model cost in US dollars.", ("tenant", "model"))
RATE_LIMIT_WAITS = _counter("rate_limit_waits", "Model calls the model answered as rate limited (HTTP 429): "
                            "each waits and is retried.", ("tenant",))
PARKED_RUNS = _gauge("parked_runs", "Consolidation runs parked on their tenant's token budget.", ("tenant",))

# --- projection (worker) ----------------------------------------------------------------------
PROJECTION_LAG_EVENTS = _gauge("projection_lag_events", "Memory events not yet applied to the vector "
                               "projection.", ("tenant",))
PROJECTION_LAG_SECONDS = _gauge("projection_lag_seconds", "Age of the oldest unprojected memory event.",
                                ("tenant",))
OUTBOX_DEPTH = _gauge("outbox_depth", "Outbox rows waiting to be projected.", ("tenant",))
DEAD_LETTERS = _gauge("dead_letters", "Outbox rows that exhausted their attempts.", ("tenant",))
REBUILDS = _counter("rebuilds", "Subject projections rebuilt, by outcome (equal, mismatch, failed).",
                    ("outcome",))
REBUILD_DIGEST_MISMATCHES = _counter("rebuild_digest_mismatches", "Subject rebuilds whose digest differed "
                                     "from the live projection's.")

# --- forgetting and erasure (worker) ----------------------------------------------------------
ERASURES = _gauge("erasures", "Erasure requests by state (running, completed, failed, stuck).",
                  ("tenant", "state"))
ERASURE_OLDEST_OPEN_SECONDS = _gauge("erasure_oldest_open_seconds", "Age of the oldest erasure not "
                                     "yet completed (0 when none is open).")
ERASURE_DEADLINE_SECONDS = _gauge("erasure_deadline_seconds", "How long an erasure may stay open before "
                                  "it counts as stuck (AGENT_MEMORY_ERASURE_DEADLINE_SECONDS); alerts compare "
                                  "against it.")
ERASURE_DURATION = _histogram("erasure_duration_seconds", "Time from an erasure's registration to its "
                              "receipt.", buckets=LONG_SECONDS_BUCKETS)
ERASURE_RESIDUE = _counter("erasure_residue_found", "Residue rows found by erasure verification scans.")
FORGOTTEN_IN_GRACE = _gauge("forgotten_in_grace", "Forgotten memories still restorable.", ("tenant",))
SWEPT_MEMORIES = _counter("swept_memories", "Forgotten memories swept after their grace period.", ("tenant",))

# --- webhooks (worker) ------------------------------------------------------------------------
WEBHOOK_DELIVERIES = _counter("webhook_deliveries", "Webhook delivery attempts, by outcome "
                              "(delivered, failed, refused) and attempt (1, 2, 3, 4+).",
                              ("tenant", "outcome", "attempt"))
WEBHOOK_DEAD_DELIVERIES = _gauge("webhook_dead_deliveries", "Webhook deliveries given up on.", ("tenant",))

# --- read path (API) --------------------------------------------------------------------------
READ_DURATION = _histogram("read_duration_seconds", "Recall and context latency, by route "
                           "(recall, context, prompt).", ("route",), buckets=SECONDS_BUCKETS)
CONTEXT_ITEMS = _histogram("context_items", "Items per assembled context.", buckets=COUNT_BUCKETS)
CONTEXT_TOKENS = _histogram("context_tokens", "Tokens per assembled context.", buckets=TOKEN_BUCKETS)

# --- trust and availability (API and worker) ---------------------------------------------------
AUTH_FAILURES = _counter("auth_failures", "Requests refused for their credential, by reason "
                         "(missing, malformed, unknown: unknown or revoked, scope, limited).", ("reason",))
UNAVAILABLE_RESPONSES = _counter("unavailable_responses", "503 answers, by the dependency that was "
                                 "down (postgres, temporal, redis, service: another the answer names).",
                                 ("dependency",))
REFUSED_WORKFLOW_INPUTS = _counter("refused_workflow_inputs", "Destructive runs refused for their input, "
                                   "by reason (unregistered, claimed, expired, payload).", ("reason",))

# --- lifecycle health (worker) ----------------------------------------------------------------
SCHEDULES_NOT_AS_DESIGNED = _gauge("schedules_not_as_designed", "Schedules paused, altered or missing, "
                                   "by state.", ("state",))
STALE_FACTS = _gauge("stale_facts", "Facts marked by the review and not yet resolved, by reason.",
                     ("tenant", "reason"))

# --- capacity (worker) ------------------------------------------------------------------------
TASK_QUEUE_BACKLOG = _gauge("task_queue_backlog", "Approximate tasks waiting on the task queue.",
                            ("task_queue",))
DB_POOL_CONNECTIONS = _gauge("db_pool_connections", "Database pool connections by state "
                             "(in_use, idle, waiting).", ("state",))
