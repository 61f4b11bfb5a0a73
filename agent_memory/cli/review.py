"""The daily review (docs/lifecycle.md, "Review"): review run, review list, review resolve."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import IDENTIFIER_SUBJECT, Choice, Command, Group, json_flag, print_json, scoped, with_client

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services

review = Group("review", dest="review_command", help="what the daily review marked as possibly stale: list the "
               "marks, resolve one (keep or forget; a correction resolves its fact's marks)")


@review.command("run", cls=Command, help="review the tenant now (what the daily Schedule does for every tenant)")
@scoped(subject=False)
@json_flag
@with_client
async def review_run(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    done = await client.admin.review(tenant)
    if json:
        print_json(done.model_dump(mode="json"))
        return
    print("marked " + (", ".join(f"{n} {reason}" for reason, n in sorted(done.marked.items())) or "nothing")
          + f"; {done.obsolete} mark(s) closed as obsolete")


@review.command("list", cls=Command, help="the marks in force, newest first (--all: resolved ones too)")
@scoped(subject=False)
@click.option("--subject", type=IDENTIFIER_SUBJECT, metavar="SUBJECT", help="one subject (default: every subject)")
@click.option("--all", "include_resolved", is_flag=True, help="list resolved marks too")
@json_flag
@with_client
async def review_list(client: MemoryClient, services: Services, *, tenant: str, subject: str | None,
                      include_resolved: bool, json: bool) -> None:
    marks = await client.admin.stale_marks(tenant, subject_id=subject, include_resolved=include_resolved)
    if json:
        print_json([m.model_dump(mode="json") for m in marks])
        return
    if not marks:
        print("no marks")
    for m in marks:
        related = f" (related: {', '.join(m.related_memory_ids)})" if m.related_memory_ids else ""
        state = m.state if m.state == "open" and m.in_force else f"{m.state} {m.resolution or 'obsolete'}"
        print(f"{m.mark_id} {m.subject_id} {m.memory_kind} {m.memory_id}: {m.reason}{related}, marked "
              f"{m.marked_at:%Y-%m-%d %H:%M} — {state}")


@review.command("resolve", cls=Command, help="keep the marked memory (a fact counts as confirmed) or forget it, "
                "and close the mark")
@scoped()
@click.option("--mark-id", required=True, metavar="MARK_ID", help="the mark's id, as `review list` prints it")
@click.option("--resolution", required=True, type=Choice(("keep", "forget")), metavar="{keep,forget}",
              help="keep: the value still holds; forget: forget the marked memory (restorable in the grace period)")
@click.option("--actor-id", metavar="ACTOR_ID", help="who decided (an operator's id), recorded with the event")
@click.option("--reason", metavar="REASON", help="why (a ticket number): kept encrypted in the event log")
@json_flag
@with_client
async def review_resolve(client: MemoryClient, services: Services, *, tenant: str, subject: str, mark_id: str,
                         resolution: str, actor_id: str | None, reason: str | None, json: bool) -> None:
    done = await client.admin.resolve_stale_mark(tenant, subject, mark_id, "keep" if resolution == "keep" else "forget",
                                           actor_id=actor_id, reason=reason)
    if json:
        print_json(done.model_dump(mode="json"))
        return
    print(f"mark {done.mark.mark_id} resolved ({done.mark.resolution})"
          + (": the fact counts as confirmed" if done.confirmed else "")
          + (": the memory is forgotten, restorable within the grace period" if done.forgotten else ""))
