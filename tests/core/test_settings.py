"""Settings from the environment: parsing, the one-line refusal of a bad value, the variables
docker-compose may set, the Temporal connection through temporalio.envconfig (profiles, the older
TLS names) and the reference table in docs/operations.md."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from agent_memory.api.services import temporal_connect_options
from agent_memory.core import settings as settings_module
from agent_memory.core.settings import ENV_VARS, TEMPORAL_ALIASES, Settings, default_home, reference_table, variable

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"


def from_env(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path), **env})


def test_defaults_and_the_platform_home(tmp_path):
    s = Settings.from_env({"XDG_DATA_HOME": str(tmp_path / "data")})
    assert s.home == default_home({"XDG_DATA_HOME": str(tmp_path / "data")}).resolve()
    assert (s.task_queue, s.temporal_address, s.temporal_namespace, s.provider, s.forget_grace_seconds,
            s.model_worker, s.model_concurrency, s.model_activities_per_second, s.key_dir) == (
        "agent-memory", None, "default", "offline", 86400.0, True, 100, None, None)


def test_values_are_parsed_and_paths_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Settings.from_env({"AGENT_MEMORY_HOME": "home", "AGENT_MEMORY_KEY_DIR": "keys",
                           "AGENT_MEMORY_FORGET_GRACE_SECONDS": "90.5", "AGENT_MEMORY_AUTH_FAILURE_BURST": " 3 ",
                           "AGENT_MEMORY_ACCEPT_PLAINTEXT_PAYLOADS": "yes", "AGENT_MEMORY_MODEL_WORKER": "off",
                           "AGENT_MEMORY_INPUT_PRICE_PER_1K": "0.5", "DATABASE_URL": "postgresql://app@db/x",
                           "AGENT_MEMORY_TASK_QUEUE": ""})
    assert s.home == tmp_path / "home" and s.key_dir == tmp_path / "keys"
    assert (s.forget_grace_seconds, s.auth_failure_burst, s.accept_plaintext_payloads, s.model_worker,
            s.input_price_per_1k, s.database_url) == (90.5, 3, True, False, 0.5, "postgresql://app@db/x")
    assert s.task_queue == "agent-memory", "an empty variable counts as unset"
    assert "postgresql://app@db/x" not in repr(s)


def test_the_process_environment_is_read_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_MEMORY_HOME", str(tmp_path))
    monkeypatch.setenv("AGENT_MEMORY_IDLE_TIMEOUT_SECONDS", "5")
    assert Settings.from_env().idle_timeout_seconds == 5.0 == Settings().idle_timeout_seconds
    assert Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path)}).idle_timeout_seconds == 600.0


def test_with_services_changes_fields_by_name(tmp_path):
    s = from_env(tmp_path)
    changed = s.with_services(temporal_address="127.0.0.1:7233", idle_timeout_seconds=1.0)
    assert (changed.temporal_address, changed.idle_timeout_seconds, s.temporal_address) == ("127.0.0.1:7233", 1.0, None)


@pytest.mark.parametrize("name, raw, message", [
    ("AGENT_MEMORY_FORGET_GRACE_SECONDS", "x", "AGENT_MEMORY_FORGET_GRACE_SECONDS='x' is not a number of seconds: "
     "set e.g. AGENT_MEMORY_FORGET_GRACE_SECONDS=86400"),
    ("AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS", "-1", "AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS='-1' is negative: set a "
     "number of seconds >= 0, e.g. AGENT_MEMORY_FUTURE_TOLERANCE_SECONDS=300"),
    ("AGENT_MEMORY_IDLE_TIMEOUT_SECONDS", "nan", "AGENT_MEMORY_IDLE_TIMEOUT_SECONDS='nan' is not a number of seconds: "
     "set e.g. AGENT_MEMORY_IDLE_TIMEOUT_SECONDS=600"),
    ("AGENT_MEMORY_PROVIDER_TIMEOUT", "soon", "AGENT_MEMORY_PROVIDER_TIMEOUT='soon' is not a number of seconds: "
     "set e.g. AGENT_MEMORY_PROVIDER_TIMEOUT=60"),
    ("AGENT_MEMORY_MODEL_CONCURRENCY", "0", "AGENT_MEMORY_MODEL_CONCURRENCY='0' is not a positive whole number: "
     "set e.g. AGENT_MEMORY_MODEL_CONCURRENCY=100"),
    ("AGENT_MEMORY_AUTH_FAILURE_BURST", "2.5", "AGENT_MEMORY_AUTH_FAILURE_BURST='2.5' is not a positive whole number: "
     "set e.g. AGENT_MEMORY_AUTH_FAILURE_BURST=10"),
    ("AGENT_MEMORY_EMBEDDING_DIMENSIONS", "wide", "AGENT_MEMORY_EMBEDDING_DIMENSIONS='wide' is not a positive whole "
     "number: set the embedding model's width, e.g. AGENT_MEMORY_EMBEDDING_DIMENSIONS=384"),
    ("AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND", "0", "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND='0' is not a positive "
     "number of activities per second: set e.g. AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND=5, or leave it unset for no "
     "limit"),
    ("AGENT_MEMORY_MODEL_WORKER", "maybe", "AGENT_MEMORY_MODEL_WORKER='maybe' is not a yes/no value: set "
     "AGENT_MEMORY_MODEL_WORKER=1 or AGENT_MEMORY_MODEL_WORKER=0"),
    ("AGENT_MEMORY_OUTPUT_PRICE_PER_1K", "-0.1", "AGENT_MEMORY_OUTPUT_PRICE_PER_1K='-0.1' is not a price >= 0 in USD "
     "per 1,000 tokens: set e.g. AGENT_MEMORY_OUTPUT_PRICE_PER_1K=0.15"),
    # Temporal's canonical version string is `<deployment>.<build id>`: the name cannot hold a dot.
    ("AGENT_MEMORY_DEPLOYMENT_NAME", "agent.memory", "AGENT_MEMORY_DEPLOYMENT_NAME='agent.memory' is not a Worker "
     "Deployment name (letters, digits, `-` and `_`): set e.g. AGENT_MEMORY_DEPLOYMENT_NAME=agent-memory"),
    ("AGENT_MEMORY_BUILD_ID", "v1 final", "AGENT_MEMORY_BUILD_ID='v1 final' is not a build id (letters, digits, `.`, "
     "`-` and `_`, e.g. the image tag): set e.g. AGENT_MEMORY_BUILD_ID=2026.12.1")])
def test_a_bad_value_is_refused_in_one_line_naming_the_variable(tmp_path, name, raw, message):
    with pytest.raises(ValueError) as refused:
        from_env(tmp_path, **{name: raw})
    assert str(refused.value) == message
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_env_vars_are_the_models_variables():
    names = {variable(field) for field in Settings.model_fields.values()}
    assert set(ENV_VARS) == {n for n in names if "*" not in n} | set(TEMPORAL_ALIASES)
    assert len(ENV_VARS) == len(set(ENV_VARS))
    assert {"TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE", "AGENT_MEMORY_MODEL_WORKER",
            "AGENT_MEMORY_AUTH_FAILURE_BURST"} <= set(ENV_VARS)
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description"


def test_a_temporal_profile_from_a_toml_file(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    config = tmp_path / "temporal.toml"
    config.write_text(f"""
