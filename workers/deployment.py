"""Worker Versioning: a worker with a build id (AGENT_MEMORY_BUILD_ID) runs as that version of the
Worker Deployment AGENT_MEMORY_DEPLOYMENT_NAME, and the operator moves new work to a version with
`agent-memory deployment set-current`, or a share of it first with `deployment set-ramping`
(docs/operations.md, "Deploying new workflow code").

Each workflow declares how it moves between versions (`@workflow.defn(versioning_behavior=...)`):

- PINNED, runs that finish on the build they started on: a consolidation (seconds to minutes) and
  an erasure (its steps and its verification by one code). The old version's workers run until
  no pinned run is left on it (`agent-memory deployment describe` counts them).
- AUTO_UPGRADE, runs that live long or come back periodically: a session's idle timer and a
  subject's projector (entity workflows that continue as new), the Schedules' sweeps, rotation
  and compaction, a rebuild or re-embedding (paged with continue-as-new) and a webhook delivery
  (waits between attempts up to hours). Their next workflow task goes to the current version, so
  they replay their history on new code: they keep the `workflow.patched` discipline.

A versioned worker refuses to start with a workflow that declares no behavior (the SDK enforces
it when the deployment's default behavior is unspecified, as here). Without a build id nothing
changes: the workers are unversioned and every run goes to whichever worker polls. Temporal
refuses a workflow task completion that names a behavior from an unversioned worker ("versioning
behavior cannot be specified without deployment options being set with versioned mode"), and the
SDK sends the declared one whatever the worker: an unversioned worker's runners drop it
(`workflow_runners`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from temporalio.api.deployment.v1 import WorkerDeploymentVersion as ProtoVersion
from temporalio.api.enums.v1 import VersionDrainageStatus, WorkerDeploymentVersionStatus
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    UnsandboxedWorkflowRunner,
    WorkerDeploymentConfig,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)
from temporalio.workflow import _Definition

from agent_memory.core.errors import InvalidInput, ServiceUnavailable
from agent_memory.core.settings import Settings

IDENTITY = "agent-memory deployment"


def deployment_version(settings: Settings) -> WorkerDeploymentVersion | None:
    """The version the settings' workers run as, or None (unversioned: no build id)."""
    if not settings.build_id:
        return None
    return WorkerDeploymentVersion(deployment_name=settings.deployment_name, build_id=settings.build_id)


def deployment_config(version: WorkerDeploymentVersion | None) -> WorkerDeploymentConfig | None:
    """The worker's versioning options: none for an unversioned worker. No default behavior: every
    workflow registered on a versioned worker must declare its own (the SDK checks at start)."""
    if version is None:
        return None
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True,
                                  default_versioning_behavior=VersioningBehavior.UNSPECIFIED)


class _InstanceWithoutBehavior(WorkflowInstance):
    """A workflow instance whose completions name no versioning behavior."""

    def __init__(self, inner: WorkflowInstance) -> None:
        self._inner = inner

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self._inner.activate(act)
        if completion.HasField("successful"):
            completion.successful.versioning_behavior = VersioningBehavior.UNSPECIFIED.value
        return completion

    def get_serialization_context(self, command_info: Any) -> Any:
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self._inner.get_info()

    def __getattr__(self, name: str) -> Any:  # what the worker asks of an instance beyond these (its thread)
        return getattr(self._inner, name)


class _RunnerWithoutBehavior(WorkflowRunner):
    """`inner`, for an unversioned worker: its workflows' declared behaviors are not sent."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: _Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _InstanceWithoutBehavior(self.inner.create_instance(det))

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


def workflow_runners(version: WorkerDeploymentVersion | None,
                     sandboxed: WorkflowRunner) -> tuple[WorkflowRunner, WorkflowRunner]:
    """A Worker's `workflow_runner` (`sandboxed`) and `unsandboxed_workflow_runner`: as they are for a
    versioned worker, dropping the declared behaviors for an unversioned one."""
    unsandboxed: WorkflowRunner = UnsandboxedWorkflowRunner()
    if version is None:
        return _RunnerWithoutBehavior(sandboxed), _RunnerWithoutBehavior(unsandboxed)
    return sandboxed, unsandboxed


def version_label(version: WorkerDeploymentVersion) -> str:
    """`<deployment>:<build id>`, as Temporal's visibility (TemporalWorkerDeploymentVersion) writes it."""
    return f"{version.deployment_name}:{version.build_id}"


class VersionState(BaseModel):
    build_id: str
    # current, ramping, draining (not current, pinned runs may be open), drained, inactive
    status: str
    # the server's own drainage check, refreshed every few minutes: draining, drained or None
    drainage: str | None
    created_at: datetime | None
    # open runs pinned to this version (visibility, seconds behind at most): 0 before it stops
    pinned_running: int
    # open runs last on this version that move to the current one at their next task
    auto_upgrade_running: int


class DeploymentState(BaseModel):
    deployment_name: str
    current_build_id: str | None
    ramping_build_id: str | None
    versions: list[VersionState]


class CurrentVersionChange(BaseModel):
    deployment_name: str
    build_id: str
    previous_build_id: str | None


class RampingVersionChange(BaseModel):
    deployment_name: str
    build_id: str | None  # None: no version ramps any more
    percentage: float
    previous_build_id: str | None
    previous_percentage: float


def _status(value: WorkerDeploymentVersionStatus.ValueType) -> str:
    name = WorkerDeploymentVersionStatus.Name(value)
    return name.removeprefix("WORKER_DEPLOYMENT_VERSION_STATUS_").lower()


