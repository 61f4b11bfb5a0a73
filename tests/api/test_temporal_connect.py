"""Connecting to a hosted Temporal: mTLS files, CA, server name and API key from the environment."""

from __future__ import annotations

import re

import pytest
from temporalio.service import TLSConfig

from agent_memory.api.services import temporal_connect_options
from agent_memory.core.settings import ENV_VARS, Settings
from tests.store.test_migrations import cli

TLS_VARS = ("TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
            "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_API_KEY")
CERT_VAR = "TEMPORAL_TLS_CLIENT_CERT_PATH (or TEMPORAL_TLS_CERT)"
KEY_VAR = "TEMPORAL_TLS_CLIENT_KEY_PATH (or TEMPORAL_TLS_KEY)"


def settings(tmp_path, **env: str) -> Settings:
    return Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path), "TEMPORAL_ADDRESS": "temporal.example:7233", **env})


def test_the_variables_are_read_and_the_api_key_kept_out_of_repr(tmp_path):
    assert set(TLS_VARS) <= set(ENV_VARS)
    s = settings(tmp_path, TEMPORAL_TLS_CERT="/c.pem", TEMPORAL_TLS_KEY="/k.pem", TEMPORAL_TLS_CA="/ca.pem",
                 TEMPORAL_TLS_SERVER_NAME="ns.tmprl.cloud", TEMPORAL_API_KEY="sekret-api-key")
    assert (s.temporal_tls_cert, s.temporal_tls_key, s.temporal_tls_ca, s.temporal_tls_server_name,
            s.temporal_api_key) == ("/c.pem", "/k.pem", "/ca.pem", "ns.tmprl.cloud", "sekret-api-key")
    assert "sekret-api-key" not in repr(s)


def test_temporals_standard_variable_names_are_read(tmp_path):
    s = settings(tmp_path, TEMPORAL_TLS_CLIENT_CERT_PATH="/c.pem", TEMPORAL_TLS_CLIENT_KEY_PATH="/k.pem",
                 TEMPORAL_TLS_SERVER_CA_CERT_PATH="/ca.pem", TEMPORAL_TLS_SERVER_NAME="temporal")
    assert (s.temporal_tls_cert, s.temporal_tls_key, s.temporal_tls_ca, s.temporal_tls_server_name) == (
        "/c.pem", "/k.pem", "/ca.pem", "temporal")
    # The same file under both names is accepted; the standard name wins over an empty alias.
    s = settings(tmp_path, TEMPORAL_TLS_CLIENT_CERT_PATH="/c.pem", TEMPORAL_TLS_CERT="/c.pem", TEMPORAL_TLS_CA="")
    assert s.temporal_tls_cert == "/c.pem" and s.temporal_tls_ca is None


@pytest.mark.parametrize("standard, alias", [("TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CERT"),
                                             ("TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_KEY"),
                                             ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_CA")])
def test_a_standard_name_and_its_alias_naming_different_files_are_refused(tmp_path, standard, alias):
    with pytest.raises(ValueError, match=f"{standard}='/a.pem' and {alias}='/b.pem' name different files: "
                                         f"set only {standard}"):
        settings(tmp_path, **{standard: "/a.pem", alias: "/b.pem"})


def test_plain_connection_without_tls_settings(tmp_path):
    options = temporal_connect_options(settings(tmp_path, TEMPORAL_NAMESPACE="prod"))
    assert options["namespace"] == "prod" and "data_converter" in options
    assert "tls" not in options and "api_key" not in options


def test_mtls_with_ca_and_server_name(tmp_path):
    files = {name: tmp_path / f"{name}.pem" for name in ("cert", "key", "ca")}
    for name, path in files.items():
        path.write_bytes(f"-----BEGIN {name.upper()}-----\n".encode())
    options = temporal_connect_options(settings(
        tmp_path, TEMPORAL_TLS_CERT=str(files["cert"]), TEMPORAL_TLS_KEY=str(files["key"]),
        TEMPORAL_TLS_CA=str(files["ca"]), TEMPORAL_TLS_SERVER_NAME="temporal.internal"))
    assert options["tls"] == TLSConfig(client_cert=b"-----BEGIN CERT-----\n", client_private_key=b"-----BEGIN KEY-----\n",
                                       server_root_ca_cert=b"-----BEGIN CA-----\n", domain="temporal.internal")
    assert "api_key" not in options


def test_server_verification_only_and_api_key(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"ca")
    options = temporal_connect_options(settings(tmp_path, TEMPORAL_TLS_CA=str(ca), TEMPORAL_API_KEY="k"))
    assert options["tls"] == TLSConfig(server_root_ca_cert=b"ca")
    assert options["api_key"] == "k"
    # An API key alone: TLS with the system roots, never in the clear.
    options = temporal_connect_options(settings(tmp_path, TEMPORAL_API_KEY="k"))
    assert options["tls"] is True and options["api_key"] == "k"


@pytest.mark.parametrize("given, message", [
    ("TEMPORAL_TLS_CERT", f"{CERT_VAR} is set but {KEY_VAR} is not"),
    ("TEMPORAL_TLS_CLIENT_CERT_PATH", f"{CERT_VAR} is set but {KEY_VAR} is not"),
    ("TEMPORAL_TLS_KEY", f"{KEY_VAR} is set but {CERT_VAR} is not"),
    ("TEMPORAL_TLS_CLIENT_KEY_PATH", f"{KEY_VAR} is set but {CERT_VAR} is not")])
def test_cert_without_key_or_key_without_cert_is_refused(tmp_path, given, message):
    (tmp_path / "x.pem").write_bytes(b"x")
    with pytest.raises(ValueError, match=re.escape(message)):
        temporal_connect_options(settings(tmp_path, **{given: str(tmp_path / "x.pem")}))


def test_an_unreadable_file_names_its_variable(tmp_path):
    (tmp_path / "key.pem").write_bytes(b"k")
    with pytest.raises(ValueError, match=re.escape(CERT_VAR) + r" = .*missing\.pem cannot be read"):
        temporal_connect_options(settings(tmp_path, TEMPORAL_TLS_CERT=str(tmp_path / "missing.pem"),
                                          TEMPORAL_TLS_KEY=str(tmp_path / "key.pem")))


def test_the_cli_reports_a_half_configured_mtls_in_one_line(services, tmp_path, caplog):
    (tmp_path / "cert.pem").write_bytes(b"c")
    out = cli({"AGENT_MEMORY_HOME": str(services.settings.home), "TEMPORAL_TLS_CERT": str(tmp_path / "cert.pem")},
              "runs", "--tenant", "t")
    assert out.returncode == 2, out.stderr
    # The error in one line; the older name's warning is a log record (stderr in a terminal).
    assert out.stderr.strip() == (
        f"agent-memory runs: error: {CERT_VAR} is set but {KEY_VAR} is not: mTLS needs both the client "
        "certificate and its key")
    # The older name is read, with a warning naming Temporal's standard one.
    assert [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()] == [
        "TEMPORAL_TLS_CERT is deprecated: set TEMPORAL_TLS_CLIENT_CERT_PATH, Temporal's standard name, instead"]
