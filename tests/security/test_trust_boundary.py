"""Temporal is an orchestrator, not an authority: whoever reaches its frontend can read histories
and start workflows, and still cannot make the product destroy anything.

Each test plays an attacker on the Temporal port against the real embedded stack: a rebuild's
input replayed into an erasure, a plaintext start, a start through the product's own client for a
request nobody registered, another workflow's input re-encoded as an erasure's. Each run fails at
once, non-retryably, with a reason an operator can read, and the subject is intact."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import RawValue
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from agent_memory.core import contract
from agent_memory.core.models import ErasureInput, RebuildInput
from agent_memory.lifecycle.compaction import CompactionInput
from agent_memory.lifecycle.erasure import register_erasure_request
from agent_memory.lifecycle.sweeper import MemorySweepInput
from agent_memory.security.keyring import KeyRotationInput, list_keks
from agent_memory.security.payload_codec import INPUT_REJECTED, PAYLOAD_REJECTED
from agent_memory.store.db import tenant_transaction
from tests.sessions import session


async def _failure_type(handle: WorkflowHandle) -> str | None:
    """The failed run's error type; fails the test when the run does not end within the bound."""
    try:
        await asyncio.wait_for(handle.result(), timeout=60)
    except WorkflowFailureError as exc:
        cause = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = cause.__cause__
        return cause.type if isinstance(cause, ApplicationError) else None
    pytest.fail(f"{handle.id} completed: a forged run must fail")


async def _subject_intact(services, tenant: str, subject: str, messages: int, *, keys: int = 0) -> None:
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT count(*) FROM messages WHERE subject_id = %s", (subject,))
        assert (await cur.fetchone())[0] == messages
        cur = await conn.execute("SELECT count(*) FROM tombstones")
        assert (await cur.fetchone())[0] == 0
        cur = await conn.execute("SELECT count(*) FROM subject_keys WHERE subject_id = %s", (subject,))
        assert (await cur.fetchone())[0] == keys  # a subject's key exists from its first consolidation


async def test_a_rebuild_input_replayed_as_an_erasure_through_a_plain_client_is_refused(
        client, services, tenant, running_worker, task_queue):
    """The replay: the encrypted input of an operator's `rebuild --subject X`, copied from its
    history into a new ErasureWorkflow start by a client holding no key. The payload is bound to
    the rebuild's workflow id, so it does not decode as another run's input."""
    outsider = await Client.connect(services.settings.temporal_address, data_converter=pydantic_data_converter)
    await client.append_messages(tenant, "ann", session("r1", "2024-01-01T00:00:00Z", "I live in Oslo."))
    async with running_worker():
        await client.consolidation_result(await client.end_session(tenant, "ann", "r1"))
        rebuild = await client.admin.rebuild(tenant, "ann")
        await client.admin.rebuild_result(rebuild)
        history = outsider.get_workflow_handle(rebuild.id)
        started = None
        async for event in history.fetch_history_events():
            if event.HasField("workflow_execution_started_event_attributes"):
                started = event.workflow_execution_started_event_attributes.input.payloads[0]
                break
        assert started is not None
        replayed = await outsider.start_workflow(
            contract.ERASURE_WORKFLOW, RawValue(started),
            id=contract.erasure_workflow_id(tenant, "ann", rebuild.id.rsplit("/", 1)[1]), task_queue=task_queue)
        assert await _failure_type(replayed) == PAYLOAD_REJECTED
        assert (await replayed.describe()).status == WorkflowExecutionStatus.FAILED
    await _subject_intact(services, tenant, "ann", 1, keys=1)
    assert (await client.admin.erasure_counts(tenant)).refused_payloads >= 1


async def test_a_forged_plaintext_start_fails_at_once_instead_of_retrying_forever(
        client, services, tenant, running_worker, task_queue):
    outsider = await Client.connect(services.settings.temporal_address, data_converter=pydantic_data_converter)
    await client.append_messages(tenant, "bob", session("o1", "2024-01-01T00:00:00Z", "I live in Oulu."))
    async with running_worker():
        forged = await outsider.start_workflow(
            contract.ERASURE_WORKFLOW, ErasureInput(tenant_id=tenant, subject_id="bob", request_id="evil"),
            id=contract.erasure_workflow_id(tenant, "bob", "evil"), task_queue=task_queue)
        assert await _failure_type(forged) == PAYLOAD_REJECTED
    await _subject_intact(services, tenant, "bob", 1)


