"""The frame of every `agent-memory` command, on click: argparse-style one-line usage errors naming the
command's own help, the parameter types (identifiers, times, positive numbers), and `run`, which runs a
command's coroutine and turns its failure into one line on stderr with the exit code.

Nothing here imports the library at module level: `agent-memory --help` loads click and this package
only, and a command imports what it needs when it runs."""

from __future__ import annotations

import json
import logging
import os
import sys
from argparse import Namespace
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
from click.parser import _OptionParser, _ParsingState

from agent_memory.core.errors import AgentMemoryError, ServiceUnavailable
from agent_memory.telemetry.tracing import add_trace_context

if TYPE_CHECKING:
    from agent_memory.api.services import Services
    from agent_memory.core.settings import Settings
    from agent_memory.memory.filters import MemoryFilter

PROG = "agent-memory"
CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
# Opens the services the library commands use (default: the configured ones, `configured_services`).
ServicesOpener = Callable[["Settings"], AbstractAsyncContextManager["Services"]]


def _printable(message: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def _looks_like_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1:].replace(".", "", 1).isdigit()


def _option_hint(param: click.Parameter | None) -> str:
    if isinstance(param, click.Option):
        return max(param.opts, key=len)
    return param.human_readable_name if param is not None else "value"


def usage_message(exc: click.UsageError) -> str:
    """What went wrong, in argparse's words (scripts and docs quote them)."""
    if isinstance(exc, click.NoSuchOption):
        return f"unrecognized arguments: {exc.option_name}"
    if isinstance(exc, click.MissingParameter):
        return f"the following arguments are required: {_option_hint(exc.param)}"
    if isinstance(exc, click.BadParameter):
        return f"argument {_option_hint(exc.param)}: {exc.message}"
    if isinstance(exc, click.BadOptionUsage) and "requires" in exc.message:
        return f"argument {exc.option_name}: expected one argument"
    return exc.message


def print_usage_error(exc: click.UsageError) -> None:
    prog = exc.ctx.command_path if exc.ctx is not None else PROG
    print(f"{prog}: error: {_printable(usage_message(exc))} (see {prog} -h)", file=sys.stderr)


class _Usage:
    """argparse's usage line (`usage: agent-memory facts [-h] --tenant TENANT ...`)."""

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, " ".join(self.usage_pieces(ctx)), prefix="usage: ")

    def usage_pieces(self, ctx: click.Context) -> list[str]:
        options, arguments = ["[-h]"], []
        for param in cast(click.Command, self).get_params(ctx):
            if isinstance(param, click.Option):
                if param.hidden or "--help" in param.opts:
                    continue
                opt = max(param.opts, key=len)
                metavar = param.metavar or (param.name or "").upper()
                if param.is_flag:
                    piece = opt
                elif param._flag_needs_value:
                    piece = f"{opt} [{metavar}]"
                elif param.multiple:
                    piece = f"{opt} {metavar} [{metavar} ...]"
                else:
                    piece = f"{opt} {metavar}"
                options.append(piece if param.required else f"[{piece}]")
            elif isinstance(param, click.Argument):
                metavar = param.metavar or param.human_readable_name
                if param.nargs == -1:
                    arguments.append(f"{metavar} [{metavar} ...]" if param.required else f"[{metavar} ...]")
                else:
                    arguments.append(metavar)
        return options + arguments