[profile.default]
address = "localhost:7233"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "profile-api-key"

[profile.prod.tls]
server_name = "prod.example"
server_ca_cert_path = "{ca}"

[profile.prod.grpc_meta]
x-team = "memory"
""")
    s = from_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="prod")
    assert (s.temporal_address, s.temporal_namespace, s.temporal_api_key, s.temporal_tls_server_name,
            s.temporal_tls_ca, s.temporal_grpc_meta) == (
        "prod.example:7233", "prod-ns", "profile-api-key", "prod.example", str(ca), {"x-team": "memory"})
    assert "profile-api-key" not in repr(s)
    options = temporal_connect_options(s)
    assert options["namespace"] == "prod-ns" and options["api_key"] == "profile-api-key"
    assert options["tls"] == TLSConfig(server_root_ca_cert=b"-----BEGIN CERTIFICATE-----\n", domain="prod.example")
    assert options["rpc_metadata"] == {"x-team": "memory"} and "target_host" not in options
    # The variables override the profile's values; without TEMPORAL_PROFILE the default profile is read.
    s = from_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config), TEMPORAL_PROFILE="prod", TEMPORAL_NAMESPACE="other")
    assert (s.temporal_address, s.temporal_namespace) == ("prod.example:7233", "other")
    assert from_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config)).temporal_address == "localhost:7233"


def test_the_default_configuration_file_is_read_only_when_asked_for(tmp_path, monkeypatch):
    # A `temporal` CLI configuration of the user does not redirect the embedded stack.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    config = tmp_path / ".config" / "temporalio" / "temporal.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[profile.default]\naddress = "cloud.example:7233"\n')
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    assert from_env(tmp_path, **env).temporal_address is None
    assert from_env(tmp_path, **env, TEMPORAL_PROFILE="default").temporal_address == "cloud.example:7233"


def test_inline_pem_data_and_an_explicit_tls_switch(tmp_path):
    s = from_env(tmp_path, TEMPORAL_TLS_CLIENT_CERT_DATA="CERT", TEMPORAL_TLS_CLIENT_KEY_DATA="KEY",
                 TEMPORAL_TLS_SERVER_NAME="temporal")
    assert "KEY" not in repr(s).replace("KEY_", "")
    assert temporal_connect_options(s)["tls"] == TLSConfig(client_cert=b"CERT", client_private_key=b"KEY",
                                                           domain="temporal")
    assert temporal_connect_options(from_env(tmp_path, TEMPORAL_TLS="true"))["tls"] == TLSConfig()
    assert temporal_connect_options(from_env(tmp_path, TEMPORAL_TLS="false", TEMPORAL_API_KEY="k"))["tls"] is False


@pytest.mark.parametrize("env, reason", [
    ({"TEMPORAL_PROFILE": "nope"}, "Profile 'nope' not found"),
    ({"TEMPORAL_TLS_CLIENT_CERT_PATH": "/c.pem", "TEMPORAL_TLS_CLIENT_CERT_DATA": "CERT"}, "Cannot specify both")])
def test_a_bad_temporal_configuration_is_refused_in_one_line(tmp_path, env, reason):
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "a:1"\n')
    with pytest.raises(ValueError) as refused:
        from_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config), **env)
    message = str(refused.value)
    assert reason in message and "\n" not in message and "TEMPORAL_" in message


def test_a_malformed_configuration_file_is_refused_in_one_line(tmp_path):
    config = tmp_path / "temporal.toml"
    config.write_text("address = [\n")
    with pytest.raises(ValueError) as refused:
        from_env(tmp_path, TEMPORAL_CONFIG_FILE=str(config))
    assert str(refused.value).startswith(f"the Temporal client configuration (TEMPORAL_PROFILE='default', "
                                         f"TEMPORAL_CONFIG_FILE='{config}') cannot be used: ")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("older, standard", sorted(TEMPORAL_ALIASES.items()))
def test_an_older_tls_variable_is_read_with_a_warning_naming_the_standard_one(tmp_path, caplog, older, standard):
    with caplog.at_level(logging.WARNING, logger="agent_memory.core.settings"):
        s = from_env(tmp_path, **{older: "/x.pem"})
    field = next(name for name, f in Settings.model_fields.items() if variable(f) == standard)
    assert getattr(s, field) == "/x.pem"
    assert [r.getMessage() for r in caplog.records] == [
        f"{older} is deprecated: set {standard}, Temporal's standard name, instead"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agent_memory.core.settings"):
        from_env(tmp_path, **{standard: "/x.pem"})
    assert not caplog.records


def test_the_docs_reference_table_is_the_models():
    text = OPERATIONS.read_text(encoding="utf-8")
    assert text.count(settings_module.REFERENCE_START) == 1 and text.count(settings_module.REFERENCE_END) == 1
    assert settings_module.with_reference(text) == text, (
        "docs/operations.md's settings table differs from agent_memory/core/settings.py: run "
        "`python -m agent_memory.core.settings --write docs/operations.md`")
    table = reference_table()
    for name in ENV_VARS:
        assert f"`{name}`" in table


def test_workflows_and_activities_log_through_temporals_loggers():
    # workflow.logger / activity.logger add the run's ids and skip logging during replay.
    found = []
    for path in sorted((ROOT / "workflows").glob("*.py")) + sorted((ROOT / "activities").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "logging.getLogger" in text or "import logging" in text:
            found.append(path.relative_to(ROOT).as_posix())
    assert not found, found


def test_settings_without_a_temporal_variable_load_no_temporal_sdk(tmp_path):
    # Reading the settings stays cheap for a command that never connects (the SDK's core is native).
    code = ("import sys; from agent_memory.core.settings import Settings; "
            f"Settings.from_env({{'AGENT_MEMORY_HOME': {str(tmp_path)!r}}}); print('temporalio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
