"""Memory reads and writes: ingest, end-session, recall, context, prompt, facts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from agent_memory.cli.core import (
    POSITIVE,
    PRESET_NAMES,
    TIME,
    Choice,
    Command,
    json_flag,
    preset_policy,
    print_json,
    scoped,
    speaker_filter,
    speaker_option,
    with_client,
)

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services

def explain_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--explain`: why each memory is there (its routes' ranks and the terms of its score)."""
    return click.option("--explain", is_flag=True, help="also why each memory is there: its routes' ranks and the "
                        "terms of its score, and (context) the best candidates that did not fit")(f)


INGEST_HELP = (
    "Append sessions from a JSON Lines file: one session per line, "
    '{"session_id": "s1", "started_at": "2024-05-01T09:00:00Z", "messages": [{"message_id": "s1:1", '
    '"turn_index": 0, "role": "user", "speaker": "Lin", "content": "I live in Oslo.", '
    '"created_at": "2024-05-01T09:00:00Z"}, ...]}. role is user or assistant; speaker, '
    "image_caption and started_at are optional. Times without a timezone are read as UTC. Appending "
    "is idempotent by message id; a message id stored with other content is refused.")


@click.command("ingest", cls=Command, help=INGEST_HELP,
               short_help="append sessions from a JSONL file (one session a line)")
@scoped()
@click.argument("file", type=click.Path(path_type=Path))
@with_client
async def ingest(client: MemoryClient, services: Services, *, tenant: str, subject: str, file: Path) -> None:
    from agent_memory.cli.progress import Progress
    from agent_memory.memory.ingest import read_sessions

    sessions = read_sessions(file, future_tolerance=client.admin.future_tolerance)
    with Progress("ingest sessions", len(sessions)) as bar:
        for session in sessions:
            result = await client.append_messages(tenant, subject, session)
            print(f"{session.session_id}: {result.inserted} new, {result.duplicates} already stored", flush=True)
            if result.idle_timer == "pending":
                print(f"agent-memory ingest: warning: {session.session_id}: Temporal is unreachable; the "
                      "messages are stored and the idle-timer sweep starts the session's timer", file=sys.stderr)
            bar.advance(note=session.session_id)


@click.command("end-session", cls=Command, help="the session-end hook: start (or attach to) consolidation")
@scoped()
@click.option("--session", required=True, metavar="SESSION")
@click.option("--wait", is_flag=True, help="wait for the workflow and print its result")
@with_client
async def end_session(client: MemoryClient, services: Services, *, tenant: str, subject: str, session: str,
                      wait: bool) -> None:
    handle = await client.end_session(tenant, subject, session)
    print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
    if wait:
        print_json((await client.consolidation_result(handle)).model_dump(mode="json"))


@click.command("recall", cls=Command, help="current facts and the episodes nearest the query")
@scoped()
@click.argument("query")
@click.option("--limit", type=POSITIVE, default=5, metavar="LIMIT", help="episodes at most (default 5)")
@click.option("--as-of", type=TIME, metavar="AS_OF")
@speaker_option
@explain_flag
@json_flag
@with_client
async def recall(client: MemoryClient, services: Services, *, tenant: str, subject: str, query: str, limit: int,
                 as_of: datetime | None, speaker: str | None, explain: bool, json: bool) -> None:
    from agent_memory.cli.formatting import format_fact, format_recall_explanations

    recalled = await client.recall(tenant, subject, query, limit=limit, as_of=as_of, filters=speaker_filter(speaker),
                                   explain=explain)
    if json:
        print_json(recalled.model_dump(mode="json"))
        return
    print("facts:")
    for f in recalled.facts:
        print("  " + format_fact(f))
    print("episodes:")
    for ep in recalled.episodes:
        print(f"  [{ep.score:.3f}] {ep.happened_at.date()} importance {ep.importance}: {ep.summary}")
    if explain:
        print("why:")
        print(format_recall_explanations(recalled))


@click.command("context", cls=Command, help="the prompt context for a query: cited items within a token budget")
@scoped()
@click.argument("query")
@click.option("--budget", type=int, metavar="BUDGET", help="total memory tokens; every tier scales with it (default: "
              "the tenant's recall policy, 1200)")
@click.option("--as-of", type=TIME, metavar="AS_OF")
@click.option("--preset", type=Choice(PRESET_NAMES), metavar="{" + ",".join(PRESET_NAMES) + "}",
              help="read under this recall policy preset instead of the tenant's policy")
@speaker_option
@explain_flag
@json_flag
@with_client
async def context(client: MemoryClient, services: Services, *, tenant: str, subject: str, query: str,
                  budget: int | None, as_of: datetime | None, preset: str | None, speaker: str | None,
                  explain: bool, json: bool) -> None:
    from agent_memory.cli import formatting

    assembled = await client.context(tenant, subject, query, as_of=as_of, token_budget=formatting.budget(budget),
                                     policy=preset_policy(preset), filters=speaker_filter(speaker), explain=explain)
    if json:
        print_json(assembled.model_dump(mode="json"))
    else:
        print(formatting.format_context(assembled))
        if explain:
            print(formatting.format_explanations(assembled))


