"""What a run says about itself in clear: Temporal's user metadata (a one-line static summary and
static details) on every workflow start, so the Temporal UI's run list reads
"consolidate acme/lin/s3" without the payload key. Ids only, never content: everything in them is
already in the workflow id.

Inputs and results stay encrypted (agent_memory/security/payload_codec.py); these texts are written as
`PublicText`, which the payload converter writes as marked plain JSON that the codec leaves as it
is, and reads back only where a text and nothing else is expected.

`RunMetadataInterceptor` fills them in for every start: the client's (end a session, erase,
rebuild...) and a workflow's child starts (the idle timer's consolidation).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from temporalio import client, worker
from temporalio.converter import WorkflowSerializationContext
from temporalio.exceptions import ApplicationError
from temporalio.worker import StartChildWorkflowInput, WorkflowInboundInterceptor, WorkflowOutboundInterceptor

# The parts of each kind of workflow id (agent_memory/core/contract.py), named for the details.
ID_PARTS = {
    "consolidate": ("tenant", "subject", "session"),
    "idle": ("tenant", "subject", "session"),
    "erase": ("tenant", "subject", "erasure request"),
    "rebuild": ("tenant", "subject", "request"),
    "rederive": ("tenant", "subject", "request"),
    "reembed": ("tenant", "target model"),
    "projector": ("tenant", "subject"),
}


# The metadata field marking a PublicText payload (security/payload_codec.PUBLIC_FIELD, which
# writes and leaves it in clear).
PUBLIC_MARK = "agent-memory-public"


class PublicText(str):
    """A text written to Temporal in clear (ids and counts only)."""


def run_summary(workflow_id: str) -> PublicText:
    """"consolidate/acme/lin/s3" → "consolidate acme/lin/s3"."""
    kind, _, rest = workflow_id.partition("/")
    return PublicText(f"{kind} {rest}" if rest else kind)


def run_details(workflow_id: str, workflow_type: str) -> PublicText:
    kind, _, rest = workflow_id.partition("/")
    names = ID_PARTS.get(kind)
    values = rest.split("/") if rest else []
    lines = [f"**{workflow_type}**"]
    if names and len(values) == len(names):
        lines += [f"{name}: {value}" for name, value in zip(names, values, strict=True)]
    else:
        lines.append(f"workflow id: {workflow_id}")
    return PublicText("\n".join(lines))


def _type_name(workflow: Any) -> str:
    if isinstance(workflow, str):
        return workflow
    defn = getattr(getattr(workflow, "__self__", None) or workflow, "__temporal_workflow_definition", None)
    name = getattr(defn, "name", None)
    return name or getattr(workflow, "__qualname__", str(workflow)).split(".")[0]


class _ClientOutbound(client.OutboundInterceptor):
    async def start_workflow(self, input: client.StartWorkflowInput) -> client.WorkflowHandle[Any, Any]:
        if input.static_summary is None:
            input.static_summary = run_summary(input.id)
        if input.static_details is None:
            input.static_details = run_details(input.id, input.workflow)
        return await super().start_workflow(input)


class _WorkflowOutbound(WorkflowOutboundInterceptor):
    # User metadata is not part of what replay compares: a child started with it replays
    # against a history recorded without it.
    async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
        if input.static_summary is None:
            input.static_summary = run_summary(input.id)
        if input.static_details is None:
            input.static_details = run_details(input.id, _type_name(input.workflow))
        return await super().start_child_workflow(input)


class _WorkflowInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_WorkflowOutbound(outbound))


class RunMetadataInterceptor(client.Interceptor, worker.Interceptor):
    """On the client (its workers inherit it): summary and details on every start that has none."""

    def intercept_client(self, next: client.OutboundInterceptor) -> client.OutboundInterceptor:
        return _ClientOutbound(next)

    def workflow_interceptor_class(self, input: worker.WorkflowInterceptorClassInput
                                   ) -> type[WorkflowInboundInterceptor] | None:
        return _WorkflowInbound


def progress_details(progress: Any) -> str:
    """A long run's current details (workflow.set_current_details) from its progress model: the
    step, then its counts, one per line; ids and counts only, as the progress query has them."""
    fields = progress.model_dump() if hasattr(progress, "model_dump") else dict(progress)
    step = fields.pop("step", None) or fields.pop("state", None)
    lines = [f"**{step}**"] if step else []
    for name, value in fields.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            lines.append(f"{name.replace('_', ' ')}: {value}")
        elif isinstance(value, list):
            lines.append(f"{name.replace('_', ' ')}: {len(value)}")
    return "\n".join(lines)


def consolidation_details(facts_written: int, episode_written: bool, conflict_checks: int, vectors: int,
                          refused_reason: str | None = None) -> str:
    """A finished consolidation in one line: "4 facts, 1 episode, 4 conflict checks, 5 vectors"
    (conflict checks: the extracted facts checked against the subject's memory)."""
    if refused_reason:
        return f"refused: {refused_reason}"
    return (f"{facts_written} facts, {int(episode_written)} episode, {conflict_checks} conflict checks, "
            f"{vectors} vectors")


def public_memo_text(memo: Any, key: str) -> str | None:
    """A run's memo value under `key` when it is a PublicText (what a run writes in clear about its
    state, e.g. a consolidation parked on its tenant's token budget), read from the raw memo of a
    visibility listing or a description; None when absent or anything else (never decrypted)."""
    fields = getattr(memo, "fields", None)
    payload = fields.get(key) if fields is not None else None
    if payload is None or payload.metadata.get(PUBLIC_MARK) != b"1":
        return None
    try:
        value = json.loads(payload.data)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


class RunPayloads(BaseModel):
    """What `agent-memory runs` shows of a run beyond its status: its summary, and its input and
    result decoded with the deployment's payload key (what the UI shows through /codec)."""

    summary: str | None = None
    input: Any = None
    result: Any = None
    unreadable: str | None = None  # why a payload did not decode (another deployment's key...)


async def read_run_payloads(temporal: client.Client, workflow_id: str, run_id: str | None) -> RunPayloads:
    history = await temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    converter = temporal.data_converter.with_context(
        WorkflowSerializationContext(namespace=temporal.namespace, workflow_id=workflow_id))
    read = RunPayloads()
    first, last = history.events[0], history.events[-1]
    try:
        if first.HasField("user_metadata") and first.user_metadata.HasField("summary"):
            read.summary = (await converter.decode([first.user_metadata.summary]))[0]
        started = first.workflow_execution_started_event_attributes.input.payloads
        if started:
            read.input = _plain((await converter.decode(list(started)))[0])
        if last.HasField("workflow_execution_completed_event_attributes"):
            result = last.workflow_execution_completed_event_attributes.result.payloads
            read.result = _plain((await converter.decode(list(result)))[0]) if result else None
    except ApplicationError as exc:
        read.unreadable = exc.message
    return read


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value
