"""Worker Versioning on the real dev server: the product's workers as two versions of one Worker
Deployment. A consolidation in flight on v1 when v2 becomes current finishes on v1 (pinned) while
v1 and v2 both poll; a new one runs on v2; `describe` counts v1's open pinned runs down to 0."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.common import VersioningBehavior

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core import contract
from agent_memory.core.errors import InvalidInput
from agent_memory.core.settings import ENV_VARS
from agent_memory.providers.offline import OfflineProviders, RuleFactExtractor, offline_providers
from tests.sessions import session
from workers.cli import main
from workers.deployment import DeploymentState, describe_deployment, set_current_version, set_ramping_version
from workers.worker import WORKFLOWS, build_worker

PINNED = {contract.CONSOLIDATION_WORKFLOW, contract.ERASURE_WORKFLOW}


class GatedExtractor(RuleFactExtractor):
    """The offline extractor as a remote model's (an ordinary activity on the model queue, so the
    run's next workflow task is dispatched after it returns), held at its first call until
    `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.runs_in_worker = False
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def extract(self, messages: Any, *, subject_role: str = "user", current_facts: Any = None) -> Any:
        self.entered.set()
        await self.release.wait()
        return await super().extract(messages, subject_role=subject_role, current_facts=current_facts)


def _providers(extractor: RuleFactExtractor) -> OfflineProviders:
    p = offline_providers()
    return OfflineProviders(extractor, p.scorer, p.summarizer, p.embedder)


def test_every_workflow_declares_its_versioning_behavior():
    """Short runs pinned, the long-lived and periodic ones auto-upgrading; none left to a default
    (a versioned worker would refuse to start)."""
    behaviors = {}
    for cls in WORKFLOWS:
        defn = cast(Any, cls).__temporal_workflow_definition
        behaviors[defn.name] = defn.versioning_behavior
    assert VersioningBehavior.UNSPECIFIED not in behaviors.values()
    assert {name for name, b in behaviors.items() if b == VersioningBehavior.PINNED} == PINNED
    assert {name for name, b in behaviors.items() if b == VersioningBehavior.AUTO_UPGRADE} == set(behaviors) - PINNED


async def test_an_unversioned_worker_runs_the_workflows_without_sending_their_behaviors(
        services, tenant, task_queue):
    """No build id: the default. Temporal refuses a completion naming a behavior from an
    unversioned worker, so the worker drops the declared one; the run is unversioned."""
    assert services.settings.build_id is None
    client = MemoryClient(services, offline_providers().embedder, task_queue=task_queue)
    async with build_worker(services, task_queue=task_queue):
        await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
        handle = await client.end_session(tenant, "lin", "s1")
        assert (await asyncio.wait_for(handle.result(), timeout=60)).facts_written >= 1
    info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    assert info.behavior == VersioningBehavior.UNSPECIFIED.value and not info.deployment_version.build_id
    assert set(await _task_versions(handle)) == {""}


async def _eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    """Visibility is updated after the fact: wait (bounded) until `check` holds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        await asyncio.sleep(0.1)


def _version(state: DeploymentState, build_id: str) -> Any:
    [found] = [v for v in state.versions if v.build_id == build_id]
    return found


async def _task_versions(handle: WorkflowHandle) -> list[str]:
    """The build id of the worker that completed each of the run's workflow tasks."""
    return [e.workflow_task_completed_event_attributes.deployment_version.build_id
            async for e in handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]


def _as_version(services: Services, deployment_name: str, build_id: str) -> Services:
    """The services of a process configured with AGENT_MEMORY_DEPLOYMENT_NAME and AGENT_MEMORY_BUILD_ID."""
    return dataclasses.replace(services, settings=services.settings.with_services(
        deployment_name=deployment_name, build_id=build_id))


def _two_versions(services: Services, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[str, Services, Services]:
    """A Worker Deployment of the test's own (nothing else routes by it), its versions v1 and v2,
    and an environment in which the command line reaches the session's Temporal."""
    for variable in ENV_VARS:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path))
    monkeypatch.setenv("TEMPORAL_ADDRESS", str(services.settings.temporal_address))
    name = f"am-test-{uuid.uuid4().hex[:10]}"
    return name, _as_version(services, name, "v1"), _as_version(services, name, "v2")


async def _cli(*argv: str) -> str:
    """`agent-memory *argv`'s stdout (the environment names the session's Temporal)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = await asyncio.to_thread(main, list(argv))
    assert code == 0, (argv, out.getvalue())
    return out.getvalue()


async def test_a_pinned_consolidation_finishes_on_its_version_and_new_runs_go_to_the_current_one(
        services, tenant, task_queue, monkeypatch, tmp_path):
    name, v1, v2 = _two_versions(services, monkeypatch, tmp_path)
    temporal = services.temporal
    # Both workers share this process's Temporal client: the hook's start must not hand a run's
    # first task to the old version's worker (an eager start) when v2 is current.
    client = MemoryClient(v1, offline_providers().embedder, task_queue=task_queue)
    with pytest.raises(InvalidInput, match="no Worker Deployment named"):
        await describe_deployment(temporal, name)

    gated = GatedExtractor()
    async with build_worker(v1, task_queue=task_queue, providers=_providers(gated)):
        change = await set_current_version(temporal, name, "v1", wait_seconds=30)
        assert (change.build_id, change.previous_build_id) == ("v1", None)
        await client.append_messages(tenant, "lin", session("s1", "2024-03-01T09:00:00Z", "I live in Hangzhou."))
        first = await client.end_session(tenant, "lin", "s1")
        await asyncio.wait_for(gated.entered.wait(), timeout=30)  # on v1's model worker, its first task done

        async with build_worker(v2, task_queue=task_queue, providers=_providers(RuleFactExtractor())):
            said = await _cli("deployment", "set-current", "--deployment-name", name, "--build-id", "v2", "--wait", "30")
            assert said == f"{name}: current version v2 (was v1)\n"
            with pytest.raises(InvalidInput, match="cannot become current"):
                await set_current_version(temporal, name, "v3")  # no worker of it ever polled

            # A new run goes to the current version while the pinned one still waits on v1.
            await client.append_messages(tenant, "lin", session("s2", "2024-03-02T09:00:00Z", "I moved to Suzhou."))
            second = await client.end_session(tenant, "lin", "s2")
            assert (await asyncio.wait_for(second.result(), timeout=60)).facts_written >= 1
            info = (await second.describe()).raw_description.workflow_execution_info.versioning_info
            assert info.behavior == VersioningBehavior.PINNED.value and info.deployment_version.build_id == "v2"
            assert set(await _task_versions(second)) == {"v2"}

            async def v1_pinned(count: int) -> bool:
                return _version(await describe_deployment(temporal, name), "v1").pinned_running == count

            await _eventually(lambda: v1_pinned(1), "v1's in-flight run counted")
            state = await describe_deployment(temporal, name)
            assert state.current_build_id == "v2" and _version(state, "v1").status == "draining"
            shown = await _cli("deployment", "describe", "--deployment-name", name)
            assert shown.startswith(f"{name}: current v2\n") and "v1" in shown
            [v1_line] = [line for line in shown.splitlines() if line.split()[0] == "v1"]
            assert v1_line.split()[1:4] == ["draining", "1", "pinned"], shown

            # Released, the run's next workflow tasks are v1's, though v2 is current and polling.
            gated.release.set()
            result = await asyncio.wait_for(first.result(), timeout=60)
            assert result.facts_written >= 1
            info = (await first.describe()).raw_description.workflow_execution_info.versioning_info
            assert info.behavior == VersioningBehavior.PINNED.value and info.deployment_version.build_id == "v1"
            versions = await _task_versions(first)
            assert len(versions) >= 2 and set(versions) == {"v1"}, versions

            # Drained: no run pinned to v1 is open, so its workers may stop.
            await _eventually(lambda: v1_pinned(0), "v1 drained of pinned runs")
            assert _version(await describe_deployment(temporal, name), "v2").pinned_running == 0


async def test_a_ramping_version_takes_its_share_of_new_runs_until_the_ramp_ends(
        services, tenant, task_queue, monkeypatch, tmp_path):
    name, v1, v2 = _two_versions(services, monkeypatch, tmp_path)
    temporal = services.temporal
    client = MemoryClient(v1, offline_providers().embedder, task_queue=task_queue)

    async def consolidated_on(session_id: str, day: int) -> str:
        await client.append_messages(tenant, "lin", session(session_id, f"2024-03-{day:02d}T09:00:00Z",
                                                            "I live in Hangzhou."))
        handle = await client.end_session(tenant, "lin", session_id)
        await asyncio.wait_for(handle.result(), timeout=60)
        info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
        return info.deployment_version.build_id

    async with build_worker(v1, task_queue=task_queue), build_worker(v2, task_queue=task_queue):
        await set_current_version(temporal, name, "v1", wait_seconds=30)
        said = await _cli("deployment", "set-ramping", "--deployment-name", name, "--build-id", "v2",
                          "--percentage", "100", "--wait", "30")
        assert said == f"{name}: ramping v2 at 100% (was none)\n"
        state = await describe_deployment(temporal, name)
        assert (state.current_build_id, state.ramping_build_id) == ("v1", "v2")
        assert await consolidated_on("s1", 1) == "v2"

        said = await _cli("deployment", "set-ramping", "--deployment-name", name, "--delete")
        assert said == f"{name}: ramping none (was v2 at 100%)\n"
        assert (await describe_deployment(temporal, name)).ramping_build_id is None
        assert await consolidated_on("s2", 2) == "v1"

        # Making the ramping version current ends the ramp.
        await set_ramping_version(temporal, name, "v2", 50)
        await set_current_version(temporal, name, "v2")
        state = await describe_deployment(temporal, name)
        assert (state.current_build_id, state.ramping_build_id) == ("v2", None)

    # Half an instruction is refused, naming what to give.
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = await asyncio.to_thread(main, ["deployment", "set-ramping", "--deployment-name", name,
                                              "--build-id", "v2"])
    assert code != 0 and "--percentage" in err.getvalue()
    with pytest.raises(InvalidInput, match="between 0 and 100"):
        await set_ramping_version(temporal, name, "v2", 150)
