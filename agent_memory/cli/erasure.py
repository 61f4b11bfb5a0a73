"""Erasure and the memory lifecycle: erase, erasure status/reapply, redrive-erasures, forget, restore,
forgotten, export."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import (
    IDENTIFIER_REQUEST,
    IDENTIFIER_SUBJECT,
    Command,
    Group,
    json_flag,
    print_json,
    scoped,
    speaker_filter,
    speaker_option,
    with_client,
)

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services


@click.command("erase", cls=Command, help="erase a subject from every store and print the receipt")
@scoped()
@click.option("--reason", required=True, metavar="REASON")
@click.option("--request-id", type=IDENTIFIER_REQUEST, metavar="REQUEST_ID")
@click.option("--wait", is_flag=True)
@click.option("--block-future-writes", is_flag=True,
              help="erase (tombstone) a subject with no data too, so no write for this id is ever accepted")
@json_flag
@with_client
async def erase(client: MemoryClient, services: Services, *, tenant: str, subject: str, reason: str,
                request_id: str | None, wait: bool, block_future_writes: bool, json: bool) -> None:
    from agent_memory.cli.progress import Progress, wait_with_progress

    handle = await client.admin.erase(tenant, subject, reason, request_id, block_future_writes=block_future_writes)
    if not json:
        print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
    if wait or json:
        receipt = await wait_with_progress(
            handle, lambda: client.admin.erasure_receipt(handle), Progress("erase stores", None, enabled=not json),
            lambda p: (len(p.get("stores_done", [])), None, p.get("step", "")))
        print_json(receipt.model_dump(mode="json"))


@click.group("erasure", cls=Group, dest="erasure_command", help="an erasure request as it stands now")
def erasure() -> None:
    pass


@erasure.command("status", cls=Command,
                 help="receipt, whether the shred is irreversible yet (key rotation), whether compacted")
@scoped(subject=False)
@click.option("--request-id", required=True, type=IDENTIFIER_REQUEST, metavar="REQUEST_ID")
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT",
              help="the erased subject, to show its id in the receipt (kept only as a digest)")
@json_flag
@with_client
async def erasure_status(client: MemoryClient, services: Services, *, tenant: str, request_id: str,
                         subject: str | None, json: bool) -> None:
    from agent_memory.cli.formatting import format_erasure_status

    status = await client.admin.erasure_status(tenant, request_id, subject)
    if json:
        print_json(status.model_dump(mode="json"))
    else:
        print(format_erasure_status(status))


@erasure.command("reapply", cls=Command,
                 help="after restoring the database from a backup: run again the erasures the erasure ledger "
                      "records and the database does not know (waits for their receipts)")
@json_flag
@with_client
async def erasure_reapply(client: MemoryClient, services: Services, *, json: bool) -> None:
    reapplied, receipts = await client.admin.reapply_erasures(wait=True)
    if json:
        print_json({**reapplied.model_dump(mode="json"), "receipts": [r.model_dump(mode="json") for r in receipts]})
        return
    print(f"erasure ledger: {reapplied.ledger_entries} erasure(s), {reapplied.already_applied} present "
          f"in the database, {len(reapplied.reapplied)} re-applied")
    for again in reapplied.reapplied:
        print(f"  {again.tenant_id} {again.request_id}: {again.action}")
    for finished in receipts:
        print(f"  {finished.tenant_id} {finished.request_id}: residue {finished.residue_total}")


def _lifecycle_options(f):
    f = json_flag(f)
    f = click.option("--actor-id", metavar="ACTOR_ID", help="who asked (an operator's id), recorded with the event")(f)
    f = click.option("--reason", metavar="REASON", help="why (a ticket number): kept encrypted in the event log")(f)
    return click.option("--memory-id", required=True, metavar="MEMORY_ID",
                        help="the memory's id, as `facts --json`, `context` or `prompt --json` print it")(f)


@click.command("forget", cls=Command, help="forget one memory now (every read stops returning it); restorable "
               "within the grace period, swept after it")
@scoped()
@_lifecycle_options
@with_client
async def forget(client: MemoryClient, services: Services, *, tenant: str, subject: str, memory_id: str,
                 reason: str | None, actor_id: str | None, json: bool) -> None:
    done = await client.forget(tenant, subject, memory_id, reason=reason, actor_id=actor_id)
    if json:
        print_json(done.model_dump(mode="json"))
        return
    print(f"memory {done.memory_id} ({done.memory_kind}) "
          + ("was already forgotten" if done.already_forgotten else "forgotten")
          + f" at {done.forgotten_at:%Y-%m-%d %H:%M:%S %Z}; restorable until "
          f"{done.restorable_until:%Y-%m-%d %H:%M:%S %Z}, swept after that")


@click.command("restore", cls=Command, help="bring a forgotten memory back within the grace period")
@scoped()
@_lifecycle_options
@with_client
async def restore(client: MemoryClient, services: Services, *, tenant: str, subject: str, memory_id: str,
                  reason: str | None, actor_id: str | None, json: bool) -> None:
    done = await client.restore(tenant, subject, memory_id, reason=reason, actor_id=actor_id)
    if json:
        print_json(done.model_dump(mode="json"))
        return
    print(f"memory {done.memory_id} ({done.memory_kind}) restored: {done.events_reapplied} event(s) "
          f"applied again, now v{done.version}")


@click.command("export", cls=Command, help="everything memory holds about a subject, as one JSON document (the "
               "right of access)")
@scoped()
@click.option("--out", type=click.Path(path_type=Path), metavar="FILE", help="write it here (private to you: mode "
              "0600) instead of standard output; a new file only, never through a symbolic link")
@click.option("--force", is_flag=True, help="with --out: replace an existing regular file (a symbolic link is still "
              "refused)")
@speaker_option
@with_client
async def export(client: MemoryClient, services: Services, *, tenant: str, subject: str, out: Path | None,
                 force: bool, speaker: str | None) -> None:
    from agent_memory.cli.formatting import check_private_target, write_private

    if out is not None:
        check_private_target(out, force=force)
    document = (await client.admin.export(tenant, subject, filters=speaker_filter(speaker))).model_dump_json(indent=2)
    if out is None:
        print(document)
    else:
        write_private(out, document + "\n", force=force)
        print(f"wrote {out} ({len(document):,} characters, mode 0600)")


@click.command("forgotten", cls=Command, help="a subject's forgotten memories (in grace) and swept tombstones")
@scoped()
@json_flag
@with_client
async def forgotten(client: MemoryClient, services: Services, *, tenant: str, subject: str, json: bool) -> None:
    items = await client.admin.forgotten(tenant, subject)
    if json:
        print_json([i.model_dump(mode="json") for i in items])
        return
    if not items:
        print(f"no forgotten memories of subject {subject} (tenant {tenant})")
    for item in items:
        state = (f"swept {item.swept_at:%Y-%m-%d %H:%M:%S}, residue {item.residue}" if item.state == "swept"
                 else f"restorable until {item.forgotten_at + client.admin.forget_grace:%Y-%m-%d %H:%M:%S %Z}")
        print(f"{item.memory_id}  {item.memory_kind:<11} forgotten {item.forgotten_at:%Y-%m-%d %H:%M:%S} "
              f"by {item.actor}{'/' + item.actor_id if item.actor_id else ''}; {state}")


@click.command("redrive-erasures", cls=Command, help="start again the erasures stuck in 'started' whose workflow "
               "is gone (the hourly Schedule)")
@click.option("--stuck-after-seconds", type=float, default=3600.0, metavar="STUCK_AFTER_SECONDS")
@json_flag
@with_client
async def redrive_erasures(client: MemoryClient, services: Services, *, stuck_after_seconds: float,
                           json: bool) -> None:
    redriven = await client.admin.redrive_erasures(stuck_after_seconds=stuck_after_seconds)
    if json:
        print_json(redriven.model_dump(mode="json"))
    else:
        print(f"{redriven.stuck} stuck erasure(s): {redriven.redriven} re-driven, {redriven.still_running} "
              f"still running, {redriven.failed} failed (logged)")
