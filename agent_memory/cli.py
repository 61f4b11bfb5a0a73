"""`agent-memory`: feed sessions, inspect memory, erase subjects.

The library's commands, against configured services. The `agent-memory` console script
(workers/cli.py) builds on this parser and `main`: it adds the commands that run processes (the
embedded stack, a worker, migrations, demo, chaos, evaluation) and finds a running embedded stack,
so this module never imports the worker, activity or workflow packages."""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from pydantic import BaseModel
from redis.exceptions import RedisError
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import TemporalError

from agent_memory.api_keys import create_key, list_keys, revoke_key
from agent_memory.client import MemoryClient
from agent_memory.errors import AgentMemoryError, InvalidInput, NotFound, ServiceUnavailable
from agent_memory.forgetting import ForgetResult
from agent_memory.ingest import read_sessions
from agent_memory.inventory import SessionSummary, SubjectSummary, list_sessions, list_subjects
from agent_memory.keyring import list_keks
from agent_memory.models import ErasureStatus, FactRow, check_identifier
from agent_memory.operator_keys import create_operator_key, list_operator_keys, revoke_operator_key
from agent_memory.progress import Progress, wait_with_progress
from agent_memory.projection_models import ProjectionLag
from agent_memory.prompt import BuiltPrompt
from agent_memory.provider_policy import ProviderPolicy, parse_kinds
from agent_memory.providers.openai_compat import providers_for
from agent_memory.recall_policy import PRESETS, policy_fields
from agent_memory.retention import WORKING_MEMORY_HOURS, RetentionPolicy
from agent_memory.run_metadata import RunPayloads
from agent_memory.services import Services, check_schema
from agent_memory.settings import Settings, default_home
from agent_memory.user_errors import USER_ERRORS, log_internal_error
from agent_memory.write_policy import WritePolicy

SubParsers = argparse._SubParsersAction  # what add_subparsers returns; extensions add commands to it
# A command that another layer adds (workers/cli.py: up, worker, demo, ...): parsed args, settings → exit code.
CommandHandler = Callable[[argparse.Namespace, Settings], Awaitable[int]]
# Opens the services the library commands use (default: the configured ones, `configured_services`).
ServicesOpener = Callable[[Settings], AbstractAsyncContextManager[Services]]
PolicyT = TypeVar("PolicyT", bound=BaseModel)


def _identifier(field: str):
    def parse(value: str) -> str:
        try:
            return check_identifier(field, value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _positive(option: str):
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} {value!r} is not a whole number, e.g. {option} 5") from None
        if number < 1:
            raise argparse.ArgumentTypeError(f"{option} {value} is below 1: give at least 1, e.g. {option} 5")
        return number

    return parse


def _time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a time: use ISO 8601, e.g. 2024-05-01T10:00:00Z") from None
    # One rule with ingest (models.py): a time without a timezone is UTC.
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line naming the help of the (sub)command they belong to (no usage block;
    control characters of arguments escaped), exit 2."""

    def error(self, message: str):
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


class _LenientParseError(Exception):
    """A usage error met while only looking for unknown arguments (_SubcommandParser)."""


class _SubcommandParser(_Parser):
    """A subcommand's parser: an argument it does not know is its error, so the message names
    `agent-memory <command> -h` rather than the top-level help (argparse otherwise hands unknown
    arguments up to the top-level parser). A mistyped option is reported before the required
    options it leaves missing: `facts --tenat x` says `--tenat`, not only that --tenant is required."""

    _lenient = False

    def error(self, message: str):
        if self._lenient:
            raise _LenientParseError(message)
        super().error(message)

    def print_help(self, file=None):
        if self._lenient:  # -h: shown by the real parse, with the required options as they are
            raise _LenientParseError("help")
        super().print_help(file)

    def parse_known_args(self, args=None, namespace=None):
        unknown = self._unknown_arguments(args)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_known_args(args, namespace)

    def _unknown_arguments(self, args: list[str] | None) -> list[str]:
        """The arguments this parser does not know, found with every option optional; none when
        the arguments have another usage error (the real parse reports that one)."""
        required = [action for action in self._actions if action.required]
        self._lenient = True
        try:
            for action in required:
                action.required = False
            return super().parse_known_args(args, None)[1]
        except _LenientParseError:
            return []
        finally:
            self._lenient = False
            for action in required:
                action.required = True


def package_version() -> str:
    """The installed agent-memory's version (its package metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-memory")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def scoped(p: argparse.ArgumentParser, subject: bool = True) -> argparse.ArgumentParser:
    """Add the --tenant (and --subject) options every tenant-scoped command takes."""
    p.add_argument("--tenant", required=True, type=_identifier("tenant"))
    if subject:
        p.add_argument("--subject", required=True, type=_identifier("subject"))
    return p


def changed_provider_policy(policy: ProviderPolicy, redact: str | None,
                            exclude: list[str] | None) -> ProviderPolicy:
    """The policy with the options given on the command line applied."""
    update: dict[str, Any] = {}
    if redact is not None:
        update["redact"] = parse_kinds(redact)
    if exclude is not None:
        names = [n.strip() for n in exclude if n.strip() and n.strip().lower() != "none"]  # none: clear
        update["exclude_namespaces"] = list(dict.fromkeys(names))
    return ProviderPolicy.model_validate({**policy.model_dump(), **update})