def _drainage(value: VersionDrainageStatus.ValueType) -> str | None:
    if value == VersionDrainageStatus.VERSION_DRAINAGE_STATUS_UNSPECIFIED:
        return None
    return VersionDrainageStatus.Name(value).removeprefix("VERSION_DRAINAGE_STATUS_").lower()


def _build_id(version: ProtoVersion) -> str | None:
    return version.build_id or None


def _refused(err: RPCError, what: str) -> Exception:
    if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION, RPCStatusCode.INVALID_ARGUMENT,
                      RPCStatusCode.ALREADY_EXISTS):
        return InvalidInput(f"{what}: {err.message}")
    return ServiceUnavailable(f"{what}: Temporal answered {err.status.name if err.status else 'an error'}: "
                              f"{err.message}")


async def count_running(client: Client, version: WorkerDeploymentVersion, behavior: str) -> int:
    """Open runs whose last version is `version`, of `behavior` (`Pinned` or `AutoUpgrade`)."""
    query = (f"TemporalWorkerDeploymentVersion = '{version_label(version)}' AND "
             f"TemporalWorkflowVersioningBehavior = '{behavior}' AND ExecutionStatus = 'Running'")
    return (await client.count_workflows(query)).count


async def describe_deployment(client: Client, deployment_name: str) -> DeploymentState:
    """The deployment's current and ramping versions, and each version's status and open runs."""
    try:
        described = await client.workflow_service.describe_worker_deployment(DescribeWorkerDeploymentRequest(
            namespace=client.namespace, deployment_name=deployment_name))
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise InvalidInput(f"no Worker Deployment named {deployment_name!r} in namespace {client.namespace}: start a "
                               "worker with AGENT_MEMORY_BUILD_ID set (and AGENT_MEMORY_DEPLOYMENT_NAME) first") from None
        raise _refused(err, f"describing the Worker Deployment {deployment_name!r}") from None
    info = described.worker_deployment_info
    versions = []
    for summary in sorted(info.version_summaries, key=lambda s: s.create_time.ToDatetime()):
        version = WorkerDeploymentVersion(deployment_name=deployment_name, build_id=summary.deployment_version.build_id)
        versions.append(VersionState(
            build_id=version.build_id, status=_status(summary.status), drainage=_drainage(summary.drainage_status),
            created_at=summary.create_time.ToDatetime(tzinfo=UTC) if summary.HasField("create_time") else None,
            pinned_running=await count_running(client, version, "Pinned"),
            auto_upgrade_running=await count_running(client, version, "AutoUpgrade")))
    routing = info.routing_config
    return DeploymentState(deployment_name=deployment_name,
                           current_build_id=_build_id(routing.current_deployment_version),
                           ramping_build_id=_build_id(routing.ramping_deployment_version), versions=versions)


async def set_current_version(client: Client, deployment_name: str, build_id: str, *,
                              wait_seconds: float = 0.0) -> CurrentVersionChange:
    """Make `build_id` the deployment's current version: new runs, and the next task of every
    AUTO_UPGRADE run, go to its workers; runs pinned to another version stay there. Temporal
    refuses a version none of whose workers has polled yet (NOT_FOUND), and one whose workers do
    not poll a task queue the current version has work on (FAILED_PRECONDITION: its model worker
    missing, or not polling yet): both are asked again for up to `wait_seconds`, while the new
    workers start."""
    deadline = asyncio.get_running_loop().time() + wait_seconds
    try:
        before = (await describe_deployment(client, deployment_name)).current_build_id
    except InvalidInput:
        before = None  # no deployment yet: its first workers are starting
    while True:
        try:
            changed = await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(namespace=client.namespace, deployment_name=deployment_name,
                                                         build_id=build_id, identity=IDENTITY))
            break
        except RPCError as err:
            starting = err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION)
            if starting and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.2)
                continue
            raise _refused(err, f"{deployment_name}:{build_id} cannot become current") from None
    previous = _build_id(changed.previous_deployment_version)
    if previous == build_id and before != build_id:
        # The RPC client repeated a call whose first answer was lost (a busy server): the change is
        # ours, and what it replaced is the version read before it.
        previous = before
    return CurrentVersionChange(deployment_name=deployment_name, build_id=build_id, previous_build_id=previous)


async def set_ramping_version(client: Client, deployment_name: str, build_id: str | None, percentage: float = 0.0, *,
                              wait_seconds: float = 0.0) -> RampingVersionChange:
    """Send `percentage` (0–100) of new runs, and of AUTO_UPGRADE runs' next tasks, to `build_id`
    while the current version takes the rest; which runs go is decided by their workflow ids, so a
    run keeps its side. `build_id` None ends the ramp (everything to the current version). Temporal
    refuses a version none of whose workers has polled yet (asked again for up to `wait_seconds`)."""
    if not 0 <= percentage <= 100:
        raise InvalidInput(f"percentage must be between 0 and 100, not {percentage}")
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        try:
            changed = await client.workflow_service.set_worker_deployment_ramping_version(
                SetWorkerDeploymentRampingVersionRequest(namespace=client.namespace, deployment_name=deployment_name,
                                                         build_id=build_id or "",
                                                         percentage=percentage if build_id else 0.0,
                                                         identity=IDENTITY))
            break
        except RPCError as err:
            starting = err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION)
            if build_id and starting and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.2)
                continue
            what = f"{deployment_name}:{build_id} cannot ramp" if build_id else f"{deployment_name}: the ramp cannot end"
            raise _refused(err, what) from None
    return RampingVersionChange(deployment_name=deployment_name, build_id=build_id,
                                percentage=percentage if build_id else 0.0,
                                previous_build_id=_build_id(changed.previous_deployment_version),
                                previous_percentage=changed.previous_percentage)
