"""A tenant's policies and a subject's consents: policy (recall), retention, write-policy,
provider-policy, token-budget, consent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from agent_memory.cli.core import (
    PRESET_NAMES,
    Choice,
    Command,
    Group,
    Identifier,
    json_flag,
    preset_policy,
    print_json,
    scoped,
    with_client,
)

if TYPE_CHECKING:
    from agent_memory.api.client import MemoryClient
    from agent_memory.api.services import Services

# The policies' fields, for the help (tests/cli check they match the models).
RECALL_POLICY_FIELDS = ("tau_days", "window_days", "min_relevance", "importance_base", "importance_slope",
                        "profile_min_confidence", "profile_tokens", "episodic_tokens", "max_episodes", "episode_tokens",
                        "total_tokens", "recent_tokens", "recent_turns", "access_weight", "access_decay")
RETENTION_FIELDS = ("episode_days", "note_days", "candidate_days", "temporary_fact_days", "tool_call_days",
                    "webhook_delivery_days", "shelf_life_days", "candidate_review_days")
WRITE_POLICY_FIELDS = ("stored_namespaces", "consent_namespaces", "confirm_keys", "corroborate_keys")
PRESET_METAVAR = "{" + ",".join(PRESET_NAMES) + "}"


def _policy_group(name: str, dest: str, help: str) -> Group:
    return Group(name, dest=dest, help=help)


policy = _policy_group("policy", "policy_command",
                       "a tenant's recall policy: time decay, importance, window, tier budgets")
retention = _policy_group("retention", "retention_command", "a tenant's retention per memory type (docs/lifecycle.md)")
write_policy = _policy_group("write-policy", "write_policy_command", "a tenant's write gate: namespaces stored, "
                             "namespaces that need consent, keys that need confirmation")
provider_policy = _policy_group("provider-policy", "provider_policy_command", "what a remote model may see of a "
                                "tenant's data: identifiers redacted, namespaces never sent")
token_budget = _policy_group("token-budget", "token_budget_command", "a tenant's daily model-token budget: "
                             "when its model calls spent it, its consolidations park until the next UTC day")
consent = _policy_group("consent", "consent_command", "a subject's consents to storing a namespace (write-policy "
                        "consent_namespaces)")


def _print_recall_policy(current: Any, json: bool) -> None:
    if json:
        print_json(current.model_dump(mode="json"))
    else:
        print("\n".join(f"{name} = {value}" for name, value in current.model_dump().items()))


@policy.command("show", cls=Command, help="the policy in force")
@scoped(subject=False)
@json_flag
@with_client
async def policy_show(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    _print_recall_policy(await client.admin.get_recall_policy(tenant), json)


@policy.command("set", cls=Command, help="set the policy: a preset, then FIELD=VALUE changes (fields: "
                + ", ".join(RECALL_POLICY_FIELDS) + ")")
@scoped(subject=False)
@click.option("--preset", type=Choice(PRESET_NAMES), metavar=PRESET_METAVAR,
              help="start from this preset (default: the policy in force)")
@click.argument("changes", nargs=-1, metavar="FIELD=VALUE")
@json_flag
@with_client
async def policy_set(client: MemoryClient, services: Services, *, tenant: str, preset: str | None,
                     changes: tuple[str, ...], json: bool) -> None:
    from agent_memory.cli.formatting import with_changes

    base = preset_policy(preset) or await client.admin.get_recall_policy(tenant)
    _print_recall_policy(await client.admin.set_recall_policy(tenant, with_changes(base, list(changes))), json)


@policy.command("reset", cls=Command, help="back to the shipped default")
@scoped(subject=False)
@with_client
async def policy_reset(client: MemoryClient, services: Services, *, tenant: str) -> None:
    _print_recall_policy(await client.admin.set_recall_policy(tenant, None), False)


def _print_retention(kept: Any, json: bool) -> None:
    from agent_memory.lifecycle.retention import WORKING_MEMORY_HOURS

    if json:
        print_json({**kept.model_dump(mode="json"), "working_memory_hours": WORKING_MEMORY_HOURS})
        return
    print(f"working_memory_hours = {WORKING_MEMORY_HOURS:g} (fixed)")
    print("\n".join(f"{name} = {'none (until forgotten)' if value is None else value}"
                    for name, value in kept.model_dump().items()))


@retention.command("show", cls=Command, help="the policy in force")
@scoped(subject=False)
@json_flag
@with_client
async def retention_show(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    _print_retention(await client.admin.get_retention_policy(tenant), json)


@retention.command("set", cls=Command, help="change it: FIELD=DAYS or FIELD=none (keep until forgotten), "
                   "shelf_life_days=NAMESPACE:DAYS,NAMESPACE:none (merged into the current); fields: "
                   + ", ".join(RETENTION_FIELDS))
@scoped(subject=False)
@click.argument("changes", nargs=-1, required=True, metavar="FIELD=VALUE")
@json_flag
@with_client
async def retention_set(client: MemoryClient, services: Services, *, tenant: str, changes: tuple[str, ...],
                        json: bool) -> None:
    from agent_memory.cli.formatting import with_changes

    changed = with_changes(await client.admin.get_retention_policy(tenant), list(changes))
    _print_retention(await client.admin.set_retention_policy(tenant, changed), json)


@retention.command("reset", cls=Command, help="back to the defaults")
@scoped(subject=False)
@with_client
async def retention_reset(client: MemoryClient, services: Services, *, tenant: str) -> None:
    _print_retention(await client.admin.set_retention_policy(tenant, None), False)


def _print_write_policy(gate: Any, json: bool) -> None:
    if json:
        print_json(gate.model_dump(mode="json"))
    else:
        print("\n".join(f"{name} = {'every namespace' if value is None else ', '.join(value) or '-'}"
                        for name, value in gate.model_dump().items()))


@write_policy.command("show", cls=Command, help="the policy in force")
@scoped(subject=False)
@json_flag
@with_client
async def write_policy_show(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    _print_write_policy(await client.admin.get_write_policy(tenant), json)


@write_policy.command("set", cls=Command, help="change it: FIELD=a,b,c or FIELD=none; fields: "
                      + ", ".join(WRITE_POLICY_FIELDS))
@scoped(subject=False)
@click.argument("changes", nargs=-1, required=True, metavar="FIELD=VALUE")
@json_flag
@with_client
async def write_policy_set(client: MemoryClient, services: Services, *, tenant: str, changes: tuple[str, ...],
                           json: bool) -> None:
    from agent_memory.cli.formatting import with_changes

    changed = with_changes(await client.admin.get_write_policy(tenant), list(changes))
    _print_write_policy(await client.admin.set_write_policy(tenant, changed), json)


@write_policy.command("reset", cls=Command, help="back to the defaults")
@scoped(subject=False)
@with_client
async def write_policy_reset(client: MemoryClient, services: Services, *, tenant: str) -> None:
    _print_write_policy(await client.admin.set_write_policy(tenant, None), False)


def _print_provider_policy(shown: Any, json: bool) -> None:
    if json:
        print_json(shown.model_dump(mode="json"))
    else:
        print(f"redact = {', '.join(shown.redact) or '-'}\n"
              f"exclude_namespaces = {', '.join(shown.exclude_namespaces) or '-'}")


@provider_policy.command("show", cls=Command, help="the policy in force")
@scoped(subject=False)
@json_flag
@with_client
async def provider_policy_show(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    _print_provider_policy(await client.admin.get_provider_policy(tenant), json)


@provider_policy.command("set", cls=Command, help="change it; an option left out keeps its value")
@scoped(subject=False)
@click.option("--redact", metavar="KINDS", help="identifier kinds replaced by placeholders before a remote call: a "
              "comma-separated list of email, phone, card, iban, or none")
@click.option("--exclude-namespace", multiple=True, metavar="NAMESPACE",
              help="never send this namespace's facts to a remote model (repeatable; 'none' clears the list)")
@json_flag
@with_client
async def provider_policy_set(client: MemoryClient, services: Services, *, tenant: str, redact: str | None,
                              exclude_namespace: tuple[str, ...], json: bool) -> None:
    from agent_memory.cli.formatting import changed_provider_policy

    changed = changed_provider_policy(await client.admin.get_provider_policy(tenant), redact,
                                      list(exclude_namespace) if exclude_namespace else None)
    _print_provider_policy(await client.admin.set_provider_policy(tenant, changed), json)


@provider_policy.command("reset", cls=Command, help="back to the default: every kind redacted")
@scoped(subject=False)
@with_client
async def provider_policy_reset(client: MemoryClient, services: Services, *, tenant: str) -> None:
    _print_provider_policy(await client.admin.set_provider_policy(tenant, None), False)


def _print_token_budget(state: Any, json: bool) -> None:
    if json:
        print_json({**state.model_dump(mode="json"), "exhausted": state.exhausted})
        return
    budget = "unlimited" if state.daily_tokens is None else f"{state.daily_tokens}"
    print(f"daily_tokens = {budget} ({'set for the tenant' if state.source == 'tenant' else 'the default'})\n"
          f"used_tokens = {state.used_tokens} on {state.day.isoformat()} (UTC)"
          + ("\nexhausted: consolidations park until the next UTC day or a higher budget" if state.exhausted else ""))


@token_budget.command("show", cls=Command, help="the budget in force and the tokens spent today (UTC)")
@scoped(subject=False)
@json_flag
@with_client
async def token_budget_show(client: MemoryClient, services: Services, *, tenant: str, json: bool) -> None:
    _print_token_budget(await client.admin.get_token_budget(tenant), json)


@token_budget.command("set", cls=Command, help="set the tenant's budget: input and output tokens of its model "
                      "calls per UTC day, or 'unlimited'; parked consolidations check it again at once")
@scoped(subject=False)
@click.option("--daily-tokens", "daily_tokens", required=True, metavar="TOKENS",
              help="a whole number >= 1, or 'unlimited'")
@json_flag
@with_client
async def token_budget_set(client: MemoryClient, services: Services, *, tenant: str, daily_tokens: str,
                           json: bool) -> None:
    _print_token_budget(await client.admin.set_token_budget(tenant, daily_tokens), json)


@token_budget.command("reset", cls=Command, help="back to the default (AGENT_MEMORY_DAILY_TOKEN_BUDGET)")
@scoped(subject=False)
@with_client
async def token_budget_reset(client: MemoryClient, services: Services, *, tenant: str) -> None:
    _print_token_budget(await client.admin.set_token_budget(tenant, None, reset=True), False)


@consent.command("grant", cls=Command, help="record the subject's consent")
@scoped()
@click.option("--namespace", required=True, metavar="NAMESPACE")
@click.option("--consent-id", required=True, type=Identifier("consent id"), metavar="CONSENT_ID",
              help="your record of the consent (a form or ticket id)")
@with_client
async def consent_grant(client: MemoryClient, services: Services, *, tenant: str, subject: str, namespace: str,
                        consent_id: str) -> None:
    await client.admin.grant_consent(tenant, subject, namespace, consent_id)
    print(f"consent {consent_id} to storing {namespace!r} recorded for {subject}")


@consent.command("revoke", cls=Command, help="revoke it: later commits withhold the namespace")
@scoped()
@click.option("--namespace", required=True, metavar="NAMESPACE")
@with_client
async def consent_revoke(client: MemoryClient, services: Services, *, tenant: str, subject: str,
                         namespace: str) -> None:
    revoked = await client.admin.revoke_consent(tenant, subject, namespace)
    print(f"consent to storing {namespace!r} revoked" if revoked
          else f"no active consent to storing {namespace!r} for {subject}")


@consent.command("list", cls=Command, help="the subject's consents")
@scoped()
@json_flag
@with_client
async def consent_list(client: MemoryClient, services: Services, *, tenant: str, subject: str, json: bool) -> None:
    consents = await client.admin.consents(tenant, subject)
    if json:
        print_json([c.model_dump(mode="json") for c in consents])
        return
    for c in consents:
        print(f"{c.namespace:<20} {c.consent_id:<24} granted {c.granted_at}"
              + (f", revoked {c.revoked_at}" if c.revoked_at else ""))
    if not consents:
        print(f"no consents recorded for {subject} (tenant {tenant})")
