"""The HTTP API keeps the OpenAPI document it serves, for inputs nobody wrote by hand: schemathesis
reads `/v1/openapi.json` from a real uvicorn server on the session's stack and generates requests
for every operation in it, valid ones and invalid ones, sent with an `erase` key (the widest
scope, so every operation is reachable). Every answer passes every check schemathesis has: no
5xx, a status the operation documents, the content type and headers documented for it, a body its
schema accepts, a request the document calls valid accepted and one it calls invalid refused, a
wrong or missing credential refused, an unsupported method answered 405 with its `Allow`.

The cases are bounded per operation and derandomized: the same cases every run. All failures are
collected before the test fails, so one run names each operation and check that broke."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.errors import FailureGroup

from agent_memory.api.http.server import serving
from agent_memory.security.api_keys import create_key
from tests.api.test_http_api import MESSAGES, api, bearer

schemathesis.checks.load_all_checks()
CHECKS = list(schemathesis.checks.CHECKS.get_all())
# A time the server accepts is in its document's date-time pattern (an offset within ±15:59) and,
# as the fields' descriptions say, not later than now: a date-time from 1970 to yesterday, in one
# of the offsets the pattern admits.
OFFSETS = st.sampled_from([timedelta(0), timedelta(hours=2), timedelta(hours=-7, minutes=-30),
                           timedelta(hours=15, minutes=59), timedelta(hours=-15, minutes=-59)])
PAST_TIMES = st.builds(
    lambda at, offset: at.replace(tzinfo=UTC).astimezone(timezone(offset)).isoformat(),
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime.now() - timedelta(days=1)), OFFSETS)
schemathesis.openapi.format("date-time", PAST_TIMES)
POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE
# A subject the test gives a session first: generated subject ids almost never name one with data,
# so a pass on this one reaches the reads, fixes and the erasure of a subject that has memory.
SEEDED_SUBJECT = "fuzzed"
# Each pass: its name, its generation mode, cases per operation, and whether the subject is the seeded one.
# Valid inputs reach the handlers; invalid ones the validation and error paths.
PASSES = [("valid", POSITIVE, 20, False), ("invalid", NEGATIVE, 15, False), ("seeded subject", POSITIVE, 10, True)]
# Every operation the document states, each fuzzed: a new one must be added here, so none goes
# unfuzzed unnoticed. /mcp and the operator surfaces (/console, /codec, /metrics) are not in the document.
OPERATIONS = {
    "GET /v1/health", "GET /v1/ready", "POST /v1/subjects/{subject_id}/sessions/{session_id}/messages",
    "POST /v1/subjects/{subject_id}/sessions/{session_id}/end", "GET /v1/runs/{workflow_id}",
    "GET /v1/subjects/{subject_id}/facts", "GET /v1/subjects/{subject_id}/entities",
    "GET /v1/subjects/{subject_id}/relations", "POST /v1/subjects/{subject_id}/recall",
    "POST /v1/subjects/{subject_id}/context", "POST /v1/subjects/{subject_id}/prompt",
    "PUT /v1/subjects/{subject_id}/facts/{namespace}/{key}",
    "POST /v1/subjects/{subject_id}/memories/{memory_id}/forget",
    "POST /v1/subjects/{subject_id}/memories/{memory_id}/restore", "GET /v1/subjects/{subject_id}/export",
    "POST /v1/subjects/{subject_id}/erasure", "GET /v1/erasures/{request_id}",
    "POST /v1/subjects/{subject_id}/tool-calls/{call_key}/claim",
    "POST /v1/subjects/{subject_id}/tool-calls/{call_key}/result", "GET /v1/subjects/{subject_id}/tool-calls/{call_key}",
    "POST /v1/webhooks", "GET /v1/webhooks", "DELETE /v1/webhooks/{endpoint_id}", "GET /v1/webhooks/deliveries",
    "POST /v1/webhooks/deliveries/{delivery_id}/redeliver", "POST /v1/webhooks/{endpoint_id}/rotate-secret",
    "GET /v1/categories", "PUT /v1/categories/{name}", "DELETE /v1/categories/{name}",
    "GET /v1/stale-marks", "POST /v1/subjects/{subject_id}/stale-marks/{mark_id}/resolve",
}
# Operations with no invalid input to send, so no "invalid" pass: health, readiness and the
# categories' listing take no input, and any string is a workflow id to look up (slashes included; an unknown
# one is 404).
NO_INVALID_INPUT = {"GET /v1/health", "GET /v1/ready", "GET /v1/categories", "GET /v1/runs/{workflow_id}"}


@dataclass
class FuzzLog:
    """What the fuzz sent and what broke: cases per pass, answers by status, and each distinct
    failure (operation, check) once, with the request that shows it."""

    cases: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[tuple[str, str], str] = field(default_factory=dict)
    set_aside: Counter[str] = field(default_factory=Counter)

    def report(self) -> str:
        lines = [f"{sum(self.cases.values())} cases {dict(self.cases)}; valid-by-schema cases set aside for a "
                 f"rule between fields {dict(self.set_aside)}; statuses "
                 f"{dict(sorted(self.statuses.items()))}; {len(self.failures)} distinct failures"]
        lines += [f"- {operation}: {title}\n{example}" for (operation, title), example in sorted(self.failures.items())]
        return "\n".join(lines)


def fuzz(base_url: str, token: str) -> FuzzLog:
    """Every operation of the served document, each pass's cases sent and checked."""
    schema = schemathesis.openapi.from_url(f"{base_url}/v1/openapi.json", timeout=60)
    # Every case carries the real key: a generated or missing Authorization would be 401s, and enough of
    # them from one address turn the later ones into the failure limiter's 429 (both are tested
    # on their own in test_http_api.py and test_api_edge.py).
    schema.config.generation.update(with_security_parameters=False)
    log = FuzzLog()
    session = requests.Session()
    session.headers.update(bearer(token))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {operation.label for operation in operations} == OPERATIONS

    def checked(case: schemathesis.Case, name: str) -> None:
        if mode_of[name] is POSITIVE and (rule := broken_cross_field_rule(case.body, case.query)):
            log.set_aside[rule] += 1
            return
        log.cases[name] += 1
        response = case.call(base_url=base_url, session=session, timeout=60)
        log.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as group:
            for failure in group.exceptions:
                log.failures.setdefault((case.operation.label, failure.title), f"{group.message.strip()}\n")

    mode_of = {name: mode for name, mode, _, _ in PASSES}
    for name, mode, examples, seeded in PASSES:
        for operation in operations:
            if mode is NEGATIVE and operation.label in NO_INVALID_INPUT:
                continue
            if seeded and "{subject_id}" not in operation.path:
                continue
            fixed = {"subject_id": SEEDED_SUBJECT} if seeded else None
            strategy = operation.as_strategy(generation_mode=mode, path_parameters=fixed)
            send(strategy, examples, lambda case, name=name: checked(case, name))
    return log