async def test_an_erasure_nobody_registered_is_refused_even_with_the_payload_key(
        client, services, tenant, running_worker, task_queue):
    """An insider with the payload key (the product's own client) but no registration in
    Postgres: the first activity finds no request for this run and refuses before the tombstone."""
    await client.append_messages(tenant, "cat", session("c1", "2024-01-01T00:00:00Z", "I live in Lima."))
    async with running_worker():
        unregistered = await services.temporal.start_workflow(
            contract.ERASURE_WORKFLOW, ErasureInput(tenant_id=tenant, subject_id="cat", request_id="nobody-asked"),
            id=contract.erasure_workflow_id(tenant, "cat", "nobody-asked"), task_queue=task_queue)
        assert await _failure_type(unregistered) == contract.ErrorType.UNAUTHORIZED_REQUEST
        await _subject_intact(services, tenant, "cat", 1)
        assert (await client.admin.erasure_counts(tenant)).refused_requests == 1

        # A registered request acted on by another run (its own id, another workflow id) is refused too.
        await register_erasure_request(services.pool, services.keyring, tenant, "cat", "real", "ticket 1")
        elsewhere = await services.temporal.start_workflow(
            contract.ERASURE_WORKFLOW, ErasureInput(tenant_id=tenant, subject_id="cat", request_id="real"),
            id=f"erase/{tenant}/cat/real-{uuid.uuid4().hex[:6]}", task_queue=task_queue)
        assert await _failure_type(elsewhere) == contract.ErrorType.UNAUTHORIZED_REQUEST
        await _subject_intact(services, tenant, "cat", 1)


async def test_another_workflows_input_re_encoded_as_an_erasure_fails_validation(
        services, tenant, running_worker, task_queue):
    """Another model's input under the erasure's name: its kind and undeclared fields refuse it."""
    async with running_worker():
        disguised = await services.temporal.start_workflow(
            contract.ERASURE_WORKFLOW, RebuildInput(tenant_id=tenant, subject_id="dan", request_id="r"),
            id=contract.erasure_workflow_id(tenant, "dan", "r"), task_queue=task_queue)
        assert await _failure_type(disguised) == INPUT_REJECTED


@pytest.mark.parametrize(("workflow", "argument", "workflow_id"), [
    (contract.KEY_ROTATION_WORKFLOW, KeyRotationInput(force=True), "key-rotation/manual-forged"),
    (contract.PHYSICAL_COMPACTION_WORKFLOW, CompactionInput(force=True), "physical-compaction/manual-forged"),
    (contract.MEMORY_SWEEP_WORKFLOW, MemorySweepInput(grace_seconds=0), "memory-sweep/manual-forged"),
])
async def test_a_maintenance_run_beyond_its_schedule_needs_an_operators_request(
        services, running_worker, task_queue, workflow, argument, workflow_id):
    """A forced rotation, a compaction of every table, a sweep with no grace period: more than the
    Schedule does, so refused unless the operator's client registered the run."""
    keks_before = await list_keks(services.pool)
    async with running_worker():
        forged = await services.temporal.start_workflow(workflow, argument, id=f"{workflow_id}-{uuid.uuid4().hex[:6]}",
                                                        task_queue=task_queue)
        assert await _failure_type(forged) == contract.ErrorType.UNAUTHORIZED_REQUEST
    assert await list_keks(services.pool) == keks_before  # no key-encryption key rotated or destroyed


async def test_a_forced_rebuild_nobody_registered_is_refused(client, services, tenant, running_worker, task_queue):
    await client.append_messages(tenant, "eve", session("e1", "2024-01-01T00:00:00Z", "I live in Rome."))
    async with running_worker():
        await client.consolidation_result(await client.end_session(tenant, "eve", "e1"))
        forged = await services.temporal.start_workflow(
            contract.REBUILD_WORKFLOW, RebuildInput(tenant_id=tenant, subject_id="eve", request_id="forged", force=True),
            id=contract.rebuild_workflow_id(tenant, "eve", "forged"), task_queue=task_queue)
        assert await _failure_type(forged) == contract.ErrorType.UNAUTHORIZED_REQUEST
        registered = await client.admin.rebuild_result(await client.admin.rebuild(tenant, "eve", force=True))
        assert registered.subjects_total == 1