def build_parser(*extensions: Callable[[SubParsers], object],
                 description: str = "`agent-memory`: feed sessions, inspect memory, erase subjects.",
                 ) -> argparse.ArgumentParser:
    """The parser of the library commands; each extension first adds its own subcommands."""
    parser = _Parser(prog="agent-memory", description=description)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    # Subcommands (and theirs, which inherit the class) report their own usage errors.
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_SubcommandParser)
    for extend in extensions:
        extend(sub)

    ingest = scoped(sub.add_parser(
        "ingest", help="append sessions from a JSONL file (one session a line)",
        description="Append sessions from a JSON Lines file: one session per line, "
                    '{"session_id": "s1", "started_at": "2024-05-01T09:00:00Z", "messages": [{"message_id": "s1:1", '
                    '"turn_index": 0, "role": "user", "speaker": "Lin", "content": "I live in Oslo.", '
                    '"created_at": "2024-05-01T09:00:00Z"}, ...]}. role is user or assistant; speaker, '
                    "image_caption and started_at are optional. Times without a timezone are read as UTC. Appending "
                    "is idempotent by message id; a message id stored with other content is refused."))
    ingest.add_argument("file", type=Path)
    end = scoped(sub.add_parser("end-session", help="the session-end hook: start (or attach to) consolidation"))
    end.add_argument("--session", required=True)
    end.add_argument("--wait", action="store_true", help="wait for the workflow and print its result")
    runs = scoped(sub.add_parser("runs", help="list workflow runs (the Temporal UI's visibility query)"),
                  subject=False)
    runs.add_argument("--subject", type=_identifier("subject"))
    runs.add_argument("--json", action="store_true")
    erase = scoped(sub.add_parser("erase", help="erase a subject from every store and print the receipt"))
    erase.add_argument("--reason", required=True)
    erase.add_argument("--request-id", type=_identifier("request id"))
    erase.add_argument("--wait", action="store_true")
    erase.add_argument("--block-future-writes", action="store_true",
                       help="erase (tombstone) a subject with no data too, so no write for this id is ever accepted")
    erase.add_argument("--json", action="store_true")
    rebuild = scoped(sub.add_parser("rebuild", help="rebuild projections from the event log and compare digests"),
                     subject=False)
    rebuild.add_argument("--subject", type=_identifier("subject"), help="one subject (default: every subject)")
    rebuild.add_argument("--force", action="store_true", help="swap the rebuilt tables in even when equal")
    rebuild.add_argument("--request-id", type=_identifier("request id"))
    rebuild.add_argument("--wait", action="store_true")
    rebuild.add_argument("--json", action="store_true")
    rec = scoped(sub.add_parser("recall", help="current facts and the episodes nearest the query"))
    rec.add_argument("query")
    rec.add_argument("--limit", type=_positive("--limit"), default=5, help="episodes at most (default 5)")
    rec.add_argument("--as-of", type=_time)
    rec.add_argument("--json", action="store_true")
    ctx = scoped(sub.add_parser("context", help="the prompt context for a query: cited items within a token budget"))
    ctx.add_argument("query")
    ctx.add_argument("--budget", type=int, help="total memory tokens; every tier scales with it (default: the "
                     "tenant's recall policy, 1200)")
    ctx.add_argument("--as-of", type=_time)
    ctx.add_argument("--preset", choices=list(PRESETS), help="read under this recall policy preset instead of the "
                     "tenant's policy")
    ctx.add_argument("--json", action="store_true")
    prompt = scoped(sub.add_parser("prompt", help="the prompt for a user input in a live session: system, profile, "
                                   "episodic memory, recent turns, input"))
    prompt.add_argument("--session", required=True, help="the live session (a new id: no recent turns yet)")
    prompt.add_argument("input", help="the user's new message")
    prompt.add_argument("--system", help="the system prompt (default: a memory-aware assistant)")
    prompt.add_argument("--budget", type=int, help="total memory tokens; every tier scales with it")
    prompt.add_argument("--as-of", type=_time)
    prompt.add_argument("--preset", choices=list(PRESETS), help="read under this recall policy preset")
    prompt.add_argument("--json", action="store_true")
    policy = sub.add_parser("policy", help="a tenant's recall policy: time decay, importance, window, tier budgets")
    policy_sub = policy.add_subparsers(dest="policy_command", required=True)
    policy_show = scoped(policy_sub.add_parser("show", help="the policy in force"), subject=False)
    policy_show.add_argument("--json", action="store_true")
    policy_set = scoped(policy_sub.add_parser(
        "set", help="set the policy: a preset, then FIELD=VALUE changes (fields: " + ", ".join(policy_fields()) + ")"),
        subject=False)
    policy_set.add_argument("--preset", choices=list(PRESETS), help="start from this preset (default: the policy "
                            "in force)")
    policy_set.add_argument("changes", nargs="*", metavar="FIELD=VALUE",
                            help="e.g. tau_days=30 window_days=none profile_tokens=400")
    policy_set.add_argument("--json", action="store_true")
    scoped(policy_sub.add_parser("reset", help="back to the shipped default"), subject=False)
    retention = sub.add_parser("retention", help="a tenant's retention per memory type (docs/lifecycle.md)")
    retention_sub = retention.add_subparsers(dest="retention_command", required=True)
    retention_show = scoped(retention_sub.add_parser("show", help="the policy in force"), subject=False)
    retention_show.add_argument("--json", action="store_true")
    retention_set = scoped(retention_sub.add_parser(
        "set", help="change it: FIELD=DAYS or FIELD=none (keep until forgotten); fields: "
                    + ", ".join(RetentionPolicy.model_fields)), subject=False)
    retention_set.add_argument("changes", nargs="+", metavar="FIELD=VALUE", help="e.g. note_days=365 candidate_days=30")
    retention_set.add_argument("--json", action="store_true")
    scoped(retention_sub.add_parser("reset", help="back to the defaults"), subject=False)
    facts = scoped(sub.add_parser("facts", help="current facts, facts as of a time, or one key's history"))
    facts.add_argument("--as-of", type=_time)
    facts.add_argument("--history", metavar="KEY", nargs="?", const="",
                       help="every version with its validity interval: of every key, or of KEY alone "
                            "(namespace/key or key, e.g. location/home_city)")
    facts.add_argument("--candidates", action="store_true",
                       help="also the candidate area: inferred or unconfirmed facts, with their evidence")
    facts.add_argument("--confirm", metavar="CANDIDATE_ID",
                       help="confirm this candidate (its memory_id in --candidates --json): it becomes current")
    facts.add_argument("--json", action="store_true")
    write_policy = sub.add_parser("write-policy", help="a tenant's write gate: namespaces stored, namespaces that "
                                                       "need consent, keys that need confirmation")
    write_policy_sub = write_policy.add_subparsers(dest="write_policy_command", required=True)
    write_policy_show = scoped(write_policy_sub.add_parser("show", help="the policy in force"), subject=False)
    write_policy_show.add_argument("--json", action="store_true")
    write_policy_set = scoped(write_policy_sub.add_parser(
        "set", help="change it: FIELD=a,b,c or FIELD=none; fields: " + ", ".join(WritePolicy.model_fields)),
        subject=False)
    write_policy_set.add_argument("changes", nargs="+", metavar="FIELD=VALUE",
                                  help="e.g. consent_namespaces=health stored_namespaces=none")
    write_policy_set.add_argument("--json", action="store_true")
    scoped(write_policy_sub.add_parser("reset", help="back to the defaults"), subject=False)
    provider_policy = sub.add_parser("provider-policy", help="what a remote model may see of a tenant's data: "
                                                             "identifiers redacted, namespaces never sent")
    provider_policy_sub = provider_policy.add_subparsers(dest="provider_policy_command", required=True)
    provider_policy_show = scoped(provider_policy_sub.add_parser("show", help="the policy in force"), subject=False)
    provider_policy_show.add_argument("--json", action="store_true")
    provider_policy_set = scoped(provider_policy_sub.add_parser(
        "set", help="change it; an option left out keeps its value"), subject=False)
    provider_policy_set.add_argument("--redact", metavar="KINDS",
                                     help="identifier kinds replaced by placeholders before a remote call: a "
                                          "comma-separated list of email, phone, card, iban, or none")
    provider_policy_set.add_argument("--exclude-namespace", metavar="NAMESPACE", action="append",
                                     help="never send this namespace's facts to a remote model (repeatable; "
                                          "'none' clears the list)")
    provider_policy_set.add_argument("--json", action="store_true")
    scoped(provider_policy_sub.add_parser("reset", help="back to the default: every kind redacted"), subject=False)
    consent = sub.add_parser("consent", help="a subject's consents to storing a namespace (write-policy "
                                             "consent_namespaces)")
    consent_sub = consent.add_subparsers(dest="consent_command", required=True)
    consent_grant = scoped(consent_sub.add_parser("grant", help="record the subject's consent"))
    consent_grant.add_argument("--namespace", required=True)
    consent_grant.add_argument("--consent-id", required=True, type=_identifier("consent id"),
                               help="your record of the consent (a form or ticket id)")
    consent_revoke = scoped(consent_sub.add_parser("revoke", help="revoke it: later commits withhold the namespace"))
    consent_revoke.add_argument("--namespace", required=True)
    consent_list = scoped(consent_sub.add_parser("list", help="the subject's consents"))
    consent_list.add_argument("--json", action="store_true")
    subjects = scoped(sub.add_parser("subjects", help="the tenant's subjects: sessions, messages, current facts, "
                                                       "episodes, last consolidation (erased ones marked)"),
                      subject=False)
    subjects.add_argument("--limit", type=_positive("--limit"), default=1000)
    subjects.add_argument("--json", action="store_true")
    sessions = scoped(sub.add_parser("sessions", help="a subject's sessions: messages, last consolidation, "
                                                       "messages not yet consolidated"))
    sessions.add_argument("--limit", type=_positive("--limit"), default=1000)
    sessions.add_argument("--json", action="store_true")
    stats = scoped(sub.add_parser("stats", help="operator counters of a tenant (leak-filter drops, projection lag)"),
                   subject=False)
    stats.add_argument("--json", action="store_true")
    projection = sub.add_parser("projection", help="the vector projection's outbox: retry dead letters")
    projection_sub = projection.add_subparsers(dest="projection_command", required=True)
    retry = scoped(projection_sub.add_parser(
        "retry-dead-letters", help="give dead-lettered outbox rows a fresh set of attempts and wake their "
                                   "projectors (after fixing what made them fail)"), subject=False)
    retry.add_argument("--subject", type=_identifier("subject"), help="one subject (default: every subject)")
    retry.add_argument("--json", action="store_true")
    keys = sub.add_parser("keys", help="API keys of the HTTP API (create, list, revoke), and key-encryption keys "
                                       "(rotate: re-wrap every subject key, destroy the old KEK; status)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    rotate = keys_sub.add_parser("rotate", help="rotate now (the daily Schedule rotates only after erasures)")
    rotate.add_argument("--if-needed", action="store_true",
                        help="only when a subject key was shredded since the last rotation (the Schedule's mode)")
    rotate.add_argument("--json", action="store_true")
    rotate_payload = keys_sub.add_parser(
        "rotate-payload", help="a new Temporal payload key (restart every process to encode under it); retired keys "
                               "decode older histories until destroyed")
    rotate_payload.add_argument(
        "--destroy-retired-after-days", type=float, metavar="DAYS",
        help="also destroy each retired payload key replaced more than DAYS ago; DAYS must cover the namespace's "
             "retention plus the longest run, or older histories become unreadable")
    rotate_payload.add_argument("--json", action="store_true")
    keys_status = keys_sub.add_parser("status", help="every KEK: state, shredded keys it still covers")
    keys_status.add_argument("--json", action="store_true")
    key_create = scoped(keys_sub.add_parser("create", help="an API key of the tenant (printed once; only its hash "
                                                           "is stored)"), subject=False)
    key_create.add_argument("--scope", choices=("read", "write", "erase"), default="write",
                            help="read: reads; write: also appends and ends sessions; erase: also forgets and erases")
    key_create.add_argument("--name", help="a label, e.g. support-bot")
    key_create.add_argument("--json", action="store_true")
    key_list = scoped(keys_sub.add_parser("list", help="the tenant's API keys (no secrets)"), subject=False)
    key_list.add_argument("--json", action="store_true")
    key_revoke = scoped(keys_sub.add_parser("revoke", help="revoke an API key at once"), subject=False)
    key_revoke.add_argument("--key-id", required=True)
    operator_create = keys_sub.add_parser(
        "create-operator", help="an operator key, for the Temporal UI's codec endpoint and the console across tenants "
                                "(printed once; only its hash is stored)")
    operator_create.add_argument("--name", help="a label, e.g. on-call")
    operator_create.add_argument("--json", action="store_true")
    operator_list = keys_sub.add_parser("list-operator", help="the operator keys (no secrets)")
    operator_list.add_argument("--json", action="store_true")
    operator_revoke = keys_sub.add_parser("revoke-operator", help="revoke an operator key at once")
    operator_revoke.add_argument("--key-id", required=True)
    erasure = sub.add_parser("erasure", help="an erasure request as it stands now")
    erasure_sub = erasure.add_subparsers(dest="erasure_command", required=True)
    erasure_status = scoped(erasure_sub.add_parser(
        "status", help="receipt, whether the shred is irreversible yet (key rotation), whether compacted"),
        subject=False)
    erasure_status.add_argument("--request-id", required=True, type=_identifier("request id"))
    erasure_status.add_argument("--subject", type=_identifier("subject"),
                                help="the erased subject, to show its id in the receipt (kept only as a digest)")
    erasure_status.add_argument("--json", action="store_true")
    erasure_reapply = erasure_sub.add_parser(
        "reapply", help="after restoring the database from a backup: run again the erasures the erasure ledger "
                        "records and the database does not know (waits for their receipts)")
    erasure_reapply.add_argument("--json", action="store_true")
    forget = scoped(sub.add_parser("forget", help="forget one memory now (every read stops returning it); "
                                                  "restorable within the grace period, swept after it"))
    restore = scoped(sub.add_parser("restore", help="bring a forgotten memory back within the grace period"))
    for lifecycle_parser in (forget, restore):
        lifecycle_parser.add_argument("--memory-id", required=True,
                                      help="the memory's id, as `facts --json`, `context` or `prompt --json` print it")
        lifecycle_parser.add_argument("--reason", help="why (a ticket number): kept encrypted in the event log")
        lifecycle_parser.add_argument("--actor-id", help="who asked (an operator's id), recorded with the event")
        lifecycle_parser.add_argument("--json", action="store_true")
    export = scoped(sub.add_parser("export", help="everything memory holds about a subject, as one JSON document "
                                                  "(the right of access)"))
    export.add_argument("--out", type=Path, metavar="FILE", help="write it here (private to you: mode 0600) "
                        "instead of standard output; a new file only, never through a symbolic link")
    export.add_argument("--force", action="store_true", help="with --out: replace an existing regular file "
                        "(a symbolic link is still refused)")
    forgotten = scoped(sub.add_parser("forgotten", help="a subject's forgotten memories (in grace) and swept "
                                                        "tombstones"))
    forgotten.add_argument("--json", action="store_true")
    sweep = sub.add_parser("sweep", help="sweep memories forgotten longer than the grace period now "
                                         "(the hourly Schedule)")
    sweep.add_argument("--grace-seconds", type=float, default=None,
                       help="override the worker's grace period (AGENT_MEMORY_FORGET_GRACE_SECONDS) for this run")
    sweep.add_argument("--no-retention", action="store_true", help="skip the retention step of the sweep")
    sweep.add_argument("--json", action="store_true")
    reembed = scoped(sub.add_parser("reembed", help="re-embed a tenant's memories under the configured embedding "
                                                    "model (workers start it when their model changed)"),
                     subject=False)
    reembed.add_argument("--wait", action="store_true", help="wait for the switch and print the result")
    reembed.add_argument("--json", action="store_true")
    redrive = sub.add_parser("redrive-erasures", help="start again the erasures stuck in 'started' whose workflow "
                                                      "is gone (the hourly Schedule)")
    redrive.add_argument("--stuck-after-seconds", type=float, default=3600.0)
    redrive.add_argument("--json", action="store_true")
    compact = sub.add_parser("compact", help="physical compaction of what erasures deleted (the hourly Schedule)")
    compact.add_argument("--all", action="store_true", help="every erasure table, even with no pending ticket")
    compact.add_argument("--json", action="store_true")
    sub.add_parser("register-search-attributes",
                   help="register the workflows' search attributes in the configured Temporal namespace "
                        "(idempotent; needs only TEMPORAL_ADDRESS and its TLS/API key settings)")
    return parser


def check_private_target(path: Path, *, force: bool = False) -> None:
    """Refuse, before any work, a target `write_private` would refuse: a symbolic link always,
    an existing file unless `force`."""
    if path.is_symlink():
        raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never written)")
    if path.exists() and not force:
        raise InvalidInput(f"--out {path} exists: name a new file, or add --force to replace it")