@click.command("prompt", cls=Command, help="the prompt for a user input in a live session: system, profile, "
               "episodic memory, recent turns, input")
@scoped()
@click.option("--session", required=True, metavar="SESSION", help="the live session (a new id: no recent turns yet)")
@click.argument("input")
@click.option("--system", metavar="SYSTEM", help="the system prompt (default: a memory-aware assistant)")
@click.option("--budget", type=int, metavar="BUDGET", help="total memory tokens; every tier scales with it")
@click.option("--as-of", type=TIME, metavar="AS_OF")
@click.option("--preset", type=Choice(PRESET_NAMES), metavar="{" + ",".join(PRESET_NAMES) + "}",
              help="read under this recall policy preset")
@json_flag
@with_client
async def prompt(client: MemoryClient, services: Services, *, tenant: str, subject: str, session: str, input: str,
                 system: str | None, budget: int | None, as_of: datetime | None, preset: str | None,
                 json: bool) -> None:
    from agent_memory.cli import formatting

    built = await client.build_prompt(
        tenant, subject, session, input, as_of=as_of, token_budget=formatting.budget(budget),
        policy=preset_policy(preset), **({"system": system} if system else {}))
    if json:
        print_json({**built.model_dump(mode="json"), "messages": built.chat_messages()})
    else:
        print(formatting.format_prompt(built))


@click.command("facts", cls=Command, help="current facts, facts as of a time, or one key's history")
@scoped()
@click.option("--as-of", type=TIME, metavar="AS_OF")
@click.option("--history", metavar="KEY", is_flag=False, flag_value="", default=None,
              help="every version with its validity interval: of every key, or of KEY alone "
                   "(namespace/key or key, e.g. location/home_city)")
@click.option("--candidates", is_flag=True,
              help="also the candidate area: inferred or unconfirmed facts, with their evidence")
@click.option("--confirm", metavar="CANDIDATE_ID",
              help="confirm this candidate (its memory_id in --candidates --json): it becomes current")
@speaker_option
@json_flag
@with_client
async def facts(client: MemoryClient, services: Services, *, tenant: str, subject: str, as_of: datetime | None,
                history: str | None, candidates: bool, confirm: str | None, speaker: str | None, json: bool) -> None:
    from agent_memory.cli.formatting import format_fact

    if confirm:
        confirmed = await client.admin.confirm_fact(tenant, subject, confirm)
        if json:
            print_json(confirmed.model_dump(mode="json"))
        else:
            print(f"confirmed candidate {confirm}: it is the current value now ({confirmed.operation_id})")
        return
    rows = await client.facts(tenant, subject, as_of=as_of, history=history is not None, candidates=candidates,
                              filters=speaker_filter(speaker))
    if history:
        ns, _, key = history.rpartition("/")
        rows = [r for r in rows if r.key == key and (not ns or r.namespace == ns)]
    if json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    for fact in rows:
        print(format_fact(fact))
    if not rows:
        erased = await client.admin.subject_erased(tenant, subject)
        print(f"subject {subject} of tenant {tenant} was erased: nothing is kept" if erased
              else f"no facts for subject {subject} (tenant {tenant})")



@click.command("entities", cls=Command, help="the people, pets, places, organisations, events and things the "
               "subject's sessions mention")
@scoped()
@json_flag
@with_client
async def entities(client: MemoryClient, services: Services, *, tenant: str, subject: str, json: bool) -> None:
    rows = await client.entities(tenant, subject)
    if json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    for entity in rows:
        aliases = f" (also {', '.join(entity.aliases)})" if entity.aliases else ""
        print(f"{entity.entity_type:<12} {entity.name}{aliases}: {len(entity.mentioned_in)} mention(s), "
              f"{entity.first_seen_at:%Y-%m-%d} to {entity.last_seen_at:%Y-%m-%d}  [{entity.memory_id}]")
    if not rows:
        print(f"no entities for subject {subject} (tenant {tenant})")


@click.command("relations", cls=Command, help="the relations between the subject's entities that hold now")
@scoped()
@click.option("--history", is_flag=True, help="every interval of every relation, the ended ones too")
@json_flag
@with_client
async def relations(client: MemoryClient, services: Services, *, tenant: str, subject: str, history: bool,
                    json: bool) -> None:
    rows = await client.relations(tenant, subject, history=history)
    if json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    for edge in rows:
        kind = f"{edge.relation} ({edge.role})" if edge.role else edge.relation
        until = f" until {edge.valid_to:%Y-%m-%d}" if edge.valid_to else ""
        print(f"{edge.source_name} -[{kind}]-> {edge.target_name}: since {edge.valid_from:%Y-%m-%d}{until}, "
              f"evidence {', '.join(edge.evidence_message_ids) or '-'}")
    if not rows:
        print(f"no relations for subject {subject} (tenant {tenant})")

COMMANDS = (ingest, end_session)
READS = (recall, context, prompt)
