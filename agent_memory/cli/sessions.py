"""What memory holds per tenant: subjects and their sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import POSITIVE, Command, json_flag, print_json, scoped, with_client

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services


@click.command("subjects", cls=Command, help="the tenant's subjects: sessions, messages, current facts, episodes, "
               "last consolidation (erased ones marked)")
@scoped(subject=False)
@click.option("--limit", type=POSITIVE, default=1000, metavar="LIMIT")
@json_flag
@with_client
async def subjects(client: MemoryClient, services: Services, *, tenant: str, limit: int, json: bool) -> None:
    from agent_memory.cli.formatting import format_subject
    from agent_memory.store.inventory import list_subjects

    listing = await list_subjects(services.pool, tenant, limit)
    if json:
        print_json(listing.model_dump(mode="json"))
        return
    for row in listing.subjects:
        print(format_subject(row))
    if not listing.subjects:
        print(f"no subjects in tenant {tenant}")
    if listing.erased_subjects:
        print(f"{listing.erased_subjects} erased subject(s): their ids are not kept "
              "(`agent-memory sessions --subject S` says whether S was erased)")


@click.command("sessions", cls=Command, help="a subject's sessions: messages, last consolidation, messages not yet "
               "consolidated")
@scoped()
@click.option("--limit", type=POSITIVE, default=1000, metavar="LIMIT")
@json_flag
@with_client
async def sessions(client: MemoryClient, services: Services, *, tenant: str, subject: str, limit: int,
                   json: bool) -> None:
    from agent_memory.cli.formatting import format_session
    from agent_memory.store.inventory import list_sessions

    held = await list_sessions(services.pool, tenant, subject, limit)
    if json:
        print_json([row.model_dump(mode="json") for row in held])
        return
    if not held:
        erased = await client.admin.subject_erased(tenant, subject)
        print(f"subject {subject} of tenant {tenant} was erased: nothing is kept" if erased
              else f"no sessions for subject {subject} (tenant {tenant})")
    for session_row in held:
        print(format_session(session_row))
