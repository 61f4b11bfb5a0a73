"""A tenant's categories of memory: define (or redefine) one, list them, remove one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agent_memory.cli.core import Command, Group, json_flag, print_json, scoped, with_client

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services


@click.group("categories", cls=Group, dest="categories_command", help="a tenant's categories of memory (set, list, "
             "remove), by which recall, the context, the facts and the export filter")
def categories() -> None:
    pass


@categories.command("set", cls=Command, help="define a category, or replace its definition")
@scoped(subject=False)
@click.argument("name", metavar="NAME")
@click.option("--word", "words", multiple=True, metavar="WORD",
              help="a memory whose text holds this word is in the category (repeatable)")
@click.option("--namespace", "namespaces", multiple=True, metavar="NAMESPACE",
              help="every fact of this namespace is in the category (repeatable)")
@click.option("--description", default="", metavar="TEXT", help="what the category is about")
@json_flag
@with_client
async def set_(client: MemoryClient, services: Services, *, tenant: str, name: str, words: tuple[str, ...],
               namespaces: tuple[str, ...], description: str, json: bool) -> None:
    from agent_memory.memory.categories import category

    defined = await client.admin.put_category(tenant, category(name=name, description=description, words=list(words),
                                                         namespaces=list(namespaces)))
    if json:
        print_json(defined.model_dump(mode="json"))
    else:
        print(f"category {defined.name} of tenant {tenant}: words {', '.join(defined.words) or '-'}; "
              f"namespaces {', '.join(defined.namespaces) or '-'}")


@categories.command("list", cls=Command, help="the tenant's categories")
@scoped(subject=False)
@json_flag
@with_client
async def list_(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    found = await client.admin.categories(tenant)
    if json:
        print_json([c.model_dump(mode="json") for c in found])
        return
    for c in found:
        print(f"{c.name}  words: {', '.join(c.words) or '-'}  namespaces: {', '.join(c.namespaces) or '-'}"
              + (f"  ({c.description})" if c.description else ""))


@categories.command("remove", cls=Command, help="remove a category (the memories stay as they are)")
@scoped(subject=False)
@click.argument("name", metavar="NAME")
@json_flag
@with_client
async def remove(client: MemoryClient, services: Services, *, tenant: str, name: str, json: bool) -> None:
    await client.admin.remove_category(tenant, name)
    if json:
        print_json({"removed": name})
    else:
        print(f"removed category {name} of tenant {tenant}")
