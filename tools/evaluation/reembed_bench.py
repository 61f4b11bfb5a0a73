"""`python -m tools.cli bench reembed`: what an embedding-model change costs and what it keeps.

On a private embedded stack, in one run:

1. One subject with N memories (episodes and notes, the recall bench's synthetic sessions,
   written by the product's write path), projected by the *source* embedder. Then the
   `ReembedWorkflow` moves them to the *target* embedder, on an in-process worker. The run
   prints the wall time, vectors/s, and the target embedder's own throughput on the same kind of
   text, measured in the same run (the ratio is the workflow's overhead).
2. With `--locomo DIR`: the LoCoMo sessions are ingested through the real workflows under the
   source embedder, and the questions are scored three times. First under the source model.
   Then after the model change but before any re-embedding: recall reads the new model's
   vectors and finds none, which was every model change before this existed. Then after the
   re-embedding's switch.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from agent_memory.api.client import MemoryClient
from agent_memory.api.services import Services
from agent_memory.core.errors import InvalidInput
from agent_memory.core.projection_models import ProjectionPolicy
from agent_memory.core.settings import Settings
from agent_memory.projection.projector import OutboxProjector
from agent_memory.projection.reembedding import ReembedProgress, start_reembedding
from agent_memory.providers.base import Embedder
from agent_memory.providers.embedders import local_embedder
from agent_memory.providers.offline import OfflineProviders, offline_providers
from agent_memory.recall.context import assemble_context
from agent_memory.recall.recall_policy import DEFAULT_POLICY
from tools.evaluation.locomo import Metrics, aggregate, load_locomo, score_question
from tools.evaluation.recall_bench import PER_SESSION, _grow, _sentence
from workers.worker import build_worker


class LocomoPhase(BaseModel):
    phase: str
    metrics: Metrics


class ReembedBenchReport(BaseModel):
    source: str
    target: str
    memories: int
    build_seconds: float
    reembed_seconds: float
    vectors: int
    vectors_per_second: float
    target_passages_per_second: float | None  # the target embedder alone, batches of 64, same run (None: not measured)
    locomo: list[LocomoPhase] = []
    locomo_vectors: int = 0
    locomo_reembed_seconds: float = 0.0

    def render(self) -> str:
        alone = self.target_passages_per_second
        lines = [f"re-embedding bench: {self.source} → {self.target}",
                 f"  {self.memories:,} memories of one subject (built in {self.build_seconds:.0f} s): "
                 f"{self.vectors:,} vectors re-embedded in {self.reembed_seconds:.1f} s, "
                 f"{self.vectors_per_second:.0f} vectors/s" + (
                     f"; the target embedder alone: {alone:.0f} passages/s (workflow/embedder "
                     f"{self.vectors_per_second / max(alone, 1e-9):.2f})" if alone is not None else "")]
        if self.locomo:
            lines.append(f"  LoCoMo: {self.locomo_vectors:,} vectors re-embedded in {self.locomo_reembed_seconds:.1f} s")
            lines.append(f"  {'phase':<34} {'all-in-ctx':>10} {'ev.frac':>8} {'ans.cov':>8}")
            for p in self.locomo:
                m = p.metrics
                lines.append(f"  {p.phase:<34} {m.evidence_all_in_context or 0:>10.3f} "
                             f"{m.mean_evidence_fraction or 0:>8.3f} {m.answer_token_coverage or 0:>8.3f}")
        return "\n".join(lines)


def _providers(embedder: Embedder) -> OfflineProviders:
    p = offline_providers()
    return OfflineProviders(p.extractor, p.scorer, p.summarizer, embedder)


async def _reembed(services: Services, tenant: str, target: Embedder) -> tuple[ReembedProgress, float]:
    queue = f"bench-reembed-{uuid.uuid4().hex[:8]}"
    async with build_worker(services, task_queue=queue, providers=_providers(target)):
        started = time.perf_counter()
        handle = await start_reembedding(services.pool, services.keyring, services.temporal, queue, tenant, target,
                                         registered_by="reembed-bench")
        progress: ReembedProgress = await handle.result()
        return progress, time.perf_counter() - started


async def _throughput(embedder: Embedder, texts: list[str], batch: int = 64) -> float:
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        await embedder.embed(texts[i:i + batch])
    return len(texts) / max(time.perf_counter() - started, 1e-9)


async def _score(services: Services, tenant: str, embedder: Embedder, data) -> Metrics:
    scores = []
    for q in data.questions:
        ctx = await assemble_context(services.pool, services.keyring, embedder, tenant, q.conversation_id, q.question,
                                     as_of=q.asked_at, policy=DEFAULT_POLICY)
        cited = {m for item in ctx.items for m in item.cited_message_ids}
        scores.append(score_question(q.evidence_message_ids, q.answer, cited, ctx.text, ctx.tokens))
    return aggregate(scores)


async def run_reembed_bench(services: Services, *, memories: int, source_name: str, target_name: str,
                            locomo_dir: Path | None = None, seed: int = 11,
                            throughput_texts: int = 512) -> ReembedBenchReport:
    source, target = local_embedder(source_name), local_embedder(target_name)
    assert source is not None and target is not None  # offline names: always local embedders
    rng = random.Random(seed)
    projector = OutboxProjector(services.pool, services.keyring, source, ProjectionPolicy())
    store = f"bench-reembed-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    await _grow(services, projector, 0, max(1, memories // PER_SESSION), rng, tenant=store)
    built = time.perf_counter() - started
    progress, seconds = await _reembed(services, store, target)
    rate = await _throughput(target, [_sentence(rng) for _ in range(throughput_texts)]) if throughput_texts else None
    report = ReembedBenchReport(source=source_name, target=target_name, memories=progress.total,
                                build_seconds=round(built, 1), reembed_seconds=round(seconds, 1),
                                vectors=progress.done, vectors_per_second=round(progress.done / max(seconds, 1e-9), 1),
                                target_passages_per_second=round(rate, 1) if rate is not None else None)
    if locomo_dir is None:
        return report
    data = load_locomo(locomo_dir)
    tenant = f"reembed-{uuid.uuid4().hex[:8]}"
    queue = f"bench-locomo-{uuid.uuid4().hex[:8]}"
    client = MemoryClient(services, source, task_queue=queue)
    async with build_worker(services, task_queue=queue, providers=_providers(source)):
        for conversation in data.conversations:
            for s in conversation.sessions:
                await client.append_messages(tenant, conversation.conversation_id, s)
                await client.consolidation_result(await client.end_session(tenant, conversation.conversation_id,
                                                                           s.session_id))
        await client.admin.wait_for_projection(tenant, timeout=1800)
    phases = [LocomoPhase(phase=f"{source_name}", metrics=await _score(services, tenant, source, data)),
              LocomoPhase(phase=f"{target_name} configured, not re-embedded",
                          metrics=await _score(services, tenant, target, data))]
    progress, seconds = await _reembed(services, tenant, target)
    phases.append(LocomoPhase(phase=f"{target_name} after re-embedding", metrics=await _score(services, tenant,
                                                                                              target, data)))
    return report.model_copy(update={"locomo": phases, "locomo_vectors": progress.done,
                                     "locomo_reembed_seconds": round(seconds, 1)})


async def reembed_bench_command(args: argparse.Namespace, settings: Settings) -> int:
    from workers.runtime import scratch_stack

    if args.memories < PER_SESSION:
        raise InvalidInput(f"--memories must be at least {PER_SESSION} (one session of the synthetic store)")
    if args.throughput_texts < 0:
        raise InvalidInput("--throughput-texts must be 0 or more (0: the throughput is not measured)")
    if args.locomo is not None:
        load_locomo(args.locomo)  # fail on bad data before starting any server
    async with scratch_stack(settings, "bench-reembed", embedded_only=True) as services:
        report = await run_reembed_bench(services, memories=args.memories, source_name=args.source,
                                         target_name=args.target, locomo_dir=args.locomo,
                                         throughput_texts=args.throughput_texts)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.render())
    return 0
