"""Single-use authorizations on the real embedded stack: every destructive run consumes its
registration once.

Each replay test plays the holder of the Temporal port (tests/security/replays.py): an operator's
authorized run finishes, then its input is copied from the history and started again under the
same workflow id. The payload decodes (it is bound to that workflow id), and the run still fails
at once, non-retryably, naming the run that consumed the authorization, with nothing destroyed.
The re-derivation's and the re-embedding's replays are in their workflow tests."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from temporalio.common import WorkflowIDReusePolicy

from agent_memory.core import contract
from agent_memory.core.hooks import install_fault_hook
from agent_memory.core.models import RebuildInput
from agent_memory.lifecycle.erasure_runs import start_erasure_workflow
from agent_memory.security.keyring import list_keks
from agent_memory.security.operator_requests import (
    AuthorizationClaimedError,
    OperatorAuthorization,
    claim_operator_request,
    local_operator,
    register_operator_request,
)
from agent_memory.store.db import tenant_transaction
from tests.cli.runner import run_cli
from tests.security.replays import refusal, refused_as_consumed, replay
from tests.sessions import session


async def _registered_by(client, operator: str) -> OperatorAuthorization:
    [authorization] = [a for a in await client.admin.authorizations(limit=10_000) if a.registered_by == operator]
    return authorization


async def test_a_sweep_replayed_under_its_own_id_sweeps_nothing_forgotten_since(
        client, services, tenant, running_worker, task_queue):
    """The finding: a finished `sweep --grace-seconds 0` copied and started again under its id
    would sweep for good a memory forgotten seconds earlier, still inside its grace period."""
    operator = f"operator-key:{uuid.uuid4().hex[:8]}"
    async with running_worker():
        for s in (session("s1", "2024-03-01T09:00:00Z", "I live in Oslo."),
                  session("s2", "2024-04-01T09:00:00Z", "I have a dog named Rex.")):
            await client.append_messages(tenant, "lin", s)
            await client.consolidation_result(await client.end_session(tenant, "lin", s.session_id))
        facts = await client.facts(tenant, "lin")
        oslo = next(f for f in facts if f.key == "home_city")
        [rex, *_] = [f for f in facts if f.memory_id != oslo.memory_id]  # the dog
        await client.forget(tenant, "lin", oslo.memory_id)
        swept = await client.admin.sweep(grace_seconds=0, retention=False, registered_by=operator)
        assert swept.swept >= 1
        authorization = await _registered_by(client, operator)
        assert authorization.kind == "memory-sweep" and authorization.state == "claimed"
        assert authorization.workflow_id is not None and authorization.claimed_by_run_id is not None

        await client.forget(tenant, "lin", rex.memory_id)
        first_run, replayed = await replay(services, authorization.workflow_id, task_queue)
        assert first_run == authorization.claimed_by_run_id
        await refused_as_consumed(replayed, first_run)
    assert {f.state for f in await client.admin.forgotten(tenant, "lin")
            if str(f.memory_id) == str(rex.memory_id)} == {"forgotten"}
    await client.restore(tenant, "lin", rex.memory_id)  # still inside its grace period: nothing was swept
    assert rex.memory_id in {f.memory_id for f in await client.facts(tenant, "lin")}
    after = await _registered_by(client, operator)
    assert (after.state, after.claimed_by_run_id, after.refused_runs) == ("claimed", first_run, 1)
    assert after.claimed_at == authorization.claimed_at and after.registered_at < after.claimed_at
    assert await client.admin.refused_operator_runs() >= 1


@pytest.mark.parametrize("kind", ["key-rotation", "compaction"])
async def test_a_forced_rotation_or_full_compaction_replayed_under_its_own_id_is_refused(
        client, services, running_worker, task_queue, kind):
    operator = f"operator-key:{uuid.uuid4().hex[:8]}"
    async with running_worker():
        if kind == "key-rotation":
            await client.admin.rotate_keys(force=True, registered_by=operator)
        else:
            await client.admin.compact(force=True, registered_by=operator)
        authorization = await _registered_by(client, operator)
        assert authorization.kind == kind and authorization.workflow_id is not None
        keks = await list_keks(services.pool)
        first_run, replayed = await replay(services, authorization.workflow_id, task_queue)
        await refused_as_consumed(replayed, first_run)
    assert await list_keks(services.pool) == keks  # no key-encryption key rotated or destroyed


async def test_a_forced_rebuild_replayed_under_its_own_id_is_refused_and_counted(
        client, services, tenant, running_worker, task_queue):
    operator = f"operator-key:{uuid.uuid4().hex[:8]}"
    await client.append_messages(tenant, "eve", session("e1", "2024-01-01T00:00:00Z", "I live in Rome."))
    async with running_worker():
        await client.consolidation_result(await client.end_session(tenant, "eve", "e1"))
        handle = await client.admin.rebuild(tenant, "eve", force=True, registered_by=operator)
        assert (await client.admin.rebuild_result(handle)).subjects_total == 1
        authorization = await _registered_by(client, operator)
        # Listed without the subject in clear: by its keyed digest.
        assert authorization.tenant_id == tenant and "/eve/" not in (authorization.workflow_id or "")
        # Asked again for its request id, the operator's client attaches to the finished run and
        # registers nothing: the consumed authorization is not reopened for a replay.
        request_id = handle.id.rsplit("/", 1)[1]
        again = await client.admin.rebuild(tenant, "eve", force=True, request_id=request_id, registered_by="someone")
        assert (await client.admin.rebuild_result(again)).subjects_total == 1
        assert (await _registered_by(client, operator)).claimed_by_run_id == authorization.claimed_by_run_id
        first_run, replayed = await replay(services, handle.id, task_queue)
        await refused_as_consumed(replayed, first_run)
    after = await _registered_by(client, operator)
    assert (after.state, after.claimed_by_run_id, after.refused_runs) == ("claimed", first_run, 1)
    counts = await client.admin.erasure_counts(tenant)
    assert (counts.refused_claimed, counts.refused_expired, counts.refused_requests) == (1, 0, 0)


async def test_a_completed_erasure_replayed_under_its_own_id_is_refused(
        client, services, tenant, running_worker, task_queue):
    await client.append_messages(tenant, "zoe", session("z1", "2024-01-01T00:00:00Z", "I live in Nice."))
    async with running_worker():
        await client.consolidation_result(await client.end_session(tenant, "zoe", "z1"))
        handle = await client.admin.erase(tenant, "zoe", "ticket 7", "req-7")
        receipt = await client.admin.erasure_receipt(handle)
        first_run, replayed = await replay(services, handle.id, task_queue)
        refused = await refusal(replayed)
    assert refused.type == contract.ErrorType.UNAUTHORIZED_REQUEST and refused.non_retryable
    assert "was completed at" in refused.message and first_run in refused.message, refused.message
    status = await client.admin.erasure_status(tenant, "req-7")
    assert status.receipt == receipt  # the receipt is the first run's, nothing acted again
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT claimed_by_run_id FROM erasure_requests WHERE tenant_id = %s", (tenant,))
        assert await cur.fetchall() == [(first_run,)]
    assert (await client.admin.erasure_counts(tenant)).refused_claimed == 1


async def test_an_authorization_past_its_expiry_is_refused_unclaimed(client, services, tenant, running_worker,
                                                                      task_queue):
    await client.append_messages(tenant, "ivy", session("i1", "2024-01-01T00:00:00Z", "I live in Pisa."))
    workflow_id = contract.rebuild_workflow_id(tenant, "ivy", "late")
    await register_operator_request(services.pool, services.keyring, "rebuild", workflow_id,
                                    registered_by="operator-key:late", ttl_seconds=0, tenant_id=tenant)
    async with running_worker():
        await client.consolidation_result(await client.end_session(tenant, "ivy", "i1"))
        late = await services.temporal.start_workflow(
            contract.REBUILD_WORKFLOW, RebuildInput(tenant_id=tenant, subject_id="ivy", request_id="late", force=True),
            id=workflow_id, task_queue=task_queue)
        refused = await refusal(late)
    assert refused.type == contract.ErrorType.UNAUTHORIZED_REQUEST and refused.non_retryable
    assert "expired unclaimed" in refused.message, refused.message
    expired = await _registered_by(client, "operator-key:late")
    assert (expired.state, expired.claimed_by_run_id, expired.refused_runs) == ("expired", None, 1)
    assert (await client.admin.erasure_counts(tenant)).refused_expired == 1


async def test_the_claiming_run_claims_again_and_every_other_run_is_refused(services):
    """A retried activity (another attempt, another worker) claims for the same run id and
    passes; another run id is refused with the claimant in the message, however often it tries."""
    workflow_id = f"memory-sweep/manual-{uuid.uuid4().hex[:12]}"
    await register_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id,
                                    registered_by="operator-key:retry")
    for _ in range(3):
        await claim_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id, "run-1")
    for _ in range(2):
        with pytest.raises(AuthorizationClaimedError, match=r"consumed by run run-1 .* run run-2 is refused"):
            await claim_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id, "run-2")
    await claim_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id, "run-1")
    claimed = await _registered_by_pool(services, "operator-key:retry")
    assert (claimed.claimed_by_run_id, claimed.refused_runs) == ("run-1", 2)
    # Registered again (the same run name for a new run): the next run claims it.
    await register_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id,
                                    registered_by="operator-key:retry")
    await claim_operator_request(services.pool, services.keyring, "memory-sweep", workflow_id, "run-3")


async def _registered_by_pool(services, operator: str) -> OperatorAuthorization:
    from agent_memory.security.operator_requests import list_operator_requests

    [authorization] = [a for a in await list_operator_requests(services.pool, limit=10_000)
                       if a.registered_by == operator]
    return authorization


async def test_the_authorizations_command_lists_who_registered_and_which_run_claimed(
        services, running_worker, task_queue):
    async with running_worker():
        swept = await asyncio.to_thread(run_cli, services, "sweep", "--grace-seconds", "3600", "--no-retention",
                                        "--json", task_queue=task_queue)
        assert swept.returncode == 0, swept.stderr
    listed = run_cli(services, "authorizations", "--json", "--limit", "10000")
    assert listed.returncode == 0, listed.stderr
    mine = [a for a in json.loads(listed.stdout) if a["registered_by"] == local_operator()
            and a["kind"] == "memory-sweep" and a["state"] == "claimed"]
    assert mine, listed.stdout
    newest = mine[0]
    assert newest["workflow_id"].startswith("memory-sweep/manual-") and newest["claimed_by_run_id"]
    assert newest["claimed_at"] >= newest["registered_at"]
    shown = run_cli(services, "authorizations", "--limit", "10000")
    assert shown.returncode == 0 and f"claimed by run {newest['claimed_by_run_id']}" in shown.stdout
    assert f"registered by {local_operator()}" in shown.stdout


async def test_an_erasure_whose_claiming_run_is_gone_is_finished_by_the_next_run_only(
        client, services, tenant, running_worker, task_queue):
    """A started erasure is an obligation: when its run is terminated midway, a new run under its
    id (the re-drive Schedule's, the ledger's re-apply) takes the claim over and completes it;
    after that, no other run acts on it."""
    await client.append_messages(tenant, "max", session("m1", "2024-01-01T00:00:00Z", "I live in Graz."))

    def stuck(point: str) -> None:
        if point == "mid_erasure:working_memory":
            raise RuntimeError("the store is unreachable")

    install_fault_hook(stuck)
    try:
        async with running_worker():
            first = await client.admin.erase(tenant, "max", "ticket 9", "req-9")
            for _ in range(300):
                async with tenant_transaction(services.pool, tenant) as conn:
                    cur = await conn.execute("SELECT claimed_by_run_id FROM erasure_requests WHERE tenant_id = %s",
                                             (tenant,))
                    [(claimant,)] = await cur.fetchall()
                if claimant is not None:
                    break
                await asyncio.sleep(0.1)
            assert claimant == first.result_run_id
            await first.terminate("the run is gone")
    finally:
        install_fault_hook(None)
    async with running_worker():
        second = await start_erasure_workflow(services.temporal, task_queue, tenant, "max", "req-9",
                                              reuse=WorkflowIDReusePolicy.ALLOW_DUPLICATE)
        assert (await second.result()).residue_total == 0
        first_run, replayed = await replay(services, second.id, task_queue)
        refused = await refusal(replayed)
    assert first_run == second.result_run_id != first.result_run_id
    assert refused.type == contract.ErrorType.UNAUTHORIZED_REQUEST and first_run in refused.message
    async with tenant_transaction(services.pool, tenant) as conn:
        cur = await conn.execute("SELECT claimed_by_run_id, status FROM erasure_requests WHERE tenant_id = %s",
                                 (tenant,))
        assert await cur.fetchall() == [(first_run, "completed")]
