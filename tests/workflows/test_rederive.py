"""Re-derivation of stored memory under the current extractor, on the real stack.

A session is consolidated by the rule extractor registered as an older version that misread it
(a misspelt city, a missed allergy, a hometown the session never states, a wrong diet a person
then corrects directly). The current extractor's re-derivation lists the differences in a dry run
without writing an event, refuses to write without a registered request, applies them for a
registered one (a correction, a new fact; the unsupported value listed and left; the person's
value untouched), leaves a projection a rebuild reproduces, and finds nothing to do again. A run
resumed after part of its sessions were done does those sessions no second time."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.consolidation import ConsolidationActivities
from agent_memory.core import contract
from agent_memory.core.hooks import install_fault_hook
from agent_memory.core.models import (
    ExtractionResult,
    KnownFact,
    Message,
    RederiveInput,
    RederiveProgress,
    StepInput,
)
from agent_memory.memory.operations import OperationRecorder
from agent_memory.memory.rederive import rederive_session, sessions_to_rederive
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.providers.offline.extractor import RuleFactExtractor
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.providers.openai_server import FakeOpenAIServer
from tests.security.replays import refused_as_consumed, replay
from tests.sessions import session
from tests.workflows.test_consolidation_openai import bundle_for, route

SUBJECT = "lin"
FIRST = session("d-1", "2024-03-01T09:00:00Z", "I live in Hangzhou.", "I'm allergic to peanuts.",
                "I'm vegetarian.", "I work at Acme.")
SECOND = session("d-2", "2024-04-01T09:00:00Z", "I live in Hangzhou.")  # restates the city: a second session


class OlderExtractor:
    """The rule extractor as an older version that misread its sessions."""

    name = RuleFactExtractor.name
    version = "8-misread"
    runs_in_worker = True

    def __init__(self) -> None:
        self.inner = RuleFactExtractor()

    async def extract(self, messages: list[Message], *, subject_role: str = "user",
                      current_facts: list[KnownFact] | None = None) -> ExtractionResult:
        found = await self.inner.extract(messages, subject_role=subject_role, current_facts=current_facts)
        facts = []
        for fact in found.facts:
            if fact.key == "allergy_peanuts":
                continue  # missed
            if fact.key == "home_city":
                fact = fact.model_copy(update={"value": "Hangzou"})
            if fact.key == "restriction":
                fact = fact.model_copy(update={"value": "vegan"})
            facts.append(fact)
        if facts:  # a hometown the session never states
            facts.append(facts[-1].model_copy(update={"namespace": "location", "key": "hometown", "value": "Ningbo"}))
        return found.model_copy(update={"facts": facts, "extractor_version": self.version})


def _older() -> OfflineProviders:
    current = offline_providers()
    return OfflineProviders(OlderExtractor(), current.scorer, current.summarizer,  # type: ignore[arg-type]
                            current.embedder)


async def _consolidate(client, tenant, *sessions):
    for s in sessions:
        await client.append_messages(tenant, SUBJECT, s)
        result = await client.consolidation_result(await client.end_session(tenant, SUBJECT, s.session_id))
        assert result.refused_reason is None
    await client.admin.wait_for_projection(tenant, SUBJECT)


async def _events(services, tenant) -> int:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM memory_events WHERE tenant_id = %s", (tenant,))
        row = await cur.fetchone()
    return int(row[0])


def _current(facts) -> dict[str, tuple[str, str | None]]:
    return {f"{f.namespace}/{f.key}": (f.value, f.extracted_by) for f in facts}


async def _misread_memory(client, services, tenant, running_worker) -> None:
    """FIRST consolidated by the older extractor, then the person corrects the diet directly."""
    async with running_worker(providers=_older()):
        await _consolidate(client, tenant, FIRST)
    [diet] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "restriction"]
    await client.write_fact(tenant, SUBJECT, "diet", "restriction", "pescatarian", expected_version=diet.version,
                            evidence_message_ids=["d-1:3"], actor="user")


async def test_rederive_lists_then_applies_the_differences_and_keeps_what_a_person_wrote(
        client, services, tenant, task_queue, running_worker):
    await _misread_memory(client, services, tenant, running_worker)
    older = f"{RuleFactExtractor.name}/{OlderExtractor.version}"
    current = f"{RuleFactExtractor.name}/{RuleFactExtractor.version}"
    assert _current(await client.facts(tenant, SUBJECT)) == {
        "location/home_city": ("Hangzou", older), "location/hometown": ("Ningbo", older),
        "diet/restriction": ("pescatarian", "live-write:user"), "work/employer": ("Acme", older)}

    async with running_worker():
        # The dry run, through the command line: the differences per subject, and no event written.
        before = await _events(services, tenant)
        listed = await asyncio.to_thread(run_cli, services, "rederive", "--tenant", tenant, "--subject", SUBJECT,
                                         "--dry-run", "--json", task_queue=task_queue)
        assert listed.returncode == 0, listed.stderr
        report = json.loads(listed.stdout)
        assert await _events(services, tenant) == before
        assert report["result"]["dry_run"] and report["result"]["extractor"] == current
        [subject] = report["subjects"]
        assert subject["subject_id"] == SUBJECT and subject["sessions"] == ["d-1"]
        found = {kind: {(c["namespace"], c["key"], c["current_value"], c["derived_value"]) for c in subject[kind]}
                 for kind in ("added", "changed", "unsupported", "kept_confirmed", "withheld")}
        assert found == {
            "added": {("diet", "allergy_peanuts", None, "peanuts")},
            "changed": {("location", "home_city", "Hangzou", "Hangzhou")},
            "unsupported": {("location", "hometown", "Ningbo", None)},
            "kept_confirmed": {("diet", "restriction", "pescatarian", "vegetarian")},
            "withheld": set()}
        totals = report["result"]["totals"]
        assert (totals["sessions"], totals["added"], totals["changed"], totals["events_appended"]) == (1, 1, 1, 0)

        # A run that writes, started without a registered request (a bare Temporal client): refused.
        handle = await services.temporal.start_workflow(
            contract.REDERIVE_WORKFLOW,
            RederiveInput(tenant_id=tenant, subject_id=SUBJECT, request_id="unregistered", dry_run=False),
            id=contract.rederive_workflow_id(tenant, SUBJECT, "unregistered"), task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as refused:
            await asyncio.wait_for(handle.result(), timeout=60)
        cause = refused.value.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        assert isinstance(cause, ApplicationError) and cause.type == contract.ErrorType.UNAUTHORIZED_REQUEST
        assert await _events(services, tenant) == before

        # The real run: a correction and a new fact, each an event; nothing else changes.
        run = await client.admin.rederive(tenant, SUBJECT, dry_run=False)
        applied = await client.admin.rederive_result(run)
        # The Temporal UI reads it without the payload key: its ids, its tenant and subject, and its counts.
        metadata = await run.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        described = await run.describe()
        assert await described.static_summary() == f"rederive {tenant}/{SUBJECT}/{applied.result.request_id}"
        assert described.typed_search_attributes.get(contract.TENANT_ID) == tenant
        assert described.typed_search_attributes.get(contract.SUBJECT_ID) == SUBJECT
        assert metadata.current_details.splitlines()[:4] == [
            "**done**", "subjects done: 1", "sessions total: 1", "sessions done: 1"]
        assert "added: 1" in metadata.current_details and "events appended: 2" in metadata.current_details
        assert "Hangzhou" not in metadata.current_details
        assert applied.result.totals.events_appended == 2 and not applied.result.dry_run
        assert await _events(services, tenant) == before + 2
        assert _current(await client.facts(tenant, SUBJECT)) == {
            "location/home_city": ("Hangzhou", current), "diet/allergy_peanuts": ("peanuts", current),
            "location/hometown": ("Ningbo", older),  # unsupported: listed, left as it is
            "diet/restriction": ("pescatarian", "live-write:user"),  # the person's value
            "work/employer": ("Acme", older)}
        history = [(f.value, f.status) for f in await client.facts(tenant, SUBJECT, history=True)
                   if f.key == "home_city"]
        assert history == [("Hangzou", "voided"), ("Hangzhou", "active")]  # corrected: the old value was wrong

        rebuilt = await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))
        assert rebuilt.all_equal and rebuilt.subjects_equal == 1

        # Again: the current extractor re-derived the session, so no session is due and nothing is written;
        # every session, explicitly, finds the same differences already applied.
        again = await client.admin.rederive_result(await client.admin.rederive(tenant, SUBJECT, dry_run=False))
        assert again.result.totals.sessions == 0 and again.subjects == []
        every = await client.admin.rederive_result(await client.admin.rederive(tenant, SUBJECT, dry_run=False, all_sessions=True))
        assert every.result.totals.sessions == 1 and every.result.totals.events_appended == 0
        assert (every.result.totals.unsupported, every.result.totals.kept_confirmed) == (1, 1)
        assert await _events(services, tenant) == before + 2

        # The command's text: each difference on a line of stdout, the run's link on stderr.
        text = await asyncio.to_thread(run_cli, services, "rederive", "--tenant", tenant, "--subject", SUBJECT,
                                       "--all-sessions", "--dry-run", task_queue=task_queue)
        assert text.returncode == 0, text.stderr
        lines = text.stdout.splitlines()
        assert lines[0] == f"{SUBJECT}: 1 session(s)"
        assert lines[1].split()[:3] == ["unsupported", "location/hometown:", "Ningbo"]
        assert lines[2].split()[:6] == ["kept", "confirmed", "diet/restriction:", "pescatarian", "→", "vegetarian"]
        assert lines[3].startswith("1 subject(s), 1 session(s) re-derived by rule-extractor/") and \
            "nothing written" in lines[3] and len(lines) == 4
        assert "workflow rederive/" in text.stderr
        assert await _events(services, tenant) == before + 2


async def test_a_resumed_rederivation_does_its_done_sessions_no_second_time(client, services, tenant,
                                                                           running_worker):
    async with running_worker(providers=_older()):
        await _consolidate(client, tenant, FIRST, SECOND)
    extractor = RuleFactExtractor()
    async with running_worker():
        assert await sessions_to_rederive(services.pool, services.keyring, tenant, SUBJECT, extractor) == [
            "d-1", "d-2"]
        # A run that did d-1 and stopped: the current extraction recorded (the consolidation's step),
        # d-1's events applied under the request.
        current = offline_providers()
        steps = ConsolidationActivities(services.pool, services.keyring, extractor, current.scorer,
                                        current.summarizer, current.embedder)
        extraction = await ActivityEnvironment().run(
            steps.extract_facts, StepInput(tenant_id=tenant, subject_id=SUBJECT, session_id="d-1"))
        recorded = await OperationRecorder(services.pool, services.keyring).load(
            tenant, SUBJECT, extraction.operation_id, ExtractionResult)
        request = "resumed"
        before = await _events(services, tenant)
        operation_id, done, reused = await rederive_session(
            services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id="d-1",
            request_id=request, extraction_operation_id=extraction.operation_id, extraction=recorded, dry_run=False)
        assert not reused and done.events_appended == 3  # Hangzou and vegan corrected, the allergy added
        after_first = await _events(services, tenant)
        assert after_first == before + 3
        # The same step once more (an activity retried after its commit): the record, nothing written.
        again = await rederive_session(
            services.pool, services.keyring, tenant_id=tenant, subject_id=SUBJECT, session_id="d-1",
            request_id=request, extraction_operation_id=extraction.operation_id, extraction=recorded, dry_run=False)
        assert again == (operation_id, done, True)
        assert await _events(services, tenant) == after_first

        # The run started again under the same request: d-1 is done (the current extractor re-derived
        # it), so only d-2 is due; the request's report has both sessions' records.
        assert await sessions_to_rederive(services.pool, services.keyring, tenant, SUBJECT, extractor) == ["d-2"]
        report = await client.admin.rederive_result(await client.admin.rederive(tenant, SUBJECT, dry_run=False,
                                                                    request_id=request))
        assert (report.result.totals.sessions, report.result.totals.events_appended) == (1, 0)
        assert await _events(services, tenant) == after_first
        [subject] = report.subjects
        assert subject.sessions == ["d-1", "d-2"]
        assert {(c.namespace, c.key) for c in subject.changed} == {("location", "home_city"), ("diet", "restriction")}
        # d-2 said the city again (the older extractor confirmed its misreading there): d-1 opened
        # the value, so d-1 corrected it, and d-2 reads what is now current.
        assert _current(await client.facts(tenant, SUBJECT))["location/home_city"][0] == "Hangzhou"
        assert await sessions_to_rederive(services.pool, services.keyring, tenant, SUBJECT, extractor) == []
        rebuilt = await client.admin.rebuild_result(await client.admin.rebuild(tenant, SUBJECT))
        assert rebuilt.all_equal


async def test_a_session_step_retried_after_its_commit_appends_nothing_twice(client, services, tenant,
                                                                              running_worker):
    async with running_worker(providers=_older()):
        await _consolidate(client, tenant, FIRST, SECOND)
    reached: list[str] = []

    def fail_once(point: str) -> None:
        # The first session's transaction is committed; its activity fails before it returns.
        if point == "after_rederive_session":
            reached.append(point)
            if len(reached) == 1:
                raise RuntimeError("the worker lost the step's result")

    before = await _events(services, tenant)
    install_fault_hook(fail_once)
    try:
        async with running_worker():
            report = await client.admin.rederive_result(await client.admin.rederive(tenant, SUBJECT, dry_run=False))
    finally:
        install_fault_hook(None)
    assert len(reached) == 3  # d-1 twice (failed, then retried), d-2 once
    # The retried step claimed the run's operator request again, as the run that holds it.
    [authorization] = [a for a in await client.admin.authorizations(limit=10_000)
                       if a.kind == "rederive" and a.tenant_id == tenant]
    assert authorization.state == "claimed" and authorization.refused_runs == 0
    totals = report.result.totals
    # The retried step reports d-1's recorded differences (compared again, d-1 would now find none).
    assert (totals.sessions, totals.changed, totals.added, totals.events_appended) == (2, 2, 1, 3)
    assert await _events(services, tenant) == before + 3  # the retry found d-1 recorded
    [subject] = report.subjects
    assert subject.sessions == ["d-1", "d-2"]
    current = _current(await client.facts(tenant, SUBJECT))
    assert current["location/home_city"][0] == "Hangzhou" and current["diet/restriction"][0] == "vegetarian"


async def test_a_tenant_wide_dry_run_pages_through_the_subjects(client, services, tenant, running_worker):
    async with running_worker(providers=_older()):
        for subject in ("kim", SUBJECT):
            await client.append_messages(tenant, subject, FIRST)
            await client.consolidation_result(await client.end_session(tenant, subject, FIRST.session_id))
    before = await _events(services, tenant)
    async with running_worker():
        # One subject a run: the run continues as a new one after each page, carrying its counts.
        handle = await client.admin.rederive(tenant, subjects_per_run=1)
        report = await client.admin.rederive_result(handle)
    assert handle.id.startswith(f"rederive/{tenant}/*/")
    assert report.result.subjects == 2 and report.result.dry_run
    assert (report.result.totals.sessions, report.result.totals.changed, report.result.totals.added) == (2, 4, 2)
    assert [s.subject_id for s in report.subjects] == ["kim", SUBJECT]
    assert all(s.sessions == ["d-1"] and len(s.changed) == 2 for s in report.subjects)
    assert await _events(services, tenant) == before


async def test_with_a_model_a_spent_token_budget_parks_the_rederivation_until_it_is_raised(
        client, services, tenant, running_worker):
    said = [session("m-1", "2024-03-01T09:00:00Z", "Hi, my name is Lin Wei.", "I live in Hangzhou."),
            session("m-2", "2024-03-02T09:00:00Z", "Hi again.", "I live in Hangzhou now.")]
    async with running_worker(providers=_older()):
        await _consolidate(client, tenant, *said)
    await client.admin.set_token_budget(tenant, 100)  # one model extraction spends 160
    with FakeOpenAIServer() as server:
        server.responder = route
        async with running_worker(providers=bundle_for(server)):
            handle = await client.admin.rederive(tenant, SUBJECT, dry_run=False)

            async def parked() -> bool:
                runs = {r.workflow_id: r.state for r in await client.admin.runs(tenant, SUBJECT)}
                return runs.get(handle.id) == contract.PARKED_TOKEN_BUDGET

            deadline = asyncio.get_running_loop().time() + 60
            while not await parked():
                assert asyncio.get_running_loop().time() < deadline, "the re-derivation parked within 60 s"
                await asyncio.sleep(0.2)
            progress = await handle.query(contract.PROGRESS_QUERY, result_type=RederiveProgress)
            assert (progress.step, progress.sessions_done, progress.sessions_total) == (
                contract.PARKED_TOKEN_BUDGET, 1, 2)
            await client.admin.set_token_budget(tenant, 100_000)  # signals the parked run
            report = await asyncio.wait_for(client.admin.rederive_result(handle), timeout=60)
    assert report.result.extractor.startswith("openai-compatible-extractor/")
    assert (report.result.totals.sessions, report.result.totals.changed) == (2, 1)
    [home] = [f for f in await client.facts(tenant, SUBJECT) if f.key == "home_city"]
    assert home.value == "Hangzhou" and home.extracted_by == report.result.extractor


async def test_a_rederivation_replayed_under_its_own_id_rewrites_nothing_consolidated_since(
        client, services, tenant, task_queue, running_worker):
    """A tenant-wide re-derivation that wrote, copied from its history and started again under its
    workflow id once another subject's sessions are due: refused at that subject's first write,
    which stays as the older extractor wrote it."""
    async with running_worker(providers=_older()):
        await _consolidate(client, tenant, FIRST)
    async with running_worker():
        run = await client.admin.rederive(tenant, dry_run=False, registered_by="operator-key:rederive")
        assert (await client.admin.rederive_result(run)).result.totals.events_appended >= 2
    async with running_worker(providers=_older()):
        await client.append_messages(tenant, "kai", FIRST)
        await client.consolidation_result(await client.end_session(tenant, "kai", FIRST.session_id))
    before = await _events(services, tenant)
    kai = _current(await client.facts(tenant, "kai"))
    async with running_worker():
        first_run, replayed = await replay(services, run.id, task_queue)
        await refused_as_consumed(replayed, first_run)
    assert await _events(services, tenant) == before
    assert _current(await client.facts(tenant, "kai")) == kai and kai["location/home_city"][0] == "Hangzou"
    [authorization] = [a for a in await client.admin.authorizations(limit=10_000)
                       if a.registered_by == "operator-key:rederive"]
    assert (authorization.kind, authorization.claimed_by_run_id, authorization.refused_runs) == (
        "rederive", first_run, 1)
    assert (await client.admin.erasure_counts(tenant)).refused_claimed == 1
