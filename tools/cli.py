"""`python -m tools.cli`: benchmarks, evaluations and the chaos campaign, each on a private embedded
stack; they print figures. Run from a checkout: the tools are not part of the installed package. Same frame as `agent-memory` (agent_memory/cli/core.py): one-line usage
errors naming the command's help, exit 2 for bad input, 1 for a failing service."""

from __future__ import annotations

import logging
import os
import sys
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import (
    DEFAULT_PRESET,
    EMBEDDERS,
    PRESET_NAMES,
    Choice,
    Command,
    Group,
    Many,
    RootGroup,
    json_flag,
    with_args,
)
from agent_memory.core.errors import InvalidInput

if TYPE_CHECKING:
    from agent_memory.core.settings import Settings

PROG = "python -m tools.cli"
PRESET_METAVAR = "{" + ",".join(PRESET_NAMES) + "}"
EMBEDDER_METAVAR = "{" + ",".join(EMBEDDERS) + "}"
PATH = click.Path(path_type=Path)


@click.group("eval", cls=Group, dest="benchmark", help="evaluate context assembly on a benchmark against a BM25 "
             "baseline")
def eval_() -> None:
    pass


@eval_.command("probes", cls=Command, help="the write-gate probe set (current and as-of accuracy)")
@click.option("--data", type=PATH, metavar="FILE.jsonl", help="run this probe file instead of the bundled set "
              "(one case a line)")
