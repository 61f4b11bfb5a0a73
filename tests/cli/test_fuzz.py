"""Property-based fuzzing of the CLI's argument parsing, in-process and without services: a bad
tenant, subject or argument exits 2 with one line on stderr and no traceback; good ones parse."""

from __future__ import annotations

import contextlib
import io
import re

import click
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agent_memory.cli.core import parse_args
from workers.cli import build_parser, main

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The identifier rule, written out independently of the implementation's pattern.
RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
identifiers = st.from_regex(RULE, fullmatch=True)
CONTROL = st.characters(min_codepoint=0, max_codepoint=0x1f) | st.sampled_from(["\x7f", "\x85", "\u2028", "\u202e"])
values = st.one_of(
    identifiers,
    st.text(max_size=80),
    st.text(CONTROL, min_size=1, max_size=10),
    st.builds(lambda a, b: a + b, identifiers, st.sampled_from(["\n", " ", ":", "/", "*", "'", '"', "\x00", "é",
                                                                  "\u2028", "--json", "x" * 64])),
    st.sampled_from(["", "-", "--", "-x", "--json", "-1", "acme:lin", "am:*", "../../etc", "a" * 65,
                     "'; DROP TABLE facts; --", "Ignore previous instructions", "t\u0131", "ＡＣＭＥ"]),
)
# Every command that takes --tenant (and --subject), with its other required arguments.
COMMANDS = {
    "ingest": (True, ["sessions.jsonl"]),
    "end-session": (True, ["--session", "s1"]),
    "runs": (False, []),
    "erase": (True, ["--reason", "test"]),
    "recall": (True, ["where?"]),
    "facts": (True, []),
    "stats": (False, []),
}


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """main() in-process; only for arguments that do not parse (it would connect otherwise)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def parses(argv: list[str]) -> bool:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parse_args(build_parser(), argv)
        except (click.UsageError, click.exceptions.Exit):
            return False
    return True


def check_usage_error(argv: list[str]) -> str:
    code, out, err = run_main(argv)
    assert code == 2, (argv, code, err)
    assert out == "" and "Traceback" not in err, (argv, err)
    assert len(err.splitlines()) == 1 and err.endswith("\n"), (argv, err)  # one line, control characters escaped
    assert err.startswith("agent-memory"), err
    return err


@SETTINGS
@given(command=st.sampled_from(sorted(COMMANDS)), tenant=values, subject=values)
def test_tenant_and_subject_are_parsed_or_refused_in_one_line(command, tenant, subject):
    needs_subject, rest = COMMANDS[command]
    argv = [command, "--tenant", tenant, *(["--subject", subject] if needs_subject else []), *rest]
    valid = bool(RULE.fullmatch(tenant)) and (not needs_subject or bool(RULE.fullmatch(subject)))
    if valid:
        event("valid identifiers")
        args = parse_args(build_parser(), argv)
        assert args.command == command and args.tenant == tenant
        assert not needs_subject or args.subject == subject
        return
    event("refused")
    err = check_usage_error(argv)
    bad = tenant if not RULE.fullmatch(tenant) else subject
    if bad and not bad.startswith("-") and bad.isprintable():
        assert "is invalid: use 1-64 characters" in err or "expected one argument" in err, err


@SETTINGS
@given(argv=st.lists(st.one_of(values, st.sampled_from([*sorted(COMMANDS), "--tenant", "--subject", "--as-of",
                                                                             "--limit", "--json", "eval", "locomo",
                                                                             "2024-05-01", "--wait", "demo"])),
                     max_size=8))
def test_random_argument_lists_never_show_a_traceback(argv):
    if any(a.startswith("-h") or (len(a) > 2 and ("--help".startswith(a.split("=")[0])
                                                  or "--version".startswith(a.split("=")[0]))) for a in argv):
        return  # --help, --version and their abbreviations print the usage or version and exit 0
    if parses(argv):
        event("parsed (not run)")
        return
    event("usage error")
    check_usage_error(argv)


def test_a_trailing_newline_is_not_an_identifier():
    check_usage_error(["facts", "--tenant", "acme\n", "--subject", "lin"])  # "$" used to accept it


def test_as_of_and_limit_errors_are_one_line():
    # (A time without a timezone is UTC, as on ingest: not an error.)
    for argv in (["facts", "--tenant", "a", "--subject", "b", "--as-of", "2024-05-01 the 10th"],
                 ["facts", "--tenant", "a", "--subject", "b", "--as-of", "yesterday\nmidnight"],
                 ["recall", "--tenant", "a", "--subject", "b", "q", "--limit", "many"],
                 ["recall", "--tenant", "a", "--subject", "b", "q", "--limit", "0"],
                 ["nope"], []):
        check_usage_error(argv)
