"""Connecting to a hosted Temporal: mTLS files, CA, server name and API key from the environment."""

from __future__ import annotations

import pytest
from temporalio.service import TLSConfig

from agent_memory.services import temporal_connect_options
from agent_memory.settings import ENV_VARS, Settings
from tests.test_migrations import cli

TLS_VARS = ("TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CA", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_API_KEY")


def settings(tmp_path, **env: str) -> Settings:
    return Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path), "TEMPORAL_ADDRESS": "temporal.example:7233", **env})


def test_the_variables_are_read_and_the_api_key_kept_out_of_repr(tmp_path):
    assert set(TLS_VARS) <= set(ENV_VARS)
    s = settings(tmp_path, TEMPORAL_TLS_CERT="/c.pem", TEMPORAL_TLS_KEY="/k.pem", TEMPORAL_TLS_CA="/ca.pem",
                 TEMPORAL_TLS_SERVER_NAME="ns.tmprl.cloud", TEMPORAL_API_KEY="sekret-api-key")
    assert (s.temporal_tls_cert, s.temporal_tls_key, s.temporal_tls_ca, s.temporal_tls_server_name,
            s.temporal_api_key) == ("/c.pem", "/k.pem", "/ca.pem", "ns.tmprl.cloud", "sekret-api-key")
    assert "sekret-api-key" not in repr(s)


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


@pytest.mark.parametrize("given, missing", [("TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY"),
                                            ("TEMPORAL_TLS_KEY", "TEMPORAL_TLS_CERT")])
def test_cert_without_key_or_key_without_cert_is_refused(tmp_path, given, missing):
    (tmp_path / "x.pem").write_bytes(b"x")
    with pytest.raises(ValueError, match=f"{given} is set but {missing} is not"):
        temporal_connect_options(settings(tmp_path, **{given: str(tmp_path / "x.pem")}))


def test_an_unreadable_file_names_its_variable(tmp_path):
    (tmp_path / "key.pem").write_bytes(b"k")
    with pytest.raises(ValueError, match=r"TEMPORAL_TLS_CERT=.*missing\.pem cannot be read"):
        temporal_connect_options(settings(tmp_path, TEMPORAL_TLS_CERT=str(tmp_path / "missing.pem"),
                                          TEMPORAL_TLS_KEY=str(tmp_path / "key.pem")))


def test_the_cli_reports_a_half_configured_mtls_in_one_line(services, tmp_path):
    (tmp_path / "cert.pem").write_bytes(b"c")
    out = cli({"AGENT_MEMORY_HOME": str(services.settings.home), "TEMPORAL_TLS_CERT": str(tmp_path / "cert.pem")},
              "runs", "--tenant", "t")
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "agent-memory runs: error: TEMPORAL_TLS_CERT is set but TEMPORAL_TLS_KEY is not: mTLS needs both the "
        "client certificate and its key"]
