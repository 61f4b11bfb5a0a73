"""`agent-memory demo`: the three flows end to end on bundled sample sessions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from importlib import resources

from pydantic import BaseModel

from agent_memory.api.admin_client import RunSummary
from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.cli.formatting import format_context, format_fact, format_prompt
from agent_memory.core.models import ConsolidationResult, ErasureReceipt, FactRow, Message, Session
from agent_memory.core.projection_models import ProjectionLag
from agent_memory.memory.ingest import parse_session_line
from agent_memory.providers.factory import providers_for
from agent_memory.recall.context import AssembledContext
from agent_memory.recall.prompt import BuiltPrompt
from agent_memory.recall.recall import RecallResult
from workers.worker import build_worker

DEMO_TENANT = "demo"
DEMO_QUERY = "where does Lin live and what should I avoid when ordering food?"
LIVE_INPUT = "Can you suggest a restaurant near where I live? Remember what I can't eat."


class DemoReport(BaseModel):
    tenant_id: str
    subject_id: str  # kept after the demo, to explore
    erased_subject_id: str  # a copy of the first session under another subject, erased at the end
    ui_url: str
    stack_started: bool = False  # the demo started the embedded stack and stopped it again
    consolidations: list[ConsolidationResult]
    projection: ProjectionLag | None = None  # after waiting for the subject's projector
    facts_history: list[FactRow]
    current_facts: list[FactRow]
    recall: RecallResult
    context: AssembledContext
    prompt: BuiltPrompt | None = None  # the prompt for the query in a live session, before erasure
    runs: list[RunSummary]
    erasure: ErasureReceipt
    facts_after_erasure: int

    def render(self) -> str:
        lines = [f"agent-memory demo — tenant {self.tenant_id}, subject {self.subject_id}", "",
                 "Consolidation workflows:"]
        lines += [f"  {c.workflow_id}: {c.facts_extracted} facts extracted, {c.events_appended} events, "
                  f"{c.facts_written} facts written, {c.vectors_upserted} vectors"
                  + (" (the rest left to the subject's projector)" if c.projector_woken else "")
                  for c in self.consolidations]
        if self.projection is not None:
            lines += [f"  vectors after the commits: {self.projection.pending} pending, "
                      f"{self.projection.dead_letters} dead letter(s)"]
        lines += ["", "Facts with validity intervals and evidence (history):"]
        lines += ["  " + format_fact(f) for f in self.facts_history]
        lines += ["", "Current facts:"] + ["  " + format_fact(f) for f in self.current_facts]
        lines += ["", f"Recall for {self.recall.query!r}:"]
        lines += [f"  [{e.score:.3f}] {e.happened_at.date()} importance {e.importance}: {e.summary}"
                  for e in self.recall.episodes]
        lines += ["", f"Prompt context for {self.context.query!r} (budget {self.context.budget} tokens):"]
        lines += ["  " + line for line in format_context(self.context).splitlines()]
        if self.prompt is not None:
            lines += ["", f"Prompt for {LIVE_INPUT!r} in the live session {self.prompt.session_id} "
                          "(blocks in order, tokens per block):"]
            lines += ["  " + line for line in format_prompt(self.prompt).splitlines()]
        lines += ["", f"Temporal UI: {self.ui_url}  (search: TenantId = '{self.tenant_id}')"]
        lines += [f"  {r.status:<10} {r.workflow_id}" for r in self.runs]
        e = self.erasure
        lines += ["", f"Erasure of subject {self.erased_subject_id} (a copy of the first session), receipt "
                      f"{e.request_id}: removed {e.removed}", f"  residue {e.residue_total} "
                  f"{e.residue}, key shredded: {e.key_shredded}, completed {e.completed_at.isoformat()}",
                  f"  facts readable after erasure: {self.facts_after_erasure}",
                  f"  shred irreversible after {e.shred_irreversible_after} (KEK {e.key_wrapped_by}); "
                  f"physical compaction: ticket {e.compaction_ticket} (hourly, or `agent-memory compact`)"]
        explore = ["  " + command for command in explore_commands(self.tenant_id, self.subject_id)]
        if self.stack_started:
            lines += ["", "The demo started the embedded stack and has stopped it: the Temporal UI link above works "
                          "again once a stack runs. To keep it running, start `agent-memory up` in another terminal "
                          "and run `agent-memory demo` again. The data stays; with `up` running, explore subject "
                          f"{self.subject_id} (kept, not erased):", *explore]
        else:
            lines += ["", f"Subject {self.subject_id} is kept (not erased): explore it", *explore]
        return "\n".join(lines)


def explore_commands(tenant_id: str, subject_id: str) -> list[str]:
    """The commands the demo ends with, to explore the subject it keeps (shell-quoted)."""
    scope = f"--tenant {tenant_id} --subject {subject_id}"
    return [f"agent-memory sessions {scope}",
            f"agent-memory facts {scope} --history",  # every key's versions with their validity intervals
            f"agent-memory context {scope} 'what does Lin eat?'"]


def live_session(run_id: str) -> Session:
    """A session still going on (not ended): its turns reach the prompt from working memory."""
    start = datetime.now(UTC) - timedelta(minutes=5)
    lines = [("user", "I'm planning dinner for Friday."), ("assistant", "Nice! Who's coming, and any constraints?"),
             ("user", "Just the two of us, something cosy.")]
    return Session(session_id=f"{run_id}-live", started_at=start, messages=[
        Message(message_id=f"{run_id}-live:{i + 1}", turn_index=i, role=role, content=text,  # type: ignore[arg-type]
                created_at=start + timedelta(minutes=i)) for i, (role, text) in enumerate(lines)])


def sample_sessions(run_id: str) -> list[Session]:
    """The bundled sessions, with ids made unique per run (erasure tombstones a subject for good)."""
    text = (resources.files("agent_memory") / "samples" / "demo_sessions.jsonl").read_text(encoding="utf-8")
    sessions = [parse_session_line(line, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [s.model_copy(update={"session_id": f"{run_id}-{s.session_id}"}) for s in sessions]


async def run_demo(services: Services, *, stack_started: bool = False, task_queue: str | None = None) -> DemoReport:
    """The flows on subject lin-{run}, which is kept; erasure on a copy of its first session under
    another subject, so what the demo leaves behind can be explored afterwards."""
    run_id = uuid.uuid4().hex[:8]
    subject, erased_subject = f"lin-{run_id}", f"lin-{run_id}-erased"
    client = MemoryClient(services, providers_for(services.settings).embedder, task_queue=task_queue)
    async with build_worker(services, task_queue=task_queue):
        consolidations = []
        sessions = sample_sessions(run_id)
        for session in sessions:
            await client.append_messages(DEMO_TENANT, subject, session)
            # Sessions end in order, so each consolidation sees the facts of the earlier ones.
            handle = await client.end_session(DEMO_TENANT, subject, session.session_id)
            consolidations.append(await client.consolidation_result(handle))
        # The vectors recall uses: embedded by the run (an embedder in the worker) or by the
        # subject's projector after it (a remote one, or rows left over): waited for either way.
        projection = await client.admin.wait_for_projection(DEMO_TENANT, subject, timeout=120)
        history = await client.facts(DEMO_TENANT, subject, history=True)
        current = await client.facts(DEMO_TENANT, subject)
        recalled = await client.recall(DEMO_TENANT, subject, DEMO_QUERY)
        context = await client.context(DEMO_TENANT, subject, DEMO_QUERY, token_budget=300)
        live = live_session(run_id)
        await client.append_messages(DEMO_TENANT, subject, live)  # the conversation going on now
        prompt = await client.build_prompt(DEMO_TENANT, subject, live.session_id, LIVE_INPUT, token_budget=600)
        runs = await client.admin.runs(DEMO_TENANT, subject)
        copy = sessions[0].model_copy(update={"session_id": f"{sessions[0].session_id}-copy", "messages": [
            m.model_copy(update={"message_id": f"{m.message_id}-copy"}) for m in sessions[0].messages]})
        await client.append_messages(DEMO_TENANT, erased_subject, copy)
        await client.consolidation_result(await client.end_session(DEMO_TENANT, erased_subject, copy.session_id))
        receipt = await client.admin.erasure_receipt(
            await client.admin.erase(DEMO_TENANT, erased_subject, reason="demo: user asked to be forgotten"))
        after = await client.facts(DEMO_TENANT, erased_subject, history=True)
    return DemoReport(tenant_id=DEMO_TENANT, subject_id=subject, erased_subject_id=erased_subject,
                      ui_url=services.settings.ui_url or "", stack_started=stack_started,
                      consolidations=consolidations, projection=projection, facts_history=history,
                      current_facts=current, recall=recalled, context=context, prompt=prompt,
                      runs=runs, erasure=receipt, facts_after_erasure=len(after))