@json_flag
@with_args
async def probes(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.probes import probes_command

    return await probes_command(args, settings)


@eval_.command("recall-probes", cls=Command, help="the recall probe set: recency, importance, window, profile and "
               "in-session turns, checked in the built prompt")
@click.option("--split", type=Choice(("dev", "test", "all")), default="all", metavar="{dev,test,all}")
@click.option("--data", type=PATH, metavar="FILE.jsonl", help="run this file instead of the bundled set")
@click.option("--preset", type=Choice(PRESET_NAMES), default="designed", metavar=PRESET_METAVAR,
              help="the recall policy to read under (default: designed, which has the window)")
@json_flag
@with_args
async def recall_probes(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.recall_probes import recall_probes_command

    return await recall_probes_command(args, settings)


@eval_.command("locomo", cls=Command, help="LoCoMo-format dir: sessions.jsonl, questions.jsonl[, adversarial]")
@click.option("--data", required=True, type=PATH, metavar="DIR")
@click.option("--json", is_flag=True, help="one JSON document instead of the table")
@click.option("--dump", type=PATH, metavar="FILE.jsonl", help="one line per question: contexts, citations")
@click.option("--limit-conversations", type=int, metavar="N")
@click.option("--budget", type=int, default=1200, metavar="BUDGET", help="context token budget (default 1200)")
@click.option("--preset", type=Choice(PRESET_NAMES), default=DEFAULT_PRESET, metavar=PRESET_METAVAR,
              help=f"the recall policy (default: the shipped default, {DEFAULT_PRESET})")
@click.option("--compare", cls=Many, type=Choice(PRESET_NAMES), metavar="PRESET",
              help="also score the questions under these presets (same ingest)")
@click.option("--limit", type=int, metavar="N", help="only the first N questions (categories 1-4)")
@click.option("--answer-model", metavar="URL", help="OpenAI-compatible base URL: answer each question (with "
              "--judge-model)")
@click.option("--judge-model", metavar="URL", help="OpenAI-compatible base URL grading the answers CORRECT/WRONG")
@click.option("--answer-model-name", metavar="NAME", help="model name at --answer-model (default: the first listed)")
@click.option("--judge-model-name", metavar="NAME", help="model name at --judge-model (default: the first listed)")
@click.option("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
              help="environment variable holding the endpoints' key (default OPENAI_API_KEY; unset: no key)")
@click.option("--answer-window", type=int, default=128_000, metavar="TOKENS",
              help="the answer model's context window: the full-conversation baseline runs where it fits "
              "(default 128000)")
@with_args
async def locomo(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.locomo import eval_command

    return await eval_command(args, settings)


@click.group("bench", cls=Group, dest="bench_name", help="benchmarks on a private embedded stack; they print figures")
def bench() -> None:
    pass


@bench.command("erasure", cls=Command, help="cost of physical compaction and key rotation")
@click.option("--memories", type=int, default=10_000, metavar="MEMORIES", help="memories to store (default 10000)")
@click.option("--per-subject", type=int, default=10, metavar="PER_SUBJECT", help="memories per subject (default 10)")
@click.option("--erase", type=int, default=5, metavar="ERASE", help="subjects to erase first (default 5)")
@json_flag
@with_args
async def bench_erasure(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.erasure_bench import bench_command

    return await bench_command(args, settings)


@bench.command("erase", cls=Command, help="erasure of one subject with N memories, verification included (then "
               "compaction and key rotation)")
@click.option("--memories", type=int, default=100_000, metavar="MEMORIES",
              help="memories of the erased subject (default 100000)")
@json_flag
@with_args
async def bench_erase(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.erasure_bench import bench_command

    args.per_subject, args.erase = args.memories, 1  # one subject holding every memory, erased once
    return await bench_command(args, settings)


@bench.command("recall", cls=Command, help="context and prompt assembly latency at growing memory sizes")
@click.option("--memories", "--sizes", "sizes", cls=Many, type=int, default=[1_000, 10_000, 50_000], metavar="SIZES",
              help="memories of the one subject (default 1000 10000 50000)")
@click.option("--total-rows", type=int, default=0, metavar="TOTAL_ROWS",
              help="memories of the tenant in all: filler subjects beside the measured one")
@click.option("--queries", type=int, default=100, metavar="QUERIES", help="queries per size and route (default 100)")
@click.option("--embedder", type=Choice(EMBEDDERS), metavar=EMBEDDER_METAVAR,
              help="the embedder (default: the offline default)")
@click.option("--throughput-texts", type=int, default=512, metavar="N",
              help="passages the embedders' throughput is measured on (default 512; 0: not measured)")
@click.option("--access-off", is_flag=True,
              help="also measure context with the access term off (access_weight=0), interleaved with it on")
@json_flag
@with_args
async def bench_recall(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.recall_bench import recall_bench_command

    return await recall_bench_command(args, settings)


@bench.command("lexical", cls=Command, help="BM25 search latency at growing memory counts of one subject: the "
               "indexed search beside the full scan it replaced, with plans")
@click.option("--memories", cls=Many, type=int, default=[1_000, 10_000, 50_000], metavar="MEMORIES",
              help="index rows of the one subject (default 1000 10000 50000)")
@click.option("--total-rows", type=int, default=0, metavar="TOTAL_ROWS",
              help="index rows of the tenant in all (filler subjects), e.g. 1000000")
@click.option("--queries", type=int, default=100, metavar="QUERIES", help="queries per size (default 100)")
@json_flag
@with_args
async def bench_lexical(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.lexical_bench import lexical_bench_command

    return await lexical_bench_command(args, settings)


@bench.command("consolidate", cls=Command, help="consolidation through Temporal against a direct pipeline of the "
               "same activity code: sessions/s, their ratio and CPU per session, in one run")
@click.option("--sessions", type=int, default=128, metavar="SESSIONS", help="sessions per mode (default 128)")
@click.option("--concurrency", type=int, default=8, metavar="CONCURRENCY", help="sessions in flight (default 8)")
@click.option("--model-latency-ms", type=float, default=0.0, metavar="MODEL_LATENCY_MS",
              help="simulated latency added to every provider call (default 0)")
@click.option("--embedder", type=Choice(EMBEDDERS), default=None, metavar=EMBEDDER_METAVAR,
              help="the offline embedder (default: the configured offline one, e5-small)")
@click.option("--telemetry", is_flag=True, help="compare Temporal with tracing off and on (exported by OTLP to a "
              "local receiver) instead of Temporal and the direct pipeline")
@json_flag
@with_args
async def bench_consolidate(args: Namespace, settings: Settings) -> int:
    if args.telemetry:
        from tools.evaluation.tracing_bench import tracing_bench_command

        return await tracing_bench_command(args, settings)
    from tools.evaluation.consolidate_bench import consolidate_bench_command

    return await consolidate_bench_command(args, settings)


@bench.command("scale", cls=Command, help="consolidation with 1, 2, 4... worker processes on one Temporal and one "
               "PostgreSQL: sessions/s and its ratio, p99, a provider's rate limit and 429s, fairness between tenants")
@click.option("--workers", cls=Many, type=int, default=[1, 2, 4], metavar="WORKERS",
              help="worker process counts, one phase each (default 1 2 4)")
@click.option("--sessions", type=int, default=64, metavar="SESSIONS",
              help="sessions per phase, ended at once; the flood of the fairness phase (default 64)")
@click.option("--model-latency-ms", type=float, default=1000.0, metavar="MODEL_LATENCY_MS",
              help="simulated latency of every model call (default 1000)")
@click.option("--worker-concurrency", type=int, default=4, metavar="N",
              help="model calls at once per worker process (AGENT_MEMORY_MODEL_CONCURRENCY; default 4)")
@click.option("--provider-rate", type=float, default=None, metavar="R",
              help="the simulated provider answers 429 (Retry-After) over R calls/s: a phase with the model "
              "queue's limit at R and one without it")
@json_flag
@with_args
async def bench_scale(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.scale_bench import scale_bench_command

    return await scale_bench_command(args, settings)


@bench.command("storage", cls=Command, help="bytes per message and per memory on the real schema: sessions stored "
               "and consolidated, every table's size read")
@click.option("--sessions", type=int, default=2_000, metavar="SESSIONS",
              help="sessions of 10 messages to store and consolidate (default 2000)")
@click.option("--copies", type=int, default=0, metavar="COPIES",
              help="then copy every subject's rows this many times under new subject ids, in SQL, to measure "
                   "a large store without consolidating it all (default 0)")
@json_flag
@with_args
async def bench_storage(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.storage_bench import storage_bench_command

    return await storage_bench_command(args, settings)


@bench.command("ingest", cls=Command, help="append_messages throughput: batched, and one message per call with the "
               "idle timer on (debounced and not)")
@click.option("--messages", type=int, default=4_000, metavar="MESSAGES", help="messages per mode (default 4000)")
@click.option("--clients", type=int, default=8, metavar="CLIENTS", help="concurrent callers (default 8)")
@click.option("--batch", type=int, default=100, metavar="BATCH", help="messages per batched call (default 100)")
@json_flag
@with_args
async def bench_ingest(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.ingest_bench import ingest_bench_command

    return await ingest_bench_command(args, settings)


@bench.command("end-session", cls=Command, help="the session-end hook's latency in a tenant of N rows beside a "
               "fresh one")
@click.option("--rows", type=int, default=1_000_000, metavar="ROWS",
              help="rows of the large tenant in sessions, messages and operations (default 1000000)")
@click.option("--sessions", type=int, default=20, metavar="SESSIONS", help="measured sessions per tenant (default 20)")
@click.option("--calls", type=int, default=200, metavar="CALLS", help="hook calls per tenant (default 200)")
@json_flag
@with_args
async def bench_end_session(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.end_session_bench import end_session_bench_command

    return await end_session_bench_command(args, settings)


@bench.command("http", cls=Command, help="the HTTP API under a bounded local load: requests/s, p50/p99 for append "
               "and context")
@click.option("--concurrency", type=int, default=50, metavar="CONCURRENCY", help="concurrent clients (default 50)")
@click.option("--seconds", type=float, default=30.0, metavar="SECONDS", help="seconds per route (default 30)")
@json_flag
@with_args
async def bench_http(args: Namespace, settings: Settings) -> int:
    from tools.evaluation.http_bench import http_bench_command

    return await http_bench_command(args, settings)


@bench.command("reembed", cls=Command, help="an embedding-model change: re-embedding time at N memories, and LoCoMo "
               "recall before, without and after re-embedding")
@click.option("--memories", type=int, default=10_000, metavar="MEMORIES",
              help="memories of the one subject (default 10000)")
@click.option("--source", type=Choice(EMBEDDERS), default="hashing", metavar=EMBEDDER_METAVAR)
@click.option("--target", type=Choice(EMBEDDERS), default="e5-small", metavar=EMBEDDER_METAVAR)
@click.option("--locomo", type=PATH, metavar="DIR",
              help="also score LoCoMo (a LoCoMo-format directory, as eval locomo --data)")
@click.option("--throughput-texts", type=int, default=512, metavar="N",
              help="passages the target's throughput is measured on (default 512; 0: not measured)")
@json_flag
@with_args
async def bench_reembed(args: Namespace, settings: Settings) -> int:
    if args.source == args.target:
        raise InvalidInput("--source and --target name the same embedder: nothing to re-embed")
    from tools.evaluation.reembed_bench import reembed_bench_command

    return await reembed_bench_command(args, settings)


@click.command("chaos", cls=Command, help="randomized worker kills on a private embedded stack; prints the figures")
@click.option("--kills", type=int, default=20, metavar="KILLS", help="worker kills to perform (default 20)")
@click.option("--seed", type=int, default=0, metavar="SEED")
@click.option("--remote-providers", is_flag=True,
              help="providers that say they compute elsewhere: a remote model's route (one ordinary activity)")
@click.option("--workers", type=int, default=1, metavar="WORKERS",
              help="worker processes sharing the task queue, any of which a kill may hit (default 1)")
@json_flag
@with_args
async def chaos(args: Namespace, settings: Settings) -> int:
    from tools.chaos import chaos_command

    return await chaos_command(args, settings)


def build_parser() -> RootGroup:
    group = RootGroup(PROG, help="Benchmarks, evaluations and the chaos campaign, each on a "
                                 "private embedded stack.")
    for command in (eval_, bench, chaos):
        group.add_command(command)
    return group


def main(argv: Sequence[str] | None = None) -> int:
    code: int = build_parser().main(list(argv) if argv is not None else None, PROG, standalone_mode=False)
    return code


def run() -> None:
    """The process entry point (`python -m tools.cli` in a checkout), exiting as
    `agent-memory` does (workers/cli.py run: no interpreter teardown under the Temporal runtime)."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
