"""`agent-memory`: feed sessions, inspect memory, erase subjects.

The library's commands on click, a module per command group, against configured services. The
`agent-memory` console script (workers/cli.py) adds the commands that run processes (the embedded
stack, a worker, migrations, the demo, the servers) and finds a running embedded stack, so this
package never imports the worker, activity or workflow packages. A command imports what it needs
when it runs: the help loads click and this package only."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import click

from agent_memory.cli import categories, erasure, keys, memory, policies, review, runs, sessions, webhooks
from agent_memory.cli.core import PROG, RootGroup, ServicesOpener, add_commands

DESCRIPTION = "`agent-memory`: feed sessions, inspect memory, erase subjects."


def library_commands() -> list[click.Command]:
    """The library's commands, in the order the help lists them."""
    return [memory.ingest, memory.end_session, runs.runs, erasure.erase, runs.rebuild, runs.rederive,
            memory.recall, memory.context,
            memory.prompt, policies.policy, policies.retention, memory.facts, memory.entities, memory.relations,
            policies.write_policy, policies.provider_policy, policies.token_budget, policies.consent, categories.categories, sessions.subjects,
            sessions.sessions,
            runs.stats, runs.projection, keys.keys, webhooks.webhooks, erasure.erasure, erasure.forget, erasure.restore,
            erasure.export,
            erasure.forgotten, review.review, runs.sweep, runs.reembed, erasure.redrive_erasures, runs.compact,
            runs.authorizations,            runs.register_search_attributes]


def build_cli(*extensions: Iterable[click.Command], description: str = DESCRIPTION,
              open_services: ServicesOpener | None = None) -> RootGroup:
    """The program: each extension's commands first, then the library's."""
    group = RootGroup(PROG, help=description, open_services=open_services)
    for commands in extensions:
        add_commands(group, commands)
    add_commands(group, library_commands())
    return group


def main(argv: Sequence[str] | None = None, *, cli: Callable[[], RootGroup] = build_cli) -> int:
    """Run the command line; errors are one line on stderr: exit 2 for a usage or input error, 1 for
    a failing service, 130 on Ctrl-C."""
    code: int = cli().main(list(argv) if argv is not None else None, PROG, standalone_mode=False)
    return code