def write_private(path: Path, text: str, *, force: bool = False) -> None:
    """Write a file only its owner can read (an export holds a person's data). The file is
    created here (O_EXCL), never reached through a symbolic link (O_NOFOLLOW), so a link or a
    file planted at `path` is not written through; `force` replaces an existing regular file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        if path.is_symlink():
            raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never "
                               "written)") from None
        raise InvalidInput(f"--out {path} exists: name a new file, or add --force to replace it") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a link
            raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never "
                               "written)") from None
        raise
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
            raise InvalidInput(f"--out {path} is not a regular file: name a new file")
        os.fchmod(out.fileno(), 0o600)  # a replaced file keeps its old mode otherwise
        out.write(text)


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def format_projection_lag(lag: ProjectionLag) -> str:
    age = lag.oldest_pending_age_seconds
    return (f"projection: {lag.pending} pending ({lag.due} due now, {lag.retrying} retrying)"
            + (f", oldest {age:.0f} s old" if age is not None else "")
            + f", {lag.dead_letters} dead letter(s)")


def format_fact(f: FactRow) -> str:
    until = f.valid_to.isoformat() if f.valid_to else "now"
    status = "" if f.status == "active" else f"  ({f.status})"
    return (f"{f.namespace}/{f.key} = {f.value!r}  [{f.valid_from.isoformat()} → {until}]  v{f.version} "
            f"confidence {f.confidence:.2f}  evidence {','.join(f.evidence_message_ids)}{status}")


def format_run_payloads(run: RunPayloads) -> str:
    """A run's decoded input and result, indented under its line (one compact JSON each)."""
    lines = [f"    summary {run.summary}"] if run.summary else []
    if run.unreadable:
        return "\n".join([*lines, f"    payloads not decodable here: {run.unreadable}"])
    lines.append(f"    input   {json.dumps(run.input, separators=(',', ':'), default=str)}")
    if run.result is not None:
        lines.append(f"    result  {json.dumps(run.result, separators=(',', ':'), default=str)}")
    return "\n".join(lines)


