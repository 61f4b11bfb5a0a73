"""Runs, stats and the operator's maintenance commands: runs, rebuild, rederive, stats, projection,
sweep, reembed, compact, authorizations, register-search-attributes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from agent_memory.cli.core import (
    IDENTIFIER_REQUEST,
    IDENTIFIER_SUBJECT,
    Command,
    Group,
    json_flag,
    print_json,
    scoped,
    with_client,
    with_settings,
)

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services
    from agent_memory.core.settings import Settings


@click.command("runs", cls=Command, help="list workflow runs (the Temporal UI's visibility query)")
@scoped(subject=False)
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT")
@click.option("--parked", is_flag=True, help="only the consolidations parked on the tenant's token budget")
@json_flag
@with_client
async def runs(client: MemoryClient, services: Services, *, tenant: str, subject: str | None, parked: bool,
               json: bool) -> None:
    from agent_memory.cli.formatting import format_run_payloads

    listed = await client.admin.runs(tenant, subject, parked=parked)
    if json:
        print_json([r.model_dump(mode="json") for r in listed])
        return
    for run in listed:
        print(f"{run.status:<12} {run.workflow_type:<24} {run.workflow_id}  started {run.started_at}"
              + (f"  [{run.state}]" if run.state else ""))
        print(format_run_payloads(run))
    if parked and not listed:
        print(f"no consolidation of {tenant} is parked on its token budget")


@click.command("rebuild", cls=Command, help="rebuild projections from the event log and compare digests")
@scoped(subject=False)
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT", help="one subject (default: every subject)")
@click.option("--force", is_flag=True, help="swap the rebuilt tables in even when equal")
@click.option("--request-id", type=IDENTIFIER_REQUEST, metavar="REQUEST_ID")
@click.option("--wait", is_flag=True)
@json_flag
@with_client
async def rebuild(client: MemoryClient, services: Services, *, tenant: str, subject: str | None, force: bool,
                  request_id: str | None, wait: bool, json: bool) -> None:
    from agent_memory.cli.progress import Progress, wait_with_progress

    handle = await client.admin.rebuild(tenant, subject, force=force, request_id=request_id)
    if not json:
        print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
    if not (wait or json):
        return
    rebuilt = await wait_with_progress(
        handle, lambda: client.admin.rebuild_result(handle), Progress("rebuild subjects", None, enabled=not json),
        lambda p: (p.get("subjects_done", 0), p.get("subjects_total") or None, p.get("step", "")))
    if json:
        print_json(rebuilt.model_dump(mode="json"))
        return
    for e in rebuilt.subjects:
        state = "erased (skipped)" if e.skipped_erased else ("equal" if e.equal else (
            f"differed in {','.join(e.tables_differing)}" + (" → repaired" if e.repaired else "")))
        print(f"  {e.subject:<24} {state:<40} rows {e.rows:<6} events {e.events:<6} "
              f"digest {e.rebuilt_digest[:16]}  {e.elapsed_ms} ms")
    print(f"{rebuilt.subjects_total} subjects: {rebuilt.subjects_equal} equal, "
          f"{rebuilt.subjects_repaired} repaired, {rebuilt.skipped_erased} erased; {rebuilt.rows} rows"
          + (f" ({rebuilt.subjects_not_listed} more subjects counted, not listed)"
             if rebuilt.subjects_not_listed else ""))


@click.command("rederive", cls=Command, help="extract stored sessions again with the current extractor and apply "
               "the differences as events (--dry-run: list them, write nothing)")
@scoped(subject=False)
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT", help="one subject (default: every subject)")
@click.option("--dry-run", is_flag=True, help="list what would change per subject; write no event")
@click.option("--all-sessions", is_flag=True,
              help="every consolidated session, not only those whose facts an older extractor wrote")
@click.option("--request-id", type=IDENTIFIER_REQUEST, metavar="REQUEST_ID",
              help="name the run (the same id attaches to it, or to its result)")
@json_flag
@with_client
async def rederive(client: MemoryClient, services: Services, *, tenant: str, subject: str | None, dry_run: bool,
                   all_sessions: bool, request_id: str | None, json: bool) -> None:
    import sys

    from agent_memory.cli.formatting import format_rederive
    from agent_memory.cli.progress import Progress, wait_with_progress

    handle = await client.admin.rederive(tenant, subject, dry_run=dry_run, all_sessions=all_sessions,
                                   request_id=request_id)
    if not json:
        print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}", file=sys.stderr)
    report = await wait_with_progress(
        handle, lambda: client.admin.rederive_result(handle), Progress("rederive sessions", None, enabled=not json),
        lambda p: (p.get("sessions_done", 0), p.get("sessions_total") or None, p.get("step", "")))
    if json:
        print_json(report.model_dump(mode="json"))
        return
    print(format_rederive(report))


@click.command("stats", cls=Command, help="operator counters of a tenant (leak-filter drops, projection lag, "
               "episode importance, sessions without an episode, review marks) and the deployment's Schedules not as designed")
@scoped(subject=False)
@json_flag
@with_client
async def stats(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    from agent_memory.cli.formatting import format_importance, format_projection_lag

    drops = await client.admin.leak_filter_drops(tenant)
    lag = await client.admin.projection_lag(tenant)
    reads = await client.admin.read_counts(tenant)
    lifecycle = await client.admin.lifecycle_counts(tenant)
    erasures = await client.admin.erasure_counts(tenant)
    withheld = await client.admin.withheld_counts(tenant)
    gated = await client.admin.gated_sessions(tenant)
    importance = await client.admin.importance_spread(tenant)
    marks = await client.admin.stale_mark_counts(tenant)
    refused_operator_runs = await client.admin.refused_operator_runs()
    from temporalio.exceptions import TemporalError

    try:
        schedules = await client.admin.schedules_health()
    except (TemporalError, OSError) as exc:  # the counters are the database's: they print while Temporal is down
        unchecked = f"not checked: Temporal did not answer ({exc})"
        schedules = None
    schedules_json: dict[str, Any] = {"error": unchecked} if schedules is None else {
        "not_as_designed": schedules.count, "names": schedules.degraded, "paused": schedules.paused,
        "drifted": schedules.drifted, "missing": schedules.missing, "expected_absent": schedules.expected_absent}
    if json:
        print_json({"tenant_id": tenant, "leak_filter_drops": drops, "reads": reads,
                    "lifecycle": lifecycle.model_dump(mode="json"),
                    "erasures": erasures.model_dump(mode="json"), "write_gate_withheld": withheld,
                    "sessions_without_episode": gated,
                    "projection": lag.model_dump(mode="json", exclude={"tenant_id", "subject_id"}),
                    "episode_importance": importance.model_dump(mode="json"),
                    "review": marks.model_dump(mode="json"), "refused_operator_runs": refused_operator_runs,
                    "schedules": schedules_json})
        return
    print(f"context reads: {reads['context_reads']} ({reads['context_items']} items served); "
          f"recall reads: {reads['recall_reads']} ({reads['recall_items']} items)")
    print(f"leak filter drops: {drops['total']}" + "".join(
        f"\n  {reason}: {n}" for reason, n in drops.items() if reason != "total" and n))
    print(format_projection_lag(lag))
    print(f"forgotten: {lifecycle.forgotten_in_grace} in grace, {lifecycle.swept} swept "
          f"({lifecycle.swept_with_residue} with residue)")
    print("review marks in force: " + (", ".join(f"{n} {reason}" for reason, n in sorted(marks.in_force.items()))
                                       or "none") + f"; {marks.resolved} resolved")
    print("write gate withheld: " + (", ".join(f"{n} {reason}" for reason, n in withheld.items()) or "nothing"))
    print(f"sessions without an episode (substance gate): {gated['total']} ({gated['too_short']} too short, "
          f"{gated['small_talk']} small talk)")
    deadline = services.settings.erasure_deadline_seconds
    print(f"erasures: {erasures.started} started ({erasures.stuck} over "
          f"{'an hour' if deadline == 3600 else f'{deadline:g} s'}), {erasures.completed} completed, {erasures.redriven} "
          f"re-driven ({erasures.redrives} re-drives)")
    print(f"refused starts: {erasures.refused_requests} unregistered destructive requests, "
          f"{erasures.refused_claimed} runs of an authorization another run consumed, "
          f"{erasures.refused_expired} of an expired one, "
          f"{erasures.refused_payloads} Temporal payloads not written for their run; "
          f"{refused_operator_runs} refused runs of operator requests in the deployment")
    print(format_importance(importance))
    if schedules is None:
        print(f"Schedules: {unchecked}")
        return
    print(f"Schedules not as designed: {schedules.count}" + "".join(
        f"\n  {kind}: {', '.join(names)}" for kind, names in (("paused", schedules.paused),
                                                             ("altered", schedules.drifted),
                                                             ("missing", schedules.missing)) if names)
          + (" (agent-memory schedules ensure restores them)" if schedules.count else ""))


@click.group("projection", cls=Group, dest="projection_command",
             help="the vector projection's outbox: retry dead letters")
def projection() -> None:
    pass


@projection.command("retry-dead-letters", cls=Command, help="give dead-lettered outbox rows a fresh set of "
                    "attempts and wake their projectors (after fixing what made them fail)")
@scoped(subject=False)
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT", help="one subject (default: every subject)")
@json_flag
@with_client
async def retry_dead_letters(client: MemoryClient, services: Services, *, tenant: str, subject: str | None,
                             json: bool) -> None:
    woken = await client.admin.retry_dead_letters(tenant, subject)
    if json:
        print_json({"tenant_id": tenant, "subjects_woken": woken})
    else:
        print(f"dead letters requeued for {len(woken)} subject(s)" + "".join(f"\n  {s}" for s in woken))


@click.command("sweep", cls=Command, help="sweep memories forgotten longer than the grace period now (the hourly "
               "Schedule)")
@click.option("--grace-seconds", type=float, default=None, metavar="GRACE_SECONDS",
              help="override the worker's grace period (AGENT_MEMORY_FORGET_GRACE_SECONDS) for this run")
@click.option("--no-retention", is_flag=True, help="skip the retention step of the sweep")
@json_flag
@with_client
async def sweep(client: MemoryClient, services: Services, *, grace_seconds: float | None, no_retention: bool,
                json: bool) -> None:
    swept = await client.admin.sweep(grace_seconds=grace_seconds, retention=not no_retention)
    if json:
        print_json(swept.model_dump(mode="json"))
        return
    print(f"swept {swept.swept} memories in {swept.tenants} tenant(s) (grace {swept.grace_seconds:g} s): "
          f"{swept.rows_deleted} rows, {swept.operations_deleted} recorded results, "
          f"{swept.events_deleted} events deleted; residue found in {swept.residue_found}")
    print("retention forgot " + (", ".join(f"{n} {rule}" for rule, n in swept.retention_forgotten.items())
                                 or "nothing") + " (swept after the grace period)")


@click.command("reembed", cls=Command, help="re-embed a tenant's memories under the configured embedding model "
               "(workers start it when their model changed)")
@scoped(subject=False)
@click.option("--wait", is_flag=True, help="wait for the switch and print the result")
@json_flag
@with_client
async def reembed(client: MemoryClient, services: Services, *, tenant: str, wait: bool, json: bool) -> None:
    handle = await client.admin.reembed(tenant)
    progress = await handle.result() if wait else await client.admin.reembed_progress(handle)
    if json:
        print_json({"workflow_id": handle.id, "progress": progress.model_dump(mode="json") if progress else None})
        return
    print(f"re-embedding {handle.id}: {services.settings.workflow_url(handle.id)}")
    if progress is not None:
        print(f"  {progress.state}: {progress.done} of {progress.total} vectors of "
              f"{progress.source_model or '-'} re-embedded under {progress.target_model}")


@click.command("compact", cls=Command, help="physical compaction of what erasures deleted (the hourly Schedule)")
@click.option("--all", "all", is_flag=True, help="every erasure table, even with no pending ticket")
@json_flag
@with_client
async def compact(client: MemoryClient, services: Services, *, all: bool, json: bool) -> None:
    compaction = await client.admin.compact(force=all)
    if json:
        print_json(compaction.model_dump(mode="json"))
        return
    for t in compaction.tables:
        print(f"  {t.table:<20} {t.seconds:>8.2f} s  {t.size_before_bytes:>12,} → {t.size_after_bytes:,} bytes")
    print(f"{compaction.compaction_id}: {compaction.tickets} erasure tickets, {len(compaction.tables)} tables, "
          f"redis {compaction.redis or 'untouched'}, {compaction.elapsed_seconds:.2f} s")


@click.command("authorizations", cls=Command, help="the single-use authorizations of destructive runs, newest "
               "first: kind, workflow id, who registered it and when, which run claimed it and when, state")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True, metavar="N",
              help="list at most N")
@json_flag
@with_client
async def authorizations(client: MemoryClient, services: Services, *, limit: int, json: bool) -> None:
    listed = await client.admin.authorizations(limit=limit)
    if json:
        print_json([a.model_dump(mode="json") for a in listed])
        return
    if not listed:
        print("no operator request is registered")
    for a in listed:
        claim = (f"claimed by run {a.claimed_by_run_id} at {a.claimed_at:%Y-%m-%d %H:%M:%S}"
                 if a.claimed_at is not None else f"expires {a.expires_at:%Y-%m-%d %H:%M:%S}")
        refused = f"; {a.refused_runs} other run(s) refused" if a.refused_runs else ""
        print(f"{a.state:<9} {a.kind:<12} {a.workflow_id or '-'}  registered by {a.registered_by or '-'} at "
              f"{a.registered_at:%Y-%m-%d %H:%M:%S}; {claim}{refused}")


@click.command("register-search-attributes", cls=Command,
               help="register the workflows' search attributes in the configured Temporal namespace (idempotent; "
                    "needs only TEMPORAL_ADDRESS and its TLS/API key settings)")
@with_settings
async def register_search_attributes(settings: Settings) -> int:
    """Temporal only: no database, no keys."""
    from agent_memory.api.search_attributes import register_search_attributes_command

    return await register_search_attributes_command(settings)
