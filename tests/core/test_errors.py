"""One error hierarchy: every error the product raises on purpose is an AgentMemoryError; a user
error carries its HTTP status and CLI exit code; a built-in exception (a bug) is an internal
error with an id on every surface (HTTP 500, the console's 500 page, CLI exit 1, MCP tool
error), its traceback logged under that id and never shown to the caller."""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import re
from pathlib import Path

import httpx
import psycopg
import pytest
from mcp.client import Client
from pydantic import ValidationError

import agent_memory
import tools
import workers
from agent_memory import cli
from agent_memory.api.http.server import serving
from agent_memory.api.mcp_server import build_mcp_server
from agent_memory.api.user_errors import USER_ERRORS, cli_error_log, user_error_status
from agent_memory.core.errors import (
    AgentMemoryError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UserError,
)
from agent_memory.core.models import Message
from agent_memory.core.settings import Settings
from agent_memory.security.api_keys import ApiKeyError, TooManyFailuresError, create_key
from agent_memory.security.operator_keys import create_operator_key

# Private exceptions that never reach a caller as themselves: the body limit's HTTPException
# (Starlette answers it 413 before any product handler sees it).
PRIVATE = {"agent_memory.api.http.edge._TooLarge"}

# (error, HTTP status, CLI exit code) of each kind.
KINDS: list[tuple[AgentMemoryError, int, int]] = [
    (InvalidInput("limit: use 1 or more"), 422, 2),
    (NotFound("no memory 'm1' of subject 'lin'"), 404, 2),
    (Conflict("the memory changed: re-read it"), 409, 2),
    (Unauthorized("the API key is unknown or revoked"), 401, 2),
    (Forbidden("this key's scope is 'read'"), 403, 2),
    (TooManyRequests("too many failed authentications: retry after 30 s", 30), 429, 2),
    (ServiceUnavailable("no agent-memory stack is running"), 503, 1),
]
BUGS = [KeyError("tenant"), IndexError("list index out of range"), ValueError("bad"),
        LookupError("gone"), PermissionError("denied"), RuntimeError("boom"), TypeError("nope")]
ERROR_ID = r"[0-9a-f]{12}"


def _product_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for package in (agent_memory, workers, tools):
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, obj in vars(module).items():
                if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                    found[f"{info.name}.{name}"] = obj
    return found


def test_every_exception_class_of_the_product_and_its_tools_is_an_agent_memory_error():
    exceptions = _product_exceptions()
    assert len(exceptions) > 30, sorted(exceptions)
    outside = {name for name, cls in exceptions.items() if not issubclass(cls, AgentMemoryError)}
    assert outside == PRIVATE


@pytest.mark.parametrize(("error", "status", "exit_code"), KINDS, ids=lambda v: type(v).__name__)
def test_each_kind_carries_its_status_and_exit_code(error, status, exit_code):
    assert (error.status, error.exit_code) == (status, exit_code)
    assert isinstance(error, UserError) is (status < 500)
    assert (user_error_status(error) is not None) is (status < 500)


def test_the_domain_errors_are_of_their_kind():
    assert issubclass(ApiKeyError, Unauthorized) and issubclass(TooManyFailuresError, TooManyRequests)
    assert TooManyFailuresError("for this address", 7).retry_after == 7
    # Pydantic validators and the stdlib's conventions still see these as what they are.
    assert issubclass(InvalidInput, ValueError) and issubclass(NotFound, LookupError)


@pytest.mark.parametrize("bug", BUGS, ids=lambda v: type(v).__name__)
def test_a_built_in_exception_is_never_a_user_error(bug):
    assert user_error_status(bug) is None and not isinstance(bug, USER_ERRORS)


def test_invalid_content_is_a_user_error():
    with pytest.raises(ValidationError) as caught:
        Message.model_validate({"message_id": "x"})
    assert user_error_status(caught.value) == (422, "Invalid input", 2)


def _failing_settings(monkeypatch, error: BaseException) -> None:
    def from_env(*_args, **_kwargs):
        raise error
    monkeypatch.setattr(Settings, "from_env", from_env)


def test_a_bug_in_a_cli_command_is_one_line_with_an_id_and_its_traceback_in_the_log(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path))
    _failing_settings(monkeypatch, KeyError("tenant"))
    assert cli.main(["facts", "--tenant", "t", "--subject", "s"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "Traceback" not in err, err
    log_file = cli_error_log(tmp_path)
    found = re.fullmatch(rf"agent-memory facts: internal error ({ERROR_ID}) \(logged to (.+)\)\n", err)
    assert found and Path(found.group(2)) == log_file, err
    logged = log_file.read_text()
    assert f"internal error {found.group(1)}\nTraceback" in logged and "KeyError: 'tenant'" in logged
    assert log_file.stat().st_mode & 0o077 == 0  # it may quote the data at hand


@pytest.mark.parametrize("bug", BUGS, ids=lambda v: type(v).__name__)
def test_a_built_in_exception_in_the_cli_is_an_internal_error(monkeypatch, tmp_path, capsys, bug):
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path))
    _failing_settings(monkeypatch, bug)
    assert cli.main(["facts", "--tenant", "t", "--subject", "s"]) == 1
    err = capsys.readouterr().err
    if isinstance(bug, OSError):  # the system's own failure (a file, a connection): its one line, exit 1
        assert err == f"agent-memory facts: error: {bug}\n"
    else:
        assert re.fullmatch(rf"agent-memory facts: internal error {ERROR_ID} \(logged to .+\)\n", err)