def format_erasure_status(status: ErasureStatus) -> str:
    lines = [f"request {status.request_id}: {status.status} (requested {status.requested_at:%Y-%m-%d %H:%M:%S})",
             f"  reason: {status.reason}"]
    if status.receipt is not None:
        r = status.receipt
        lines.append(f"  residue {r.residue_total}; removed " + ", ".join(f"{k} {v}" for k, v in r.removed.items()))
        lines.append(f"  subject key shredded: {r.key_shredded} (wrapped by KEK {status.key_wrapped_by})")
    lines.append("  shred irreversible: " + (
        f"yes, since {status.shred_irreversible_at:%Y-%m-%d %H:%M:%S} (rotation to {status.shred_irreversible_by_rotation})"
        if status.shred_irreversible and status.shred_irreversible_at else
        "not yet: a copy of the wrapped key in WAL or a backup decrypts until the next key rotation"))
    lines.append("  compacted: " + (f"yes, {status.compacted_at:%Y-%m-%d %H:%M:%S} ({status.compaction_id})"
                                    if status.compacted and status.compacted_at else
                                    "not yet (the hourly compaction Schedule, or agent-memory compact)"))
    return "\n".join(lines)


def format_context(assembled) -> str:
    lines = [f"[{item.tier}] {item.text}   ⟨{item.kind}" + (f"; score {item.score:.3f}" if item.tier == "episodic" else "")
             + f"; cites {', '.join(item.cited_message_ids)}⟩" for item in assembled.items]
    lines.append(f"({len(assembled.items)} items; profile ~{assembled.profile_tokens} of {assembled.profile_budget} "
                 f"tokens, episodic ~{assembled.episodic_tokens} of {assembled.episodic_budget}, total budget "
                 f"{assembled.budget})")
    return "\n".join(lines)


