"""Keys: the HTTP API's keys (per tenant and operator) and the key-encryption keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import Choice, Command, Group, json_flag, print_json, scoped, with_client
from agent_memory.core.errors import NotFound

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services


@click.group("keys", cls=Group, dest="keys_command", help="API keys of the HTTP API (create, list, revoke), and "
             "key-encryption keys (rotate: re-wrap every subject key, destroy the old KEK; status)")
def keys() -> None:
    pass


@keys.command("rotate", cls=Command, help="rotate now (the daily Schedule rotates only after erasures)")
@click.option("--if-needed", is_flag=True,
              help="only when a subject key was shredded since the last rotation (the Schedule's mode)")
@json_flag
@with_client
async def rotate(client: MemoryClient, services: Services, *, if_needed: bool, json: bool) -> None:
    rotation = await client.admin.rotate_keys(force=not if_needed)
    if json:
        print_json(rotation.model_dump(mode="json"))
    elif not rotation.rotated:
        print(f"nothing to rotate: no subject key was shredded under {rotation.new_kek_id} since it became "
              "active (omit --if-needed to rotate anyway)")
    else:
        print(f"active key-encryption key {rotation.new_kek_id}: re-wrapped {rotation.rewrapped_subject_keys} "
              f"subject keys and {rotation.reencrypted_reasons} erasure reasons; destroyed "
              f"{', '.join(rotation.destroyed_kek_ids) or 'none'} ({rotation.shreds_made_irreversible} "
              f"shreds now irreversible) in {rotation.elapsed_seconds:.2f} s")


@keys.command("rotate-payload", cls=Command, help="a new Temporal payload key (each process of the key directory "
              "picks it up at the first payload under it); retired keys decode older histories until destroyed")
@click.option("--destroy-retired-after-days", type=float, metavar="DAYS",
              help="also destroy each retired payload key replaced more than DAYS ago; DAYS must cover the "
                   "namespace's retention plus the longest run, or older histories become unreadable")
@json_flag
@with_client
async def rotate_payload(client: MemoryClient, services: Services, *, destroy_retired_after_days: float | None,
                         json: bool) -> None:
    from datetime import UTC, datetime, timedelta

    provider = services.keyring.provider
    active = provider.rotate_payload_key()
    destroyed: list[str] = []
    if destroy_retired_after_days is not None:
        destroyed = provider.destroy_retired_payload_keys(datetime.now(UTC) - timedelta(days=destroy_retired_after_days))
    retired_kept = len(provider.payload_keys()) - 1
    if json:
        print_json({"active_payload_key": active, "destroyed": destroyed, "retired_kept": retired_kept})
    else:
        print(f"active payload key {active}: new processes encode under it, and running ones (the worker, the API) "
              f"load it at the first payload under it; {retired_kept} retired key(s) kept to read older histories; "
              f"destroyed {', '.join(destroyed) or 'none'}")


@keys.command("status", cls=Command, help="every KEK: state, shredded keys it still covers")
@json_flag
@with_client
async def status(client: MemoryClient, services: Services, *, json: bool) -> None:
    from agent_memory.security.keyring import list_keks

    keks = await list_keks(services.pool)
    if json:
        print_json([k.model_dump(mode="json") for k in keks])
        return
    for k in keks:
        print(f"{k.kek_id:<32} {k.state:<10} created {k.created_at:%Y-%m-%d %H:%M}  shredded keys "
              f"{k.shredded_keys}" + (f"  destroyed {k.destroyed_at:%Y-%m-%d %H:%M} by {k.destroyed_by}"
                                      if k.destroyed_at else ""))


@keys.command("create", cls=Command, help="an API key of the tenant (printed once; only its hash is stored)")
@scoped(subject=False)
@click.option("--scope", type=Choice(("read", "write", "erase")), default="write", metavar="{read,write,erase}",
              help="read: reads; write: also appends and ends sessions; erase: also forgets and erases")
@click.option("--name", metavar="NAME", help="a label, e.g. support-bot")
@click.option("--agent", metavar="AGENT_ID", help="limit the key to one agent: it writes that agent's messages "
              "and does not see other agents' private sessions")
@click.option("--app", metavar="APP_ID", help="limit the key to one app: it writes that app's messages and reads "
              "the memories citing them")
@json_flag
@with_client
async def create(client: MemoryClient, services: Services, *, tenant: str, scope: str, name: str | None,
                 agent: str | None, app: str | None, json: bool) -> None:
    from agent_memory.security.api_keys import create_key

    created = await create_key(services.pool, tenant, scope, name, agent_id=agent,  # type: ignore[arg-type]
                               app_id=app)
    if json:
        print_json(created.model_dump(mode="json"))
    else:
        limited = (f", agent {agent}" if agent else "") + (f", app {app}" if app else "")
        print(f"API key {created.key.key_id} ({created.key.scope}{limited}) of tenant {tenant}; shown once:\n"
              f"{created.token}")


@keys.command("list", cls=Command, help="the tenant's API keys (no secrets)")
@scoped(subject=False)
@json_flag
@with_client
async def list_(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    from agent_memory.security.api_keys import list_keys

    api_keys = await list_keys(services.pool, tenant)
    if json:
        print_json([ak.model_dump(mode="json") for ak in api_keys])
        return
    for ak in api_keys:
        print(f"{ak.key_id}  {ak.scope:<6} {ak.name or '-':<20} created {ak.created_at:%Y-%m-%d %H:%M}"
              + (f"  revoked {ak.revoked_at:%Y-%m-%d %H:%M}" if ak.revoked_at else ""))


@keys.command("revoke", cls=Command, help="revoke an API key at once")
@scoped(subject=False)
@click.option("--key-id", required=True, metavar="KEY_ID")
@with_client
async def revoke(client: MemoryClient, services: Services, *, tenant: str, key_id: str) -> None:
    from agent_memory.security.api_keys import revoke_key

    if not await revoke_key(services.pool, tenant, key_id):
        raise NotFound(f"no active API key {key_id!r} in tenant {tenant!r}: `agent-memory keys list` shows them")
    print(f"API key {key_id} revoked")


@keys.command("create-operator", cls=Command, help="an operator key, for the Temporal UI's codec endpoint and the "
              "console across tenants (printed once; only its hash is stored)")
@click.option("--name", metavar="NAME", help="a label, e.g. on-call")
@json_flag
@with_client
async def create_operator(client: MemoryClient, services: Services, *, name: str | None, json: bool) -> None:
    from agent_memory.security.operator_keys import create_operator_key

    created = await create_operator_key(services.pool, name)
    if json:
        print_json(created.model_dump(mode="json"))
    else:
        print(f"operator key {created.key.key_id}; shown once:\n{created.token}")


@keys.command("list-operator", cls=Command, help="the operator keys (no secrets)")
@json_flag
@with_client
async def list_operator(client: MemoryClient, services: Services, *, json: bool) -> None:
    from agent_memory.security.operator_keys import list_operator_keys

    operator_keys = await list_operator_keys(services.pool)
    if json:
        print_json([ok.model_dump(mode="json") for ok in operator_keys])
        return
    for ok in operator_keys:
        print(f"{ok.key_id}  {ok.name or '-':<20} created {ok.created_at:%Y-%m-%d %H:%M}"
              + (f"  revoked {ok.revoked_at:%Y-%m-%d %H:%M}" if ok.revoked_at else ""))


@keys.command("revoke-operator", cls=Command, help="revoke an operator key at once")
@click.option("--key-id", required=True, metavar="KEY_ID")
@with_client
async def revoke_operator(client: MemoryClient, services: Services, *, key_id: str) -> None:
    from agent_memory.security.operator_keys import revoke_operator_key

    if not await revoke_operator_key(services.pool, key_id):
        raise NotFound(f"no active operator key {key_id!r}: `agent-memory keys list-operator` shows them")
    print(f"operator key {key_id} revoked")