class Command(_Usage, click.Command):
    """A command whose usage errors read as argparse's did: an argument it does not know is named
    first (`facts --tenat x` says `--tenat x`, not the --tenant it leaves missing), then every
    required argument missing at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        kwargs.setdefault("short_help", kwargs.get("help"))  # the help list shows the whole line
        super().__init__(*args, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        found = self._lenient_parse(ctx, args)
        if found is not None:
            opts, unknown = found
            if unknown:
                raise click.UsageError(f"unrecognized arguments: {' '.join(unknown)}", ctx)
            if not set(args) & set(ctx.help_option_names):
                missing = [_option_hint(p) for p in self.get_params(ctx)
                           if p.required and p.name not in opts and p.envvar is None]
                if missing:
                    raise click.UsageError(f"the following arguments are required: {', '.join(missing)}", ctx)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.ctx = exc.ctx or ctx  # the parser's own errors name no command
            raise

    def _lenient_parse(self, ctx: click.Context, args: Sequence[str]) -> tuple[dict[str, Any], list[str]] | None:
        """The options found and the arguments this command does not know; None when the arguments
        have another usage error (the real parse reports that one)."""
        parser: _OptionParser = self.make_parser(ctx)
        parser.ignore_unknown_options = True
        state = _ParsingState(list(args))
        try:
            parser._process_args_for_options(state)
        except click.UsageError:
            return None
        slots = [p for p in self.get_params(ctx) if isinstance(p, click.Argument)]
        opts = dict(state.opts)
        unknown: list[str] = []
        for token in [*state.largs, *state.rargs]:
            if _looks_like_option(token) or not slots:
                unknown.append(token)
                continue
            opts[slots[0].name or ""] = token
            if slots[0].nargs != -1:
                slots.pop(0)
        return opts, unknown


class Group(_Usage, click.Group):
    """A command group: its commands listed in the order they were added, and a missing or unknown
    subcommand reported as argparse did (`dest` names the choice, e.g. policy_command)."""

    command_class = Command

    def __init__(self, *args: Any, dest: str = "command", **kwargs: Any) -> None:
        kwargs.setdefault("context_settings", CONTEXT)
        kwargs.setdefault("no_args_is_help", False)
        kwargs.setdefault("short_help", kwargs.get("help"))
        super().__init__(*args, **kwargs)
        self.dest = dest

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def usage_pieces(self, ctx: click.Context) -> list[str]:
        choices = "{" + ",".join(self.commands) + "}"
        return [*super().usage_pieces(ctx), choices if len(choices) < 60 else "COMMAND", "..."]

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        if not ctx._protected_args and not ctx.resilient_parsing:
            raise click.UsageError(f"the following arguments are required: {self.dest}", ctx)
        return rest

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        if self.get_command(ctx, name) is None and not _looks_like_option(name):
            choices = ", ".join(repr(c) for c in self.commands)
            raise click.UsageError(f"argument {self.dest}: invalid choice: {name!r} (choose from {choices})", ctx)
        return super().resolve_command(ctx, args)


def package_version(distribution: str = "agent-memory") -> str:
    """The installed agent-memory's version (its package metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class RootGroup(Group):
    """The program: `--version`, and usage errors printed as one line with exit 2 however it is
    invoked (the console script or click's CliRunner)."""

    def __init__(self, name: str, *, open_services: ServicesOpener | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.open_services: ServicesOpener = open_services or configured_services
        self.params.append(click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True,
                                        callback=self._print_version, help="show the program's version and exit"))

    def _print_version(self, ctx: click.Context, param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(f"{ctx.info_name} {package_version()}")
            ctx.exit(0)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        # To stderr; a line written in a span ends with its trace and span ids (telemetry.tracing).
        handler = logging.StreamHandler()
        add_trace_context([handler])
        logging.basicConfig(level=logging.WARNING, handlers=[handler])
        try:
            code = super().main(args, prog_name or self.name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            print_usage_error(exc)
            code = 2
        except click.Abort:
            code = 130
        code = 0 if code is None else code
        if standalone_mode:
            sys.exit(code)
        return code


def add_commands(group: click.Group, commands: Iterable[click.Command]) -> None:
    for command in commands:
        group.add_command(command)


def namespace(ctx: click.Context) -> Namespace:
    """The command line as argparse parsed it: `command`, each group's choice under its `dest`
    (bench_name, policy_command...) and every parameter (the shape the commands' helpers take)."""
    chain = []
    while ctx is not None:
        chain.append(ctx)
        ctx = ctx.parent  # type: ignore[assignment]
    chain.reverse()
    values: dict[str, Any] = {}
    for parent, child in pairwise(chain):
        if isinstance(parent.command, Group):
            values[parent.command.dest] = child.info_name
    for param in chain[-1].command.params:
        if param.name is None or not param.expose_value:
            continue
        value = chain[-1].params.get(param.name)
        if isinstance(value, tuple):  # nargs=-1 and repeated options: a list, None when absent and so defaulted
            value = list(value) if value or param.default is not None else None
            if isinstance(param, click.Argument):
                value = value or []
        values[param.name] = value
    return Namespace(**values)


def parse_args(group: click.Group, argv: Sequence[str]) -> Namespace:
    """Parse without running (tests, the demo's closing commands): the argparse-shaped namespace."""
    ctx = group.make_context(PROG, list(argv))
    while isinstance(ctx.command, click.Group):
        _, command, rest = ctx.command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        assert command is not None
        ctx = command.make_context(command.name, rest, parent=ctx)
    return namespace(ctx)


# Parameter types. Their checks import the library when a value is converted, never for --help.


class Identifier(click.ParamType):
    name = "identifier"

    def __init__(self, field: str) -> None:
        self.field = field

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from agent_memory.core.models import check_identifier

        try:
            return check_identifier(self.field, value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Positive(click.ParamType):
    name = "positive"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        option = _option_hint(param)
        if isinstance(value, int):
            number = value
        else:
            try:
                number = int(value)
            except ValueError:
                self.fail(f"{option} {value!r} is not a whole number, e.g. {option} 5", param, ctx)
        if number < 1:
            self.fail(f"{option} {value} is below 1: give at least 1, e.g. {option} 5", param, ctx)
        return number


class Time(click.ParamType):
    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"{value!r} is not a time: use ISO 8601, e.g. 2024-05-01T10:00:00Z", param, ctx)
        # One rule with ingest (models.py): a time without a timezone is UTC.
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


class Choice(click.Choice):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        self.fail(f"invalid choice: {value!r} (choose from {', '.join(repr(c) for c in self.choices)})", param, ctx)


class Many(click.Option):
    """An option taking one or more values (argparse's nargs="+"): `--memories 1000 10000`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser: _OptionParser, ctx: click.Context) -> None:
        super().add_to_parser(parser, ctx)
        option = parser._long_opt.get(max(self.opts, key=len))
        if option is None:
            return
        process = option.process

        def greedy(value: Any, state: _ParsingState) -> None:
            state.opts.pop(option.dest, None) if option.dest else None  # a repeated option replaces
            process(value, state)
            while state.rargs and not _looks_like_option(state.rargs[0]):
                process(state.rargs.pop(0), state)

        option.process = greedy  # type: ignore[method-assign]


IDENTIFIER_TENANT = Identifier("tenant")
IDENTIFIER_SUBJECT = Identifier("subject")
IDENTIFIER_REQUEST = Identifier("request id")
POSITIVE = Positive()
TIME = Time()
# The recall policy presets (agent_memory/recall/recall_policy.py PRESETS; tests/cli check they match).
PRESET_NAMES = ("designed", "long-horizon")
DEFAULT_PRESET = "long-horizon"
EMBEDDERS = ("hashing", "e5-small")


def preset_policy(name: str | None) -> Any:
    """The recall policy of a preset the command line names (None: none named)."""
    from agent_memory.recall.recall_policy import PRESETS

    return PRESETS[name] if name else None  # type: ignore[index]  # Choice(PRESET_NAMES) checked it


def json_flag(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", is_flag=True)(f)


def speaker_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """`--speaker NAME`: only memories citing a message that speaker said (agent_memory.memory.filters)."""
    return click.option("--speaker", metavar="SPEAKER", help="only memories citing a message said by this speaker "
                        "(a message's speaker, case aside): one of several people speaking under one account")(f)


def speaker_filter(speaker: str | None) -> MemoryFilter:
    from agent_memory.memory.filters import NO_FILTER, memory_filter

    return NO_FILTER if speaker is None else memory_filter(speaker=speaker)


def scoped(subject: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The --tenant (and --subject) options every tenant-scoped command takes."""

    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        if subject:
            f = click.option("--subject", required=True, type=IDENTIFIER_SUBJECT, metavar="SUBJECT")(f)
        return click.option("--tenant", required=True, type=IDENTIFIER_TENANT, metavar="TENANT")(f)

    return add


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _failure(exc: BaseException) -> tuple[int, str] | None:
    """The exit code and message of a user error (2) or a failing service (1); None for a bug."""
    import psycopg
    from redis.exceptions import RedisError
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import TemporalError

    from agent_memory.api.user_errors import USER_ERRORS

    if isinstance(exc, USER_ERRORS):  # the caller can fix it (agent_memory.api.user_errors)
        return 2, str(exc)
    if isinstance(exc, WorkflowFailureError):  # --wait on a run that failed: say why, in one line
        cause: BaseException | None = exc.cause
        while (inner := getattr(cause, "cause", None)) is not None:  # Temporal failures chain by .cause
            cause = inner
        return 1, f"the workflow failed: {cause or exc}"
    if isinstance(exc, AgentMemoryError | TemporalError | RedisError | psycopg.Error | OSError):  # a service is down
        text = str(exc).strip()
        return 1, text.splitlines()[0] if text else type(exc).__name__
    return None


def run(body: Callable[[Settings], Coroutine[Any, Any, int | None]]) -> int:
    """Run a command's coroutine on the settings of the environment. Errors are one line on stderr
    naming the command: exit 2 for a usage or input error, 1 for a failing service, 130 on Ctrl-C,
    and 1 for an internal error (a bug: its id on stderr, its traceback in
    <home>/logs/cli-errors.log)."""
    ctx = click.get_current_context()
    command = ctx.find_root().invoked_subcommand or ctx.command_path
    try:
        import asyncio  # on use: the help needs no event loop

        from agent_memory.core.settings import Settings

        settings = Settings.from_env()
        code: int | None = asyncio.run(body(settings))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        failure = _failure(exc)
        if failure is None:  # a bug: one line with an error id; the traceback in the home's log
            from agent_memory.api.user_errors import log_internal_error
            from agent_memory.core.settings import default_home

            home = Path(os.environ.get("AGENT_MEMORY_HOME") or default_home()).expanduser()
            print(f"{PROG} {command}: {log_internal_error(exc, home)}", file=sys.stderr)
            return 1
        print(f"{PROG} {command}: error: {failure[1]}", file=sys.stderr)
        return failure[0]
    return code or 0


def services_opener() -> ServicesOpener:
    root = click.get_current_context().find_root().command
    return root.open_services if isinstance(root, RootGroup) else configured_services


@asynccontextmanager
async def configured_services(settings: Settings) -> AsyncIterator[Services]:
    """The services the settings name (TEMPORAL_ADDRESS, DATABASE_URL, REDIS_URL), schema checked
    (never migrated). The console script opens a running embedded stack instead when they are unset."""
    from agent_memory.api.services import Services, check_schema

    if not (settings.temporal_address and settings.database_url and settings.redis_url):
        raise ServiceUnavailable("no services configured: set TEMPORAL_ADDRESS, DATABASE_URL and REDIS_URL, or start "
                                 "the embedded stack with `agent-memory up`")
    await check_schema(settings)
    services = await Services.open(settings)
    try:
        yield services
    finally:
        await services.close()


def with_client(fn: Callable[..., Awaitable[Any]]) -> Callable[..., int]:
    """A library command: `fn(client, services, **params)` runs on the services the program opens,
    with a MemoryClient on the configured providers."""
    import functools

    @functools.wraps(fn)
    def callback(**params: Any) -> int:
        opener = services_opener()

        async def body(settings: Settings) -> int | None:
            from agent_memory.api.client import MemoryClient
            from agent_memory.providers.factory import providers_for

            async with opener(settings) as services:
                providers = providers_for(services.settings)
                client = MemoryClient(services, providers.embedder, summarizer=providers.summarizer)
                result: int | None = await fn(client, services, **params)
                return result

        return run(body)

    return callback


def with_settings(fn: Callable[..., Coroutine[Any, Any, int | None]]) -> Callable[..., int]:
    """A command that opens what it needs itself: `fn(settings, **params)`."""
    import functools

    @functools.wraps(fn)
    def callback(**params: Any) -> int:
        return run(lambda settings: fn(settings, **params))

    return callback


def with_args(fn: Callable[[Namespace, Settings], Coroutine[Any, Any, int | None]]) -> Callable[..., int]:
    """A command whose helpers take the argparse-shaped namespace: `fn(args, settings)`."""
    import functools

    @functools.wraps(fn)
    def callback(**params: Any) -> int:
        args = namespace(click.get_current_context())
        return run(lambda settings: fn(args, settings))

    return callback