@pytest.mark.parametrize(("error", "status", "exit_code"), KINDS, ids=lambda v: type(v).__name__)
def test_each_kind_exits_the_cli_with_its_code_and_its_message(monkeypatch, tmp_path, capsys, error, status,
                                                              exit_code):
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path))
    _failing_settings(monkeypatch, error)
    assert cli.main(["facts", "--tenant", "t", "--subject", "s"]) == exit_code
    assert capsys.readouterr().err == f"agent-memory facts: error: {error}\n"
    assert not cli_error_log(tmp_path).exists()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_bug_behind_the_http_api_is_a_500_with_an_error_id_in_the_log(client, services, tenant,
                                                                             monkeypatch, caplog):
    reader = (await create_key(services.pool, tenant, "read")).token

    async def failing(*_args, **_kwargs):
        raise failure

    monkeypatch.setattr(client, "facts", failing)
    async with serving(client) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for failure in BUGS:
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="agent_memory.api.http.problems"):
                answer = await http.get("/v1/subjects/lin/facts", headers=bearer(reader))
            assert answer.status_code == 500, (failure, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            body = answer.json()
            assert re.fullmatch(ERROR_ID, body["error_id"]) and body["error_id"] in body["detail"], body
            assert str(failure) not in answer.text and type(failure).__name__ not in answer.text, answer.text
            logged = [r for r in caplog.records if body["error_id"] in r.getMessage()]
            assert logged and logged[0].exc_info and logged[0].exc_info[1] is failure, caplog.records
        for failure, status, _ in KINDS:
            answer = await http.get("/v1/subjects/lin/facts", headers=bearer(reader))
            assert answer.status_code == status, (failure, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            if status < 500:
                assert answer.json()["detail"] == str(failure) and answer.json()["title"] == failure.title
            assert "error_id" not in answer.json()
        assert answer.headers["Retry-After"] == "5"  # the last kind: a service unavailable
        failure = TooManyRequests("too many failed authentications: retry after 30 s", 30)
        assert (await http.get("/v1/subjects/lin/facts", headers=bearer(reader))).headers["Retry-After"] == "30"
        with pytest.raises(ValidationError) as caught:
            Message.model_validate({"message_id": "x"})
        failure = caught.value  # a model a handler builds from what the caller sent
        invalid = await http.get("/v1/subjects/lin/facts", headers=bearer(reader))
        assert invalid.status_code == 422 and invalid.json()["title"] == "Invalid input", invalid.text


async def test_a_bug_behind_a_console_page_is_a_500_page_with_an_error_id_in_the_log(client, services, tenant,
                                                                                   monkeypatch, caplog):
    operator = (await create_operator_key(services.pool, "errors-test")).token

    async def failing(*_args, **_kwargs):
        raise failure

    monkeypatch.setattr(client.admin, "projection_lag", failing)  # the tenant page reads it
    async with serving(client) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
        for failure in BUGS:
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="agent_memory.api.console"):
                page = await http.get(f"/console/t/{tenant}", headers=bearer(operator))
            assert page.status_code == 500, (failure, page.text)
            assert page.headers["content-type"].startswith("text/html")
            found = re.search(rf"internal error ({ERROR_ID}), logged there", page.text)
            assert found, page.text
            shown = page.text.split("</head>", 1)[1]  # the page's body
            assert str(failure) not in shown and type(failure).__name__ not in page.text, page.text
            assert "Traceback" not in page.text
            logged = [r for r in caplog.records if found.group(1) in r.getMessage()]
            assert logged and logged[0].exc_info and logged[0].exc_info[1] is failure, caplog.records


async def test_a_bug_behind_an_mcp_tool_is_an_error_with_an_id_in_the_log(client, services, tenant, monkeypatch,
                                                                         caplog):
    reader = (await create_key(services.pool, tenant, "read")).token

    async def failing(*_args, **_kwargs):
        raise failure

    monkeypatch.setattr(client, "facts", failing)
    async with Client(build_mcp_server(client, reader)) as mcp:
        for failure in BUGS:
            caplog.clear()
            with caplog.at_level(logging.ERROR, logger="agent_memory.api.mcp_server"):
                result = await mcp.call_tool("facts", {"subject": "lin"})
            text = result.content[0].text
            found = re.search(rf"internal error ({ERROR_ID})", text)
            assert result.is_error and found and str(failure) not in text, text
            logged = [r for r in caplog.records if found.group(1) in r.getMessage()]
            assert logged and logged[0].exc_info and logged[0].exc_info[1] is failure, caplog.records
        failure = NotFound("no memory 'm1' of subject 'lin'")
        result = await mcp.call_tool("facts", {"subject": "lin"})
        assert result.is_error and result.content[0].text.endswith(f": {failure}"), result.content[0].text
        failure = ServiceUnavailable("the key provider holds no key 'k1'")
        result = await mcp.call_tool("facts", {"subject": "lin"})
        assert result.is_error and "unavailable" in result.content[0].text and "k1" not in result.content[0].text
        # A dependency's outage names the dependency, with no error id: it is no bug.
        failure = psycopg.OperationalError("connection refused")
        result = await mcp.call_tool("facts", {"subject": "lin"})
        text = result.content[0].text
        assert result.is_error and "postgres is unavailable" in text and "internal error" not in text, text