def format_prompt(built: BuiltPrompt) -> str:
    lines = []
    for block in built.blocks:
        budget = f" of {block.budget}" if block.budget is not None else ""
        lines.append(f"── {block.name} ({block.tokens}{budget} tokens" + (
            f", {len(block.item_ids)} items" if block.name in ("profile", "episodic", "recent") else "") + ")")
        lines += [f"{m.role}: {m.content}" for m in block.messages]
    lines.append(f"({built.tokens} tokens; recent turns from {built.recent_source}, {built.summarized_turns} "
                 "summarised)")
    return "\n".join(lines)


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment is not None else "never"


def format_subject(row: SubjectSummary) -> str:
    return (f"{row.subject_id:<24} {row.sessions} sessions, {row.messages} messages, {row.current_facts} current facts, "
            f"{row.episodes} episodes; last message {_when(row.last_message_at)}, last consolidated "
            f"{_when(row.last_consolidated_at)}")


def format_session(row: SessionSummary) -> str:
    episode = f", episode importance {row.episode_importance}" if row.episode_importance is not None else ""
    pending = f", {row.unconsolidated} not consolidated yet" if row.unconsolidated else ""
    return (f"{row.session_id:<24} {row.messages} messages {_when(row.first_message_at)} → "
            f"{_when(row.last_message_at)}; consolidated {_when(row.last_consolidated_at)}{pending}{episode}")


def with_changes(base: PolicyT, changes: list[str]) -> PolicyT:
    """`base` (a recall or retention policy) with FIELD=VALUE changes applied ("none" clears an
    optional field); a bad field or value raises InvalidInput naming it."""
    model = type(base)
    fields = dict(base.model_dump())
    for change in changes:
        name, sep, value = change.partition("=")
        if not sep or name not in model.model_fields:
            raise InvalidInput(f"{change!r} is not FIELD=VALUE with a policy field; fields: "
                               f"{', '.join(model.model_fields)}")
        if value.strip().lower() in ("none", "null", ""):
            fields[name] = None
        elif "list" in str(model.model_fields[name].annotation):  # a list field: comma-separated
            fields[name] = [v.strip() for v in value.split(",") if v.strip()]
        else:
            fields[name] = value
    return model.model_validate(fields)


