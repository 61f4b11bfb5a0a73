"""Webhooks: a tenant's endpoints (add, list, remove, rotate-secret), its deliveries and their re-delivery."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import Choice, Command, Group, json_flag, print_json, scoped, with_client

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services

# The event types (agent_memory.memory.webhooks.EVENT_TYPES), spelt out so `--help` imports nothing.
EVENTS = ("consolidation.completed", "memory.created", "memory.updated", "memory.forgotten", "memory.stale",
          "erasure.completed")


@click.group("webhooks", cls=Group, dest="webhooks_command", help="a tenant's webhook endpoints (add, list, "
             "remove), its deliveries, and the re-delivery of a dead one")
def webhooks() -> None:
    pass


@webhooks.command("add", cls=Command, help="register an endpoint (its signing secret is printed once)")
@scoped(subject=False)
@click.option("--url", required=True, metavar="URL", help="the receiver's https:// URL")
@click.option("--event", "events", required=True, multiple=True, type=Choice(EVENTS), metavar="EVENT",
              help=f"an event type to deliver (repeatable): {', '.join(EVENTS)}")
@json_flag
@with_client
async def add(client: MemoryClient, services: Services, *, tenant: str, url: str, events: tuple[str, ...],
              json: bool) -> None:
    created = await client.admin.add_webhook(tenant, url, list(events))
    if json:
        print_json(created.model_dump(mode="json"))
    else:
        print(f"webhook endpoint {created.endpoint_id} of tenant {tenant} ({', '.join(created.events)}); "
              f"signing secret, shown once:\n{created.secret}")


@webhooks.command("list", cls=Command, help="the tenant's endpoints (no secrets)")
@scoped(subject=False)
@click.option("--all", "include_removed", is_flag=True, help="also the removed ones")
@json_flag
@with_client
async def list_(client: MemoryClient, services: Services, *, tenant: str, include_removed: bool, json: bool) -> None:
    endpoints = await client.admin.webhooks(tenant, include_removed=include_removed)
    if json:
        print_json([e.model_dump(mode="json") for e in endpoints])
        return
    if not endpoints:
        print(f"no webhook endpoints in tenant {tenant}" + ("" if include_removed else " (--all: the removed too)")
              + ": add one with agent-memory webhooks add --tenant T --url URL --event EVENT")
    for e in endpoints:
        print(f"{e.endpoint_id}  {e.url}  {','.join(e.events)}  created {e.created_at:%Y-%m-%d %H:%M}"
              + (f"  removed {e.disabled_at:%Y-%m-%d %H:%M}" if e.disabled_at else "")
              + ("  legacy secret: rotate it" if e.secret_format == "legacy" else ""))


@webhooks.command("rotate-secret", cls=Command, help="give an endpoint a new signing secret (printed once); the "
                  "replaced one keeps signing deliveries during the overlap")
@scoped(subject=False)
@click.argument("endpoint_id", metavar="ENDPOINT_ID")
@click.option("--overlap-hours", type=click.FloatRange(0, 168), default=24, show_default=True, metavar="HOURS",
              help="how long the replaced secret keeps signing deliveries next to the new one (0: not at all)")
@json_flag
@with_client
async def rotate_secret(client: MemoryClient, services: Services, *, tenant: str, endpoint_id: str,
                        overlap_hours: float, json: bool) -> None:
    rotated = await client.admin.rotate_webhook_secret(tenant, endpoint_id, overlap_hours=overlap_hours)
    if json:
        print_json(rotated.model_dump(mode="json"))
    else:
        until = rotated.previous_secret_expires_at
        print(f"webhook endpoint {rotated.endpoint_id}: new signing secret, shown once:\n{rotated.secret}\n"
              + (f"the replaced secret signs deliveries too until {until:%Y-%m-%d %H:%M %Z}" if until
                 else "the replaced secret signs nothing more"))


@webhooks.command("remove", cls=Command, help="remove an endpoint: nothing more is delivered to it")
@scoped(subject=False)
@click.argument("endpoint_id", metavar="ENDPOINT_ID")
@json_flag
@with_client
async def remove(client: MemoryClient, services: Services, *, tenant: str, endpoint_id: str, json: bool) -> None:
    removed = await client.admin.remove_webhook(tenant, endpoint_id)
    if json:
        print_json(removed.model_dump(mode="json"))
    else:
        print(f"webhook endpoint {removed.endpoint_id} removed")


@webhooks.command("deliveries", cls=Command, help="the tenant's deliveries, newest first")
@scoped(subject=False)
@click.option("--status", type=Choice(("pending", "delivered", "dead")), metavar="{pending,delivered,dead}",
              help="only these (dead: the dead letters)")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, metavar="N")
@json_flag
@with_client
async def deliveries(client: MemoryClient, services: Services, *, tenant: str, status: str | None, limit: int,
                     json: bool) -> None:
    found = await client.admin.webhook_deliveries(tenant, status=status, limit=limit)  # type: ignore[arg-type]
    if json:
        print_json([d.model_dump(mode="json") for d in found])
        return
    if not found:
        print(f"no {status + ' ' if status else ''}webhook deliveries in tenant {tenant}")
    for d in found:
        answer = f"last {d.last_status_code or '-'} {d.last_error or ''}".rstrip()
        print(f"{d.delivery_id}  {d.event_type:<24} {d.status:<9} attempts {d.attempts}  {answer}  "
              f"created {d.created_at:%Y-%m-%d %H:%M:%S}")


@webhooks.command("redeliver", cls=Command, help="send a dead (or delivered) delivery again, in a new run")
@scoped(subject=False)
@click.argument("delivery_id", metavar="DELIVERY_ID")
@json_flag
@with_client
async def redeliver(client: MemoryClient, services: Services, *, tenant: str, delivery_id: str, json: bool) -> None:
    delivery = await client.admin.redeliver_webhook(tenant, delivery_id)
    if json:
        print_json(delivery.model_dump(mode="json"))
    else:
        print(f"webhook delivery {delivery.delivery_id} pending again (re-delivery {delivery.redeliveries}; "
              f"{delivery.attempts} attempts so far)")