def broken_cross_field_rule(body: Any, query: Any) -> str | None:
    """The rule between fields a generated request breaks, of those the fields' descriptions state
    and a JSON schema cannot: such a request is refused with 422 by design, so the positive passes
    set it aside."""
    body = {**(query if isinstance(query, dict) else {}), **(body if isinstance(body, dict) else {})}
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for message in messages:
        if message.get("private") and message.get("agent_id") is None:
            return "a private message names its agent"
    if len({(bool(m.get("private")), m.get("agent_id") if m.get("private") else None) for m in messages}) > 1:
        return "every message of a session is private to the same agent, or none is"
    holders: dict[Any, Any] = {}
    if any(holders.setdefault(m.get("turn_index"), m.get("message_id")) != m.get("message_id") for m in messages):
        return "each message of a session has its own turn_index"
    since, until = body.get("since"), body.get("until")
    if isinstance(since, str) and isinstance(until, str) and \
            datetime.fromisoformat(since) > datetime.fromisoformat(until):
        return "since is not after until"
    if body.get("expires_at") is not None and body.get("ttl_seconds") is not None:
        return "expires_at or ttl_seconds, not both"
    expires, observed = body.get("expires_at"), body.get("observed_at")
    if isinstance(expires, str) and datetime.fromisoformat(expires) <= (
            datetime.fromisoformat(observed) if isinstance(observed, str) else datetime.now(UTC)):
        return "expires_at is after observed_at (default now)"
    return None


def send(strategy: Any, examples: int, check: Callable[[schemathesis.Case], None]) -> None:
    """`examples` cases of the strategy, the same ones every run, each handed to `check`."""

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def each(case: schemathesis.Case) -> None:
        check(case)

    each()


@pytest.mark.timeout(900)  # about 1,000 requests, each checked several ways, on a loaded CI machine
async def test_every_operation_answers_as_its_openapi_document_says(client, services, tenant, monkeypatch):
    eraser = (await create_key(services.pool, tenant, "erase")).token
    # The auth check sends each operation without a key and with a wrong one, hundreds of failures
    # from one address: the failure limiter (tested on its own in test_api_edge.py) would answer
    # them 429, so this server allows them all.
    monkeypatch.setattr(client.services, "settings",
                        client.services.settings.model_copy(update={"auth_failure_burst": 1_000_000}))
    async with api(client) as http:
        seeded = await http.post(f"/v1/subjects/{SEEDED_SUBJECT}/sessions/h1/messages", headers=bearer(eraser),
                                 json={"messages": MESSAGES})
        assert seeded.status_code == 200, seeded.text
    async with serving(client) as port:
        # The server runs in this event loop; the fuzz's blocking HTTP client runs beside it.
        log = await asyncio.to_thread(fuzz, f"http://127.0.0.1:{port}", eraser)
    print(log.report())
    assert log.statuses and not log.failures, log.report()