def _budget(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise InvalidInput("--budget must be a positive number of tokens")
    return value


@asynccontextmanager
async def configured_services(settings: Settings) -> AsyncIterator[Services]:
    """The services the settings name (TEMPORAL_ADDRESS, DATABASE_URL, REDIS_URL), schema checked
    (never migrated). The console script opens a running embedded stack instead when they are unset."""
    if not (settings.temporal_address and settings.database_url and settings.redis_url):
        raise ServiceUnavailable("no services configured: set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL, or start "
                                 "the embedded stack with `agent-memory up`")
    await check_schema(settings)
    services = await Services.open(settings)
    try:
        yield services
    finally:
        await services.close()


async def _command(args: argparse.Namespace, settings: Settings, commands: Mapping[str, CommandHandler],
                   open_services: ServicesOpener) -> int:
    handler = commands.get(args.command)
    if handler is not None:
        return await handler(args, settings)
    if args.command == "register-search-attributes":  # Temporal only: no database, no keys
        from agent_memory.search_attributes import register_search_attributes_command

        return await register_search_attributes_command(settings)
    async with open_services(settings) as services:
        providers = providers_for(services.settings)
        client = MemoryClient(services, providers.embedder, summarizer=providers.summarizer)
        if args.command == "ingest":
            sessions = read_sessions(args.file, future_tolerance=client.future_tolerance)
            with Progress("ingest sessions", len(sessions)) as bar:
                for session in sessions:
                    result = await client.append_messages(args.tenant, args.subject, session)
                    print(f"{session.session_id}: {result.inserted} new, {result.duplicates} already stored",
                          flush=True)
                    if result.idle_timer == "pending":
                        print(f"agent-memory ingest: warning: {session.session_id}: Temporal is unreachable; the "
                              "messages are stored and the idle-timer sweep starts the session's timer",
                              file=sys.stderr)
                    bar.advance(note=session.session_id)
        elif args.command == "end-session":
            handle = await client.end_session(args.tenant, args.subject, args.session)
            print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
            if args.wait:
                _print_json((await client.consolidation_result(handle)).model_dump(mode="json"))
        elif args.command == "runs":
            runs = await client.runs(args.tenant, args.subject)
            if args.json:
                _print_json([r.model_dump(mode="json") for r in runs])
            for run in [] if args.json else runs:
                print(f"{run.status:<12} {run.workflow_type:<24} {run.workflow_id}  started {run.started_at}")
                print(format_run_payloads(run))
        elif args.command == "rebuild":
            handle = await client.rebuild(args.tenant, args.subject, force=args.force, request_id=args.request_id)
            if not args.json:
                print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
            if args.wait or args.json:
                rebuilt = await wait_with_progress(
                    handle, lambda: client.rebuild_result(handle), Progress("rebuild subjects", None, enabled=not args.json),
                    lambda p: (p.get("subjects_done", 0), p.get("subjects_total") or None, p.get("step", "")))
                if args.json:
                    _print_json(rebuilt.model_dump(mode="json"))
                else:
                    for e in rebuilt.subjects:
                        state = "erased (skipped)" if e.skipped_erased else ("equal" if e.equal else (
                            f"differed in {','.join(e.tables_differing)}" + (" → repaired" if e.repaired else "")))
                        print(f"  {e.subject:<24} {state:<40} rows {e.rows:<6} events {e.events:<6} "
                              f"digest {e.rebuilt_digest[:16]}  {e.elapsed_ms} ms")
                    print(f"{rebuilt.subjects_total} subjects: {rebuilt.subjects_equal} equal, "
                          f"{rebuilt.subjects_repaired} repaired, {rebuilt.skipped_erased} erased; {rebuilt.rows} rows"
                          + (f" ({rebuilt.subjects_not_listed} more subjects counted, not listed)"
                             if rebuilt.subjects_not_listed else ""))
        elif args.command == "erase":
            handle = await client.erase(args.tenant, args.subject, args.reason, args.request_id,
                                        block_future_writes=args.block_future_writes)
            if not args.json:
                print(f"workflow {handle.id}\n{services.settings.workflow_url(handle.id)}")
            if args.wait or args.json:
                receipt = await wait_with_progress(
                    handle, lambda: client.erasure_receipt(handle), Progress("erase stores", None, enabled=not args.json),
                    lambda p: (len(p.get("stores_done", [])), None, p.get("step", "")))
                _print_json(receipt.model_dump(mode="json"))
        elif args.command == "erasure" and args.erasure_command == "reapply":
            reapplied, receipts = await client.reapply_erasures(wait=True)
            if args.json:
                _print_json({**reapplied.model_dump(mode="json"),
                             "receipts": [r.model_dump(mode="json") for r in receipts]})
            else:
                print(f"erasure ledger: {reapplied.ledger_entries} erasure(s), {reapplied.already_applied} present "
                      f"in the database, {len(reapplied.reapplied)} re-applied")
                for again in reapplied.reapplied:
                    print(f"  {again.tenant_id} {again.request_id}: {again.action}")
                for finished in receipts:
                    print(f"  {finished.tenant_id} {finished.request_id}: residue {finished.residue_total}")
        elif args.command == "erasure":
            status = await client.erasure_status(args.tenant, args.request_id, args.subject)
            if args.json:
                _print_json(status.model_dump(mode="json"))
            else:
                print(format_erasure_status(status))
        elif args.command == "keys" and args.keys_command == "rotate":
            rotation = await client.rotate_keys(force=not args.if_needed)
            if args.json:
                _print_json(rotation.model_dump(mode="json"))
            elif not rotation.rotated:
                print(f"nothing to rotate: no subject key was shredded under {rotation.new_kek_id} since it became "
                      "active (omit --if-needed to rotate anyway)")
            else:
                print(f"active key-encryption key {rotation.new_kek_id}: re-wrapped {rotation.rewrapped_subject_keys} "
                      f"subject keys and {rotation.reencrypted_reasons} erasure reasons; destroyed "
                      f"{', '.join(rotation.destroyed_kek_ids) or 'none'} ({rotation.shreds_made_irreversible} "
                      f"shreds now irreversible) in {rotation.elapsed_seconds:.2f} s")
        elif args.command == "keys" and args.keys_command == "rotate-payload":
            provider = services.keyring.provider
            active = provider.rotate_payload_key()
            destroyed: list[str] = []
            if args.destroy_retired_after_days is not None:
                cutoff = datetime.now(UTC) - timedelta(days=args.destroy_retired_after_days)
                destroyed = provider.destroy_retired_payload_keys(cutoff)
            retired_kept = len(provider.payload_keys()) - 1
            if args.json:
                _print_json({"active_payload_key": active, "destroyed": destroyed, "retired_kept": retired_kept})
            else:
                print(f"active payload key {active}: restart the worker, the API and every client to encode under it; "
                      f"{retired_kept} retired key(s) kept to read older histories; destroyed {', '.join(destroyed) or 'none'}")
        elif args.command == "keys" and args.keys_command == "create":
            created = await create_key(services.pool, args.tenant, args.scope, args.name)
            if args.json:
                _print_json(created.model_dump(mode="json"))
            else:
                print(f"API key {created.key.key_id} ({created.key.scope}) of tenant {args.tenant}; shown once:\n"
                      f"{created.token}")
        elif args.command == "keys" and args.keys_command == "list":
            api_keys = await list_keys(services.pool, args.tenant)
            if args.json:
                _print_json([ak.model_dump(mode="json") for ak in api_keys])
            for ak in [] if args.json else api_keys:
                print(f"{ak.key_id}  {ak.scope:<6} {ak.name or '-':<20} created {ak.created_at:%Y-%m-%d %H:%M}"
                      + (f"  revoked {ak.revoked_at:%Y-%m-%d %H:%M}" if ak.revoked_at else ""))
        elif args.command == "keys" and args.keys_command == "revoke":
            if not await revoke_key(services.pool, args.tenant, args.key_id):
                raise NotFound(f"no active API key {args.key_id!r} in tenant {args.tenant!r}: "
                               "`agent-memory keys list` shows them")
            print(f"API key {args.key_id} revoked")
        elif args.command == "keys" and args.keys_command == "create-operator":
            created_operator = await create_operator_key(services.pool, args.name)
            if args.json:
                _print_json(created_operator.model_dump(mode="json"))
            else:
                print(f"operator key {created_operator.key.key_id}; shown once:\n{created_operator.token}")
        elif args.command == "keys" and args.keys_command == "list-operator":
            operator_keys = await list_operator_keys(services.pool)
            if args.json:
                _print_json([ok.model_dump(mode="json") for ok in operator_keys])
            for ok in [] if args.json else operator_keys:
                print(f"{ok.key_id}  {ok.name or '-':<20} created {ok.created_at:%Y-%m-%d %H:%M}"
                      + (f"  revoked {ok.revoked_at:%Y-%m-%d %H:%M}" if ok.revoked_at else ""))
        elif args.command == "keys" and args.keys_command == "revoke-operator":
            if not await revoke_operator_key(services.pool, args.key_id):
                raise NotFound(f"no active operator key {args.key_id!r}: `agent-memory keys list-operator` shows them")
            print(f"operator key {args.key_id} revoked")
        elif args.command == "keys":
            keks = await list_keks(services.pool)
            if args.json:
                _print_json([k.model_dump(mode="json") for k in keks])
            for k in [] if args.json else keks:
                print(f"{k.kek_id:<32} {k.state:<10} created {k.created_at:%Y-%m-%d %H:%M}  shredded keys "
                      f"{k.shredded_keys}" + (f"  destroyed {k.destroyed_at:%Y-%m-%d %H:%M} by {k.destroyed_by}"
                                              if k.destroyed_at else ""))
        elif args.command in ("forget", "restore"):
            call = client.forget if args.command == "forget" else client.restore
            done = await call(args.tenant, args.subject, args.memory_id, reason=args.reason, actor_id=args.actor_id)
            if args.json:
                _print_json(done.model_dump(mode="json"))
            elif isinstance(done, ForgetResult):
                print(f"memory {done.memory_id} ({done.memory_kind}) "
                      + ("was already forgotten" if done.already_forgotten else "forgotten")
                      + f" at {done.forgotten_at:%Y-%m-%d %H:%M:%S %Z}; restorable until "
                      f"{done.restorable_until:%Y-%m-%d %H:%M:%S %Z}, swept after that")
            else:
                print(f"memory {done.memory_id} ({done.memory_kind}) restored: {done.events_reapplied} event(s) "
                      f"applied again, now v{done.version}")
        elif args.command == "export":
            if args.out is not None:
                check_private_target(args.out, force=args.force)
            document = (await client.export(args.tenant, args.subject)).model_dump_json(indent=2)
            if args.out is None:
                print(document)
            else:
                write_private(args.out, document + "\n", force=args.force)
                print(f"wrote {args.out} ({len(document):,} characters, mode 0600)")
        elif args.command == "forgotten":
            items = await client.forgotten(args.tenant, args.subject)
            if args.json:
                _print_json([i.model_dump(mode="json") for i in items])
            elif not items:
                print(f"no forgotten memories of subject {args.subject} (tenant {args.tenant})")
            for item in [] if args.json else items:
                state = (f"swept {item.swept_at:%Y-%m-%d %H:%M:%S}, residue {item.residue}" if item.state == "swept"
                         else f"restorable until {item.forgotten_at + client.forget_grace:%Y-%m-%d %H:%M:%S %Z}")
                print(f"{item.memory_id}  {item.memory_kind:<11} forgotten {item.forgotten_at:%Y-%m-%d %H:%M:%S} "
                      f"by {item.actor}{'/' + item.actor_id if item.actor_id else ''}; {state}")
        elif args.command == "sweep":
            swept = await client.sweep(grace_seconds=args.grace_seconds, retention=not args.no_retention)
            if args.json:
                _print_json(swept.model_dump(mode="json"))
            else:
                print(f"swept {swept.swept} memories in {swept.tenants} tenant(s) (grace {swept.grace_seconds:g} s): "
                      f"{swept.rows_deleted} rows, {swept.operations_deleted} recorded results, "
                      f"{swept.events_deleted} events deleted; residue found in {swept.residue_found}")
                print("retention forgot " + (", ".join(f"{n} {rule}" for rule, n in swept.retention_forgotten.items())
                                             or "nothing") + " (swept after the grace period)")
        elif args.command == "reembed":
            handle = await client.reembed(args.tenant)
            progress = await handle.result() if args.wait else await client.reembed_progress(handle)
            if args.json:
                _print_json({"workflow_id": handle.id, "progress": progress.model_dump(mode="json") if progress else None})
            else:
                print(f"re-embedding {handle.id}: {services.settings.workflow_url(handle.id)}")
                if progress is not None:
                    print(f"  {progress.state}: {progress.done} of {progress.total} vectors of "
                          f"{progress.source_model or '-'} re-embedded under {progress.target_model}")
        elif args.command == "redrive-erasures":
            redriven = await client.redrive_erasures(stuck_after_seconds=args.stuck_after_seconds)
            if args.json:
                _print_json(redriven.model_dump(mode="json"))
            else:
                print(f"{redriven.stuck} stuck erasure(s): {redriven.redriven} re-driven, {redriven.still_running} "
                      f"still running, {redriven.failed} failed (logged)")
        elif args.command == "retention":
            if args.retention_command == "show":
                kept = await client.retention_policy(args.tenant)
            elif args.retention_command == "set":
                kept = await client.set_retention_policy(
                    args.tenant, with_changes(await client.retention_policy(args.tenant), args.changes))
            else:
                kept = await client.set_retention_policy(args.tenant, None)
            if getattr(args, "json", False):
                _print_json({**kept.model_dump(mode="json"), "working_memory_hours": WORKING_MEMORY_HOURS})
            else:
                print(f"working_memory_hours = {WORKING_MEMORY_HOURS:g} (fixed)")
                print("\n".join(f"{name} = {'none (until forgotten)' if value is None else value}"
                                for name, value in kept.model_dump().items()))
        elif args.command == "compact":
            compaction = await client.compact(force=args.all)
            if args.json:
                _print_json(compaction.model_dump(mode="json"))
            else:
                for t in compaction.tables:
                    print(f"  {t.table:<20} {t.seconds:>8.2f} s  {t.size_before_bytes:>12,} → {t.size_after_bytes:,} bytes")
                print(f"{compaction.compaction_id}: {compaction.tickets} erasure tickets, {len(compaction.tables)} tables, "
                      f"redis {compaction.redis or 'untouched'}, {compaction.elapsed_seconds:.2f} s")
        elif args.command == "recall":
            recalled = await client.recall(args.tenant, args.subject, args.query, limit=args.limit, as_of=args.as_of)
            if args.json:
                _print_json(recalled.model_dump(mode="json"))
            else:
                print("facts:")
                for f in recalled.facts:
                    print("  " + format_fact(f))
                print("episodes:")
                for ep in recalled.episodes:
                    print(f"  [{ep.score:.3f}] {ep.happened_at.date()} importance {ep.importance}: {ep.summary}")
        elif args.command == "context":
            assembled = await client.context(args.tenant, args.subject, args.query, as_of=args.as_of,
                                             token_budget=_budget(args.budget),
                                             policy=PRESETS[args.preset] if args.preset else None)
            if args.json:
                _print_json(assembled.model_dump(mode="json"))
            else:
                print(format_context(assembled))
        elif args.command == "prompt":
            built = await client.build_prompt(
                args.tenant, args.subject, args.session, args.input, as_of=args.as_of, token_budget=_budget(args.budget),
                policy=PRESETS[args.preset] if args.preset else None,
                **({"system": args.system} if args.system else {}))
            if args.json:
                _print_json({**built.model_dump(mode="json"), "messages": built.chat_messages()})
            else:
                print(format_prompt(built))
        elif args.command == "policy":
            if args.policy_command == "show":
                current = await client.recall_policy(args.tenant)
            elif args.policy_command == "set":
                base = PRESETS[args.preset] if args.preset else await client.recall_policy(args.tenant)
                current = await client.set_recall_policy(args.tenant, with_changes(base, args.changes))
            else:
                current = await client.set_recall_policy(args.tenant, None)
            if getattr(args, "json", False):
                _print_json(current.model_dump(mode="json"))
            else:
                print("\n".join(f"{name} = {value}" for name, value in current.model_dump().items()))
        elif args.command == "stats":
            drops = await client.leak_filter_drops(args.tenant)
            lag = await client.projection_lag(args.tenant)
            reads = await client.read_counts(args.tenant)
            lifecycle = await client.lifecycle_counts(args.tenant)
            erasures = await client.erasure_counts(args.tenant)
            withheld = await client.withheld_counts(args.tenant)
            if args.json:
                _print_json({"tenant_id": args.tenant, "leak_filter_drops": drops, "reads": reads,
                             "lifecycle": lifecycle.model_dump(mode="json"),
                             "erasures": erasures.model_dump(mode="json"), "write_gate_withheld": withheld,
                             "projection": lag.model_dump(mode="json", exclude={"tenant_id", "subject_id"})})
            else:
                print(f"context reads: {reads['context_reads']} ({reads['context_items']} items served); "
                      f"recall reads: {reads['recall_reads']} ({reads['recall_items']} items)")
                print(f"leak filter drops: {drops['total']}" + "".join(
                    f"\n  {reason}: {n}" for reason, n in drops.items() if reason != "total" and n))
                print(format_projection_lag(lag))
                print(f"forgotten: {lifecycle.forgotten_in_grace} in grace, {lifecycle.swept} swept "
                      f"({lifecycle.swept_with_residue} with residue)")
                print("write gate withheld: " + (", ".join(f"{n} {reason}" for reason, n in withheld.items())
                                                 or "nothing"))
                print(f"erasures: {erasures.started} started ({erasures.stuck} over an hour), {erasures.redriven} "
                      f"re-driven ({erasures.redrives} re-drives)")
                print(f"refused starts: {erasures.refused_requests} unregistered destructive requests, "
                      f"{erasures.refused_payloads} Temporal payloads not written for their run")
        elif args.command == "subjects":
            listing = await list_subjects(services.pool, args.tenant, args.limit)
            if args.json:
                _print_json(listing.model_dump(mode="json"))
            else:
                for row in listing.subjects:
                    print(format_subject(row))
                if not listing.subjects:
                    print(f"no subjects in tenant {args.tenant}")
                if listing.erased_subjects:
                    print(f"{listing.erased_subjects} erased subject(s): their ids are not kept "
                          "(`agent-memory sessions --subject S` says whether S was erased)")
        elif args.command == "sessions":
            held = await list_sessions(services.pool, args.tenant, args.subject, args.limit)
            if args.json:
                _print_json([row.model_dump(mode="json") for row in held])
            elif not held:
                erased = await client.subject_erased(args.tenant, args.subject)
                print(f"subject {args.subject} of tenant {args.tenant} was erased: nothing is kept" if erased
                      else f"no sessions for subject {args.subject} (tenant {args.tenant})")
            for session_row in [] if args.json else held:
                print(format_session(session_row))
        elif args.command == "projection":
            woken = await client.retry_dead_letters(args.tenant, args.subject)
            if args.json:
                _print_json({"tenant_id": args.tenant, "subjects_woken": woken})
            else:
                print(f"dead letters requeued for {len(woken)} subject(s)" + "".join(f"\n  {s}" for s in woken))
        elif args.command == "facts" and args.confirm:
            confirmed = await client.confirm_fact(args.tenant, args.subject, args.confirm)
            if args.json:
                _print_json(confirmed.model_dump(mode="json"))
            else:
                print(f"confirmed candidate {args.confirm}: it is the current value now ({confirmed.operation_id})")
        elif args.command == "write-policy":
            if args.write_policy_command == "show":
                gate = await client.write_policy(args.tenant)
            elif args.write_policy_command == "set":
                gate = await client.set_write_policy(args.tenant, with_changes(await client.write_policy(args.tenant),
                                                                               args.changes))
            else:
                gate = await client.set_write_policy(args.tenant, None)
            if getattr(args, "json", False):
                _print_json(gate.model_dump(mode="json"))
            else:
                print("\n".join(f"{name} = {'every namespace' if value is None else ', '.join(value) or '-'}"
                                for name, value in gate.model_dump().items()))
        elif args.command == "provider-policy":
            if args.provider_policy_command == "show":
                shown = await client.provider_policy(args.tenant)
            elif args.provider_policy_command == "set":
                shown = await client.set_provider_policy(args.tenant, changed_provider_policy(
                    await client.provider_policy(args.tenant), args.redact, args.exclude_namespace))
            else:
                shown = await client.set_provider_policy(args.tenant, None)
            if getattr(args, "json", False):
                _print_json(shown.model_dump(mode="json"))
            else:
                print(f"redact = {', '.join(shown.redact) or '-'}\n"
                      f"exclude_namespaces = {', '.join(shown.exclude_namespaces) or '-'}")
        elif args.command == "consent":
            if args.consent_command == "grant":
                await client.grant_consent(args.tenant, args.subject, args.namespace, args.consent_id)
                print(f"consent {args.consent_id} to storing {args.namespace!r} recorded for {args.subject}")
            elif args.consent_command == "revoke":
                revoked = await client.revoke_consent(args.tenant, args.subject, args.namespace)
                print(f"consent to storing {args.namespace!r} revoked" if revoked
                      else f"no active consent to storing {args.namespace!r} for {args.subject}")
            else:
                consents = await client.consents(args.tenant, args.subject)
                if args.json:
                    _print_json([c.model_dump(mode="json") for c in consents])
                else:
                    for c in consents:
                        print(f"{c.namespace:<20} {c.consent_id:<24} granted {c.granted_at}"
                              + (f", revoked {c.revoked_at}" if c.revoked_at else ""))
                    if not consents:
                        print(f"no consents recorded for {args.subject} (tenant {args.tenant})")
        elif args.command == "facts":
            rows = await client.facts(args.tenant, args.subject, as_of=args.as_of, history=args.history is not None,
                                      candidates=args.candidates)
            if args.history:
                ns, _, key = args.history.rpartition("/")
                rows = [r for r in rows if r.key == key and (not ns or r.namespace == ns)]
            if args.json:
                _print_json([r.model_dump(mode="json") for r in rows])
            for fact in [] if args.json else rows:
                print(format_fact(fact))
            if not rows and not args.json:
                erased = await client.subject_erased(args.tenant, args.subject)
                print(f"subject {args.subject} of tenant {args.tenant} was erased: nothing is kept" if erased
                      else f"no facts for subject {args.subject} (tenant {args.tenant})")
    return 0


def main(argv: list[str] | None = None, *, parser: argparse.ArgumentParser | None = None,
         commands: Mapping[str, CommandHandler] | None = None, open_services: ServicesOpener | None = None) -> int:
    """Parse argv and run the command: one of `commands` (added by an extended `parser`), else a
    library command on the services `open_services` opens (default: the configured ones). Errors
    are one line on stderr: exit 2 for a usage or input error, 1 for a failing service or an
    internal error (a bug: its id on stderr, its traceback in <home>/logs/cli-errors.log)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = (parser or build_parser()).parse_args(argv)
    try:
        settings = Settings.from_env()
        return asyncio.run(_command(args, settings, commands or {}, open_services or configured_services))
    except USER_ERRORS as exc:  # the caller can fix it (agent_memory.user_errors)
        print(f"agent-memory {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except WorkflowFailureError as exc:  # --wait on a run that failed: say why, in one line
        cause = exc.cause
        while (inner := getattr(cause, "cause", None)) is not None:  # Temporal failures chain by .cause
            cause = inner
        print(f"agent-memory {args.command}: error: the workflow failed: {cause or exc}", file=sys.stderr)
        return 1
    except (AgentMemoryError, TemporalError, RedisError, psycopg.Error, OSError) as exc:  # a service is missing or failing
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"agent-memory {args.command}: error: {first_line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line with an error id; the traceback in the home's log
        home = Path(os.environ.get("AGENT_MEMORY_HOME") or default_home()).expanduser()
        print(f"agent-memory {args.command}: {log_internal_error(exc, home)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
