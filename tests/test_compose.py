"""Static checks of the production deployment (docker-compose.yml, Dockerfile, postgres init).

No Docker needed: the files are parsed and checked against the code they deploy (settings.ENV_VARS,
db.APP_ROLE, the console script, the search attributes the workflows set).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import stat
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml  # pyyaml is a dev dependency: a missing one must fail, not skip

from agent_memory.core import contract
from agent_memory.core.settings import ENV_VARS, Settings
from agent_memory.store.db import APP_ROLE
from workers.embedded import DATABASE_NAME, POSTGRES_MAX_LOCKS_PER_TRANSACTION, SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SETUP_SERVICES = ("temporal-setup", "temporal-admin-tools")

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?error}, ${NAME?error}, $NAME and $$ (a literal $).
_INTERPOLATION = re.compile(
    r"\$(?:(?P<dollar>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value: str) -> str:
    """Compose-style interpolation with an empty environment: defaults where given, else a dummy."""

    def substitute(m: re.Match) -> str:
        if m.group("dollar"):
            return "$"
        name = m.group("name") or m.group("bare")
        if m.group("op") in (":-", "-"):
            return m.group("arg")
        return f"dummy-{name.lower().replace('_', '-')}"

    return _INTERPOLATION.sub(substitute, value)


def environment(service: dict) -> dict[str, str]:
    """A service's `environment:` as a mapping, whether written as a mapping or a list."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = {}
        for item in env:
            key, sep, value = str(item).partition("=")
            pairs[key] = value if sep else None
        env = pairs
    return {str(k): ("" if v is None else str(v)) for k, v in env.items()}


def argv(value) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    logical, current = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    if current:
        logical.append(current)
    pairs = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        pairs.append((keyword.upper(), args.strip()))
    return pairs


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    starts = [i for i, (kw, _) in enumerate(instructions) if kw == "FROM"]
    assert starts, "Dockerfile has no FROM"
    return instructions[starts[-1]:]


def exec_form(args: str) -> list[str]:
    parsed = json.loads(args)  # exec (JSON) form: no shell in between, signals reach the process
    assert isinstance(parsed, list) and all(isinstance(a, str) for a in parsed), args
    return parsed


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE_FILE.is_file(), f"{COMPOSE_FILE} is missing"
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def compose_services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def worker(compose_services) -> dict:
    return compose_services["worker"]


@pytest.fixture(scope="module")
def migrate_service(compose_services) -> dict:
    assert "migrate" in compose_services, "no one-shot `migrate` service"
    return compose_services["migrate"]


@pytest.fixture(scope="module")
def setup_service(compose_services) -> tuple[str, dict]:
    found = [name for name in SETUP_SERVICES if name in compose_services]
    assert found, f"no Temporal setup service (one of {SETUP_SERVICES})"
    return found[0], compose_services[found[0]]


@pytest.fixture(scope="module")
def init_scripts(compose_services) -> list[Path]:
    sources = []
    for volume in compose_services["postgres"].get("volumes") or []:
        if isinstance(volume, dict):
            source, target = volume.get("source"), volume.get("target")
        else:
            parts = str(volume).split(":")
            source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        if target and target.rstrip("/") == "/docker-entrypoint-initdb.d" and source:
            sources.append((ROOT / source).resolve())
    assert sources, "postgres mounts nothing at /docker-entrypoint-initdb.d"
    scripts = []
    for source in sources:
        assert source.is_dir(), f"init script folder {source} does not exist"
        scripts += sorted(p for p in source.iterdir() if p.suffix in (".sh", ".sql"))
    assert scripts, f"no .sh or .sql init script in {sources}"
    return scripts


def test_services_exist(compose_services, setup_service):
    assert {"postgres", "temporal", "temporal-ui", "redis", "worker", "api"} <= set(compose_services)
    assert compose_services["api"]["command"][0] == "serve"
    assert compose_services["api"]["ports"] == ["127.0.0.1:8765:8765"]
    assert compose_services["postgres"]["image"].startswith("pgvector/pgvector:pg1")
    assert compose_services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert compose_services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert compose_services["redis"]["image"].startswith("redis:7")
    # The search attributes are registered by agent-memory itself, from the worker's image.
    assert setup_service[1].get("build") == compose_services["worker"].get("build")


# The OpenTelemetry SDK's own variables, which agent_memory/telemetry/tracing.py leaves to it.
OTEL_VARIABLES = {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"}


@pytest.mark.parametrize("name", ["worker", "migrate", "temporal-setup", "api"])
def test_agent_memory_services_set_only_settings_env_vars(compose_services, name):
    service = compose_services[name]
    env = environment(service)
    assert env, f"{name} sets no environment"
    unknown = sorted(set(env) - set(ENV_VARS) - OTEL_VARIABLES)
    assert not unknown, f"{name} sets variables agent_memory.core.settings does not read: {unknown}"
    # env_file would smuggle in variables this test cannot see.
    assert "env_file" not in service


def test_worker_is_built_from_the_repo_dockerfile_and_runs_worker(worker):
    build = worker.get("build")
    assert build is not None, "the worker is not built from this repository"
    if isinstance(build, str):
        context, dockerfile = build, "Dockerfile"
    else:
        context, dockerfile = build.get("context", "."), build.get("dockerfile", "Dockerfile")
    assert (ROOT / context).resolve() == ROOT
    assert (ROOT / context / dockerfile).resolve() == DOCKERFILE
    # An entrypoint override would stop `command` from reaching agent-memory.
    assert "entrypoint" not in worker
    assert argv(worker.get("command")) == ["worker"]
    assert worker.get("restart") == "unless-stopped"


def test_the_worker_scales_to_replicas(compose_services, worker):
    """`docker compose up --scale worker=N`: a fixed container name or a published host port would
    make a second replica fail to start; the replicas share the keys and the erasure ledger."""
    assert "container_name" not in worker and "ports" not in worker
    assert not (worker.get("deploy") or {}).get("replicas"), "the replica count is the operator's (--scale)"
    mounts = {str(v).split(":")[1]: str(v) for v in worker.get("volumes") or []}
    assert mounts["/keys"] == "agent-memory-keys:/keys" and mounts["/data"] == "worker-data:/data"
    # The model queue's rate limit and each replica's model calls at once are the operator's to set.
    assert {"AGENT_MEMORY_MODEL_CONCURRENCY", "AGENT_MEMORY_MODEL_ACTIVITIES_PER_SECOND"} <= set(environment(worker))
    # The api reads the keys only.
    assert "agent-memory-keys:/keys:ro" in compose_services["api"]["volumes"]


def test_worker_waits_for_its_services(worker, setup_service):
    depends = worker.get("depends_on") or {}
    if isinstance(depends, list):
        depends = {name: {"condition": "service_started"} for name in depends}
    assert {"postgres", "redis", "temporal", setup_service[0], "migrate"} <= set(depends)
    assert depends["postgres"].get("condition") == "service_healthy"
    assert depends[setup_service[0]].get("condition") == "service_completed_successfully"
    # The worker never migrates: it starts once the one-shot migration has succeeded.
    assert depends["migrate"].get("condition") == "service_completed_successfully"


def test_migrations_run_once_in_the_migrate_service_with_the_owner_url(worker, migrate_service):
    # The same image as the worker, running `agent-memory migrate` once.
    assert migrate_service.get("build") == worker.get("build")
    assert "entrypoint" not in migrate_service
    assert argv(migrate_service.get("command")) == ["migrate"]
    assert str(migrate_service.get("restart")) == "no"
    depends = migrate_service.get("depends_on") or {}
    assert isinstance(depends, dict) and depends["postgres"]["condition"] == "service_healthy"

    migrate_settings = Settings.from_env({k: interpolate(v) for k, v in environment(migrate_service).items()})
    admin = urlsplit(migrate_settings.database_admin_url or "")
    assert admin.username and admin.username != APP_ROLE, "migrations need the owner, not the app role"
    assert admin.hostname == "postgres" and admin.path == f"/{DATABASE_NAME}" and admin.password
    # The worker holds only the application role's credentials.
    assert "DATABASE_ADMIN_URL" not in environment(worker)
    assert not any("agent_memory_owner" in value or "OWNER_PASSWORD" in value for value in environment(worker).values())


def test_dockerfile_entrypoint_is_agent_memory():
    assert DOCKERFILE.is_file()
    stage = final_stage()
    assert stage[0][1].split()[0] == "python:3.11-slim"
    entrypoints = [args for kw, args in stage if kw == "ENTRYPOINT"]
    cmds = [args for kw, args in stage if kw == "CMD"]
    assert entrypoints and exec_form(entrypoints[-1]) == ["agent-memory"]
    assert cmds and exec_form(cmds[-1]) == ["worker"]
    # The entrypoint is the console script the project installs.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "agent-memory" in project["project"]["scripts"]
    # The project itself is installed (in some stage).
    assert any(kw == "RUN" and re.search(r"\bpip install\b.*\s'?\.(\[[a-z,-]+\])?'?(\s|$)", args + " ")
               for kw, args in dockerfile_instructions())
    users = [args for kw, args in stage if kw == "USER"]
    assert users, "the runtime image runs as root"
    assert users[-1].split(":")[0] not in ("root", "0")


def test_setup_registers_the_search_attributes(setup_service, worker):
    _, service = setup_service
    # `agent-memory register-search-attributes` (the Dockerfile's entrypoint) registers the
    # registry of agent_memory/core/contract.py: no list of attributes to keep in step here.
    assert "entrypoint" not in service
    assert argv(service.get("command")) == ["register-search-attributes"]
    assert str(service.get("restart", "no")).split(":")[0] in ("no", "on-failure"), "a one-shot must not loop"
    from agent_memory.cli import build_cli
    from agent_memory.cli.core import parse_args

    assert parse_args(build_cli(), ["register-search-attributes"]).command == "register-search-attributes"
    depends = service.get("depends_on") or {}
    assert "temporal" in depends
    settings = Settings.from_env({k: interpolate(v) for k, v in environment(service).items()})
    assert settings.temporal_address == "temporal:7233"
    assert settings.temporal_namespace == Settings.from_env({k: interpolate(v) for k, v in
                                                             environment(worker).items()}).temporal_namespace
    # The names the embedded dev server registers are the registry's too.
    assert tuple(SEARCH_ATTRIBUTES) == tuple(key.name for key in contract.SEARCH_ATTRIBUTES)


def test_settings_from_the_worker_environment(worker):
    env = {key: interpolate(value) for key, value in environment(worker).items()}
    settings = Settings.from_env(env)
    assert settings.temporal_address == "temporal:7233"
    assert settings.database_url and settings.redis_url
    # Rotatable keys in their own volume, not in the environment and not beside the database.
    assert settings.key_dir is not None and settings.master_key is None
    assert any(v.split(":")[1] == str(settings.key_dir) for v in worker.get("volumes", []))
    assert settings.database_admin_url is None, "the worker must not hold the owner role's URL"

    app = urlsplit(settings.database_url)
    assert app.scheme in ("postgresql", "postgres")
    assert app.username == APP_ROLE, "DATABASE_URL must use the RLS-confined application role"
    assert app.hostname == "postgres" and app.path == f"/{DATABASE_NAME}" and app.password

    redis = urlsplit(settings.redis_url)
    assert redis.scheme == "redis" and redis.hostname == "redis"
    assert redis.password, "Redis requires a password (requirepass); REDIS_URL must carry it"


@pytest.mark.parametrize("service, key", [("worker", "DATABASE_URL"), ("migrate", "DATABASE_URL"),
                                          ("migrate", "DATABASE_ADMIN_URL")])
def test_database_passwords_are_the_ones_postgres_provisions(compose_services, init_scripts, service, key):
    postgres_env = environment(compose_services["postgres"])
    scripts = "\n".join(p.read_text(encoding="utf-8") for p in init_scripts)
    m = re.fullmatch(r"postgres(?:ql)?://[^:@/]+:(?P<password>\$\{(?P<var>\w+)[^}]*\})@.+",
                     environment(compose_services[service])[key])
    assert m, f"{service}'s {key} takes no password from an interpolated variable"
    # Same variable, same required-variable form: otherwise a fresh deployment cannot log in.
    assert postgres_env.get(m["var"]) == m["password"], f"postgres is not given {m['var']} as {key} uses it"
    assert m["var"] in scripts, f"no init script reads {m['var']}"


def test_postgres_init_script_provisions_database_role_and_extension(compose_services, init_scripts):
    postgres = compose_services["postgres"]
    assert "pg_isready" in " ".join(argv(postgres["healthcheck"]["test"]))
    assert any(":/var/lib/postgresql" in str(v) for v in postgres.get("volumes") or []), "no data volume"

    text = "\n".join(p.read_text(encoding="utf-8") for p in init_scripts)
    sql_text = re.sub(r"\s+", " ", text)
    assert re.search(rf"CREATE DATABASE {DATABASE_NAME}\b", sql_text, re.I)
    assert re.search(r"CREATE EXTENSION IF NOT EXISTS vector\b", sql_text, re.I)
    role = re.search(rf"ALTER ROLE {APP_ROLE} WITH ([^;]*);|CREATE ROLE {APP_ROLE} WITH ([^;]*);", sql_text, re.I)
    assert role, f"no init script gives {APP_ROLE} its attributes"
    attributes = (role.group(1) or role.group(2)).upper().split()
    for attribute in ("LOGIN", "NOSUPERUSER", "NOBYPASSRLS", "PASSWORD"):
        assert attribute in attributes, f"{APP_ROLE} lacks {attribute}"

    for script in init_scripts:
        if script.suffix == ".sh":
            # The postgres entrypoint runs executable scripts and sources the others.
            assert script.stat().st_mode & stat.S_IXUSR, f"{script} is not executable"
            result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert result.returncode == 0, result.stderr


def test_temporal_uses_its_own_databases_on_the_same_postgres(compose_services, init_scripts):
    temporal = compose_services["temporal"]
    env = environment(temporal)
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgres"
    databases = {env.get("DBNAME", "temporal"), env.get("VISIBILITY_DBNAME", "temporal_visibility")}
    assert DATABASE_NAME not in databases
    assert env["POSTGRES_PWD"] == environment(compose_services["postgres"]).get("TEMPORAL_DB_PASSWORD")
    depends = temporal.get("depends_on")
    assert isinstance(depends, dict) and depends["postgres"]["condition"] == "service_healthy"
    if env.get("SKIP_DB_CREATE") == "true":
        text = "\n".join(p.read_text(encoding="utf-8") for p in init_scripts)
        for database in databases:
            assert re.search(rf"CREATE DATABASE {database}\b", text), f"nothing creates database {database}"


def test_temporal_ui_and_redis(compose_services):
    ui = compose_services["temporal-ui"]
    assert environment(ui)["TEMPORAL_ADDRESS"] == "temporal:7233"
    # The UI has no login: published on loopback only (an authenticating proxy goes in front).
    assert "127.0.0.1:8233:8080" in [str(p) for p in ui.get("ports") or []]
    redis = compose_services["redis"]
    command = argv(redis.get("command"))
    assert "--appendonly" in command and command[command.index("--appendonly") + 1] == "yes"
    assert any(str(v).endswith(":/data") for v in redis.get("volumes") or [])


def test_redis_requires_the_password_the_worker_sends(compose_services, worker):
    command = argv(compose_services["redis"].get("command"))
    assert "--requirepass" in command, "Redis runs without a password"
    required = command[command.index("--requirepass") + 1]
    m = re.fullmatch(r"redis://:(?P<password>\$\{\w+[^}]*\})@redis:6379/\d+", environment(worker)["REDIS_URL"])
    assert m and m["password"] == required, "REDIS_URL does not carry the password Redis requires"
    assert "REDIS_PASSWORD" in " ".join(argv(compose_services["redis"]["healthcheck"]["test"]))


def test_every_published_port_is_loopback_only(compose_services):
    published = {}
    for name, service in compose_services.items():
        # Host networking would put a service's every listening port on the host's interfaces.
        assert service.get("network_mode") in (None, "none"), f"{name} uses network_mode {service['network_mode']}"
        for port in service.get("ports") or []:
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond this host"
            published.setdefault(name, []).append(str(port))
    # Temporal (mutual TLS), its UI (no login: a proxy goes in front) and the API (API keys); with
    # the `observability` profile Prometheus, Grafana (its admin password) and Jaeger's UI: no more.
    assert published == {"temporal": ["127.0.0.1:7233:7233"], "temporal-ui": ["127.0.0.1:8233:8080"],
                         "api": ["127.0.0.1:8765:8765"], "prometheus": ["127.0.0.1:9090:9090"],
                         "grafana": ["127.0.0.1:3000:3000"], "jaeger": ["127.0.0.1:16686:16686"]}


SECRET_NAME = re.compile(r"PASSWORD|PWD|(^|_)KEY$|SECRET|TOKEN")


def test_secrets_have_no_defaults_and_are_required():
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    assert "change-me" not in text.lower(), "a placeholder password remains"
    uses = [m for m in _INTERPOLATION.finditer(text) if m.group("name") or m.group("bare")]
    secrets = {m.group("name") or m.group("bare") for m in uses if SECRET_NAME.search(m.group("name") or m.group("bare"))}
    assert {"POSTGRES_PASSWORD", "AGENT_MEMORY_OWNER_PASSWORD", "AGENT_MEMORY_APP_PASSWORD", "TEMPORAL_DB_PASSWORD",
            "REDIS_PASSWORD"} <= secrets
    header = text.split("\nname:", 1)[0]
    for m in uses:
        name = m.group("name") or m.group("bare")
        if name in secrets:
            # ${VAR:?message}: compose refuses to start when it is unset or empty; never a default.
            assert m.group("op") == ":?", f"{m.group(0)}: use ${{{name}:?set {name}: see the top of this file}}"
            assert m.group("arg").startswith(f"set {name}"), m.group(0)
            assert name in header, f"the top of docker-compose.yml does not explain {name}"


def test_interpolation_helper():
    assert interpolate("a${X:-d}b") == "adb"
    assert interpolate("${X:?msg}") == "dummy-x"
    assert interpolate("$${X}") == "${X}"
    assert interpolate("$NAME/${OTHER-x}") == "dummy-name/x"


def test_postgres_runs_with_a_buffer_cache_sized_for_vector_search(compose_services):
    """PostgreSQL's 128 MB default missed 40% of the pages an HNSW search of a large subject reads."""
    command = [interpolate(part) for part in compose_services["postgres"]["command"]]
    assert command[0] == "postgres"
    assert "shared_buffers=1GB" in command, command
    # Room in the lock table for a query over all of memory_vectors' partitions (migration 030).
    assert f"max_locks_per_transaction={POSTGRES_MAX_LOCKS_PER_TRANSACTION}" in command, command


# --- Temporal's mutual TLS -----------------------------------------------------------------------

CERTS_SERVICE = "temporal-certs"
# Every service that calls Temporal, and the volume its certificate set comes from.
TEMPORAL_CLIENTS = {"temporal": "temporal-tls-server", "temporal-ui": "temporal-tls-ui",
                    "temporal-setup": "temporal-tls-client", "worker": "temporal-tls-client",
                    "api": "temporal-tls-client"}


def volume_mounts(service: dict) -> dict[str, tuple[str, bool]]:
    """source -> (target, read_only) of a service's named-volume and bind mounts."""
    mounts = {}
    for volume in service.get("volumes") or []:
        if isinstance(volume, dict):
            mounts[volume["source"]] = (volume["target"], bool(volume.get("read_only")))
        else:
            parts = str(volume).split(":")
            if len(parts) > 1:
                mounts[parts[0]] = (parts[1], len(parts) > 2 and "ro" in parts[2].split(","))
    return mounts


def runs_as(service: dict) -> tuple[int, int]:
    """The uid:gid a service runs as: its `user:`, else (built from the Dockerfile) the USER there."""
    if "user" in service:
        uid, _, gid = str(service["user"]).partition(":")
        return int(uid), int(gid)
    assert service.get("build"), "an image's default user cannot be read here: set `user:`"
    text = " ".join(args for kw, args in final_stage() if kw == "RUN")
    uid = re.search(r"useradd [^&]*--uid (\d+)", text)
    gid = re.search(r"groupadd [^&]*--gid (\d+)", text)
    assert uid and gid, "the Dockerfile's user has no fixed uid/gid"
    return int(uid[1]), int(gid[1])


def certs_arguments(compose_services) -> argparse.Namespace:
    from agent_memory.security.temporal_certs import build_parser

    entrypoint = argv(compose_services[CERTS_SERVICE].get("entrypoint"))
    assert entrypoint[:3] == ["python", "-m", "agent_memory.security.temporal_certs"], entrypoint
    return build_parser().parse_args(entrypoint[3:])


def tls_file_in(service: dict, path: str, volume: str) -> bool:
    target, read_only = volume_mounts(service).get(volume, (None, False))
    return target is not None and read_only and str(Path(path).parent) == target.rstrip("/")


def test_temporal_requires_client_certificates(compose_services):
    temporal = compose_services["temporal"]
    env = environment(temporal)
    # The frontend (and internode) TLS refuses a client without a certificate signed by the CA.
    assert env.get("TEMPORAL_TLS_REQUIRE_CLIENT_AUTH") == "true"
    volume = TEMPORAL_CLIENTS["temporal"]
    for name in ("TEMPORAL_TLS_SERVER_CERT", "TEMPORAL_TLS_SERVER_KEY", "TEMPORAL_TLS_FRONTEND_CERT",
                 "TEMPORAL_TLS_FRONTEND_KEY", "TEMPORAL_TLS_SERVER_CA_CERT", "TEMPORAL_TLS_CLIENT1_CA_CERT"):
        assert tls_file_in(temporal, env.get(name, ""), volume), f"temporal's {name} is not a file of {volume}"
    assert env["TEMPORAL_TLS_CLIENT1_CA_CERT"].endswith("/ca.pem")
    assert env.get("TEMPORAL_TLS_CLIENT2_CA_CERT", env["TEMPORAL_TLS_CLIENT1_CA_CERT"]).endswith("/ca.pem")
    # No inline (environment) certificates or keys beside the files.
    assert not [name for name in env if name.startswith("TEMPORAL_TLS_") and name.endswith("_DATA")]
    from agent_memory.security.temporal_certs import SERVER_ALT_NAMES, SERVER_NAME

    # Its nodes verify each other by the certificate's name, which is the compose service's name.
    assert "temporal" in SERVER_ALT_NAMES and SERVER_NAME == "temporal"
    for name in ("TEMPORAL_TLS_INTERNODE_SERVER_NAME", "TEMPORAL_TLS_FRONTEND_SERVER_NAME"):
        assert env.get(name) == SERVER_NAME, name
    for name in ("TEMPORAL_TLS_INTERNODE_DISABLE_HOST_VERIFICATION", "TEMPORAL_TLS_FRONTEND_DISABLE_HOST_VERIFICATION"):
        assert env.get(name, "false") == "false", name
    # The server warns of expiry from the day temporal-certs would renew at a start.
    from agent_memory.security.temporal_certs import RENEW_BEFORE

    assert env.get("TEMPORAL_TLS_EXPIRATION_CHECKS_WARNING_WINDOW") == f"{int(RENEW_BEFORE.total_seconds() // 3600)}h"
    assert env.get("TEMPORAL_TLS_EXPIRATION_CHECKS_CHECK_INTERVAL")


@pytest.mark.parametrize("name", sorted(TEMPORAL_CLIENTS))
def test_every_temporal_client_presents_a_client_certificate(compose_services, name):
    service = compose_services[name]
    env = environment(service)
    volume = TEMPORAL_CLIENTS[name]
    if name == "temporal-ui":  # the UI server's own variables (temporalio/ui config template)
        cert, key, ca = env.get("TEMPORAL_TLS_CERT"), env.get("TEMPORAL_TLS_KEY"), env.get("TEMPORAL_TLS_CA")
        assert env.get("TEMPORAL_TLS_ENABLE_HOST_VERIFICATION") == "true"
        server_name = env.get("TEMPORAL_TLS_SERVER_NAME")
    elif name == "temporal":  # the image's setup script, through the temporal CLI
        cert, key = env.get("TEMPORAL_TLS_CLIENT_CERT_PATH"), env.get("TEMPORAL_TLS_CLIENT_KEY_PATH")
        ca, server_name = env.get("TEMPORAL_TLS_SERVER_CA_CERT_PATH"), env.get("TEMPORAL_TLS_SERVER_NAME")
        assert env.get("TEMPORAL_ADDRESS") == "temporal:7233"
    else:  # agent-memory: what agent_memory.core.settings makes of the service's environment
        settings = Settings.from_env({k: interpolate(v) for k, v in env.items()})
        assert settings.temporal_address == "temporal:7233"
        cert, key, ca = settings.temporal_tls_cert, settings.temporal_tls_key, settings.temporal_tls_ca
        server_name = settings.temporal_tls_server_name
        # Temporal's standard names, which the temporal CLI in the same container reads too.
        assert {"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH",
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH"} <= set(env)
    for label, path in (("certificate", cert), ("key", key), ("CA", ca)):
        assert path and tls_file_in(service, path, volume), f"{name}'s client {label} is not a file of {volume} (ro)"
    assert server_name == "temporal", f"{name} does not verify the server's name"
    if name != "temporal":
        assert Path(cert or "").name == "client.pem" and Path(key or "").name == "client.key"
    depends = service.get("depends_on") or {}
    assert isinstance(depends, dict) and depends.get(CERTS_SERVICE, {}).get("condition") == \
        "service_completed_successfully", f"{name} may start before its certificates exist"


def test_only_the_listed_services_talk_to_temporal(compose_services):
    talking = {name for name, service in compose_services.items()
               if any("temporal:7233" in value for value in environment(service).values())}
    assert talking == set(TEMPORAL_CLIENTS), "a service calls Temporal without a certificate set of its own"


def test_the_certificates_are_made_private_to_the_one_service_that_reads_them(compose_services):
    from agent_memory.security.temporal_certs import DIRECTORIES

    certs = compose_services[CERTS_SERVICE]
    args = certs_arguments(compose_services)
    assert not args.rotate and not args.rotate_ca, "a start must not rotate: it would break running clients"
    # One volume per directory, under the directory the program writes.
    mounts = volume_mounts(certs)
    by_directory = {Path(target).name: source for source, (target, _) in mounts.items()
                    if Path(target).parent == args.directory}
    assert set(by_directory) == set(DIRECTORIES)
    # The CA's key is in a volume no other service mounts.
    ca_volume = by_directory["ca"]
    assert [name for name, service in compose_services.items() if ca_volume in volume_mounts(service)] == [CERTS_SERVICE]
    # Each set is owned by the user of every service that mounts it (0700 directory, 0600 files),
    # and mounted read-only there.
    owners = dict(args.owner)
    assert "ca" not in owners, "the CA's directory stays root's"
    for directory, volume in by_directory.items():
        if directory == "ca":
            continue
        readers = [name for name, service in compose_services.items()
                   if name != CERTS_SERVICE and volume in volume_mounts(service)]
        assert readers, f"nothing mounts {volume}"
        for reader in readers:
            assert volume_mounts(compose_services[reader])[volume][1], f"{reader} mounts {volume} writable"
            assert runs_as(compose_services[reader]) == owners.get(directory), \
                f"{volume} is owned by {owners.get(directory)}, {reader} runs as {runs_as(compose_services[reader])}"
    assert {TEMPORAL_CLIENTS[name] for name in TEMPORAL_CLIENTS} == {v for d, v in by_directory.items() if d != "ca"}
    # A one-shot with no network: it only writes files.
    assert certs.get("network_mode") == "none" and not certs.get("ports")
    assert str(certs.get("restart", "no")) == "no"
    assert certs.get("build") == compose_services["worker"].get("build")
    assert runs_as(certs) == (0, 0), "chown to each service's user needs root"


def test_the_certificates_program_runs_with_the_compose_arguments(compose_services, tmp_path):
    from agent_memory.security import temporal_certs

    owners = dict(certs_arguments(compose_services).owner)
    if os.geteuid() != 0:  # chown to another user needs root; the rest is the same
        owners = dict.fromkeys(owners, (os.getuid(), os.getgid()))
    options = [part for name, (uid, gid) in owners.items() for part in ("--owner", f"{name}={uid}:{gid}")]
    assert temporal_certs.main([str(tmp_path), *options]) == 0
    for name, owner in owners.items():
        for path in [tmp_path / name, *(tmp_path / name).iterdir()]:
            assert (path.stat().st_uid, path.stat().st_gid) == owner
            assert path.stat().st_mode & 0o777 == (0o700 if path.is_dir() else 0o600)


# --- the `observability` profile: Prometheus, Grafana, the OpenTelemetry collector, Jaeger ---------

PROFILE = "observability"
PROFILE_SERVICES = {"prometheus", "grafana", "otel-collector", "jaeger"}


def bind_mounts(service: dict) -> dict[str, Path]:
    """target -> the repository path of a service's bind mounts (`./...:target[:ro]`)."""
    mounts = {}
    for volume in service.get("volumes") or []:
        source, target = str(volume).split(":")[:2]
        if source.startswith("."):
            mounts[target] = (ROOT / source).resolve()
    return mounts


def mounted_file(service: dict, path: str) -> Path:
    """The repository file a path inside a service's container is, through its bind mounts."""
    for target, source in bind_mounts(service).items():
        if path == target:
            return source
        if path.startswith(target.rstrip("/") + "/"):
            return source / path[len(target.rstrip("/")) + 1:]
    raise AssertionError(f"{path} is not in a bind mount of the service")


def secret_paths(compose: dict, service: dict) -> dict[str, Path]:
    """/run/secrets/NAME -> the repository file of each secret a service is given."""
    return {f"/run/secrets/{name}": (ROOT / compose["secrets"][name]["file"]).resolve()
            for name in service.get("secrets") or []}


def flag(command: list[str], name: str) -> str:
    values = [part.split("=", 1)[1] for part in command if part.startswith(f"{name}=")]
    assert len(values) == 1, f"{name} is not given once in {command}"
    return values[0]


def test_the_observability_services_start_only_with_their_profile(compose_services):
    in_profile = {name for name, service in compose_services.items() if service.get("profiles")}
    assert in_profile == PROFILE_SERVICES
    for name in PROFILE_SERVICES:
        assert compose_services[name]["profiles"] == [PROFILE], name
        assert ":" in compose_services[name]["image"] and not compose_services[name]["image"].endswith(":latest")
    # The default services never wait for one of the profile's: `docker compose up` runs without it.
    for name, service in compose_services.items():
        if name not in PROFILE_SERVICES:
            assert not set(service.get("depends_on") or {}) & PROFILE_SERVICES, name
    assert compose_services["prometheus"]["image"].startswith("prom/prometheus:")
    assert compose_services["grafana"]["image"].startswith("grafana/grafana:")
    assert compose_services["otel-collector"]["image"].startswith("otel/opentelemetry-collector-contrib:")


def test_the_profile_mounts_files_of_the_repository(compose, compose_services):
    for name in PROFILE_SERVICES:
        for target, source in bind_mounts(compose_services[name]).items():
            assert source.exists() and source.is_relative_to(ROOT), f"{name} mounts {source}, which does not exist"
            assert next(v for v in compose_services[name]["volumes"] if str(v).split(":")[1] == target).endswith(":ro"), \
                f"{name} mounts {target} writable"
    # The secrets' files are the operator's to create, in a folder whose every file but its
    # .gitignore git ignores.
    secrets = ROOT / "deploy" / "secrets"
    ignore = [line for line in (secrets / ".gitignore").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#")]
    assert ignore == ["*", "!.gitignore"], ignore
    for secret in compose["secrets"].values():
        assert (ROOT / secret["file"]).resolve().parent == secrets


def test_prometheus_scrapes_the_api_and_every_worker_and_loads_the_alert_rules(compose, compose_services, worker):
    prometheus = compose_services["prometheus"]
    command = argv(prometheus["command"])
    config_file = mounted_file(prometheus, flag(command, "--config.file"))
    assert config_file == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    rules = [mounted_file(prometheus, path) for path in config["rule_files"]]
    assert rules == [ROOT / "deploy" / "prometheus" / "alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}

    # The API's /metrics with an operator key, from a secret file Prometheus is given.
    api = jobs["agent-memory-api"]
    assert api["metrics_path"] == "/metrics"
    assert api["static_configs"] == [{"targets": ["api:8765"]}]
    assert argv(compose_services["api"]["command"])[-2:] == ["--port", "8765"]
    assert api["authorization"]["type"] == "Bearer"
    assert api["authorization"]["credentials_file"] in secret_paths(compose, prometheus)

    # Each worker replica's metrics port, on all its interfaces of the compose network, never published.
    settings = Settings.from_env({k: interpolate(v) for k, v in environment(worker).items()})
    workers = jobs["agent-memory-worker"]
    assert workers["dns_sd_configs"] == [{"names": ["worker"], "type": "A", "port": settings.metrics_port,
                                          "refresh_interval": "30s"}]
    assert settings.metrics_host == "0.0.0.0" and "ports" not in worker


def test_grafana_provisions_the_prometheus_source_and_the_dashboards(compose, compose_services):
    grafana = compose_services["grafana"]
    env = environment(grafana)
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] in secret_paths(compose, grafana), "Grafana's admin password"
    assert mounted_file(grafana, env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]).is_file()
    provisioning = mounted_file(grafana, "/etc/grafana/provisioning")
    sources = yaml.safe_load((provisioning / "datasources" / "datasources.yml").read_text(encoding="utf-8"))
    prometheus = next(source for source in sources["datasources"] if source["type"] == "prometheus")
    assert prometheus["url"] == "http://prometheus:9090" and prometheus["isDefault"]
    assert "127.0.0.1:9090:9090" in compose_services["prometheus"]["ports"]
    providers = yaml.safe_load((provisioning / "dashboards" / "dashboards.yml").read_text(encoding="utf-8"))
    (provider,) = providers["providers"]
    folder = mounted_file(grafana, provider["options"]["path"])
    dashboards = sorted(folder.glob("*.json"))
    assert dashboards, f"no dashboard in {folder}"
    for dashboard in dashboards:
        panels = json.loads(dashboard.read_text(encoding="utf-8"))["panels"]
        # Every panel's queries go to the provisioned Prometheus.
        for panel in panels:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == prometheus["uid"], panel["title"]


def test_traces_go_to_the_collector_only_when_asked(compose_services, worker):
    collector = compose_services["otel-collector"]
    config = yaml.safe_load(mounted_file(collector, flag(argv(collector["command"]), "--config"))
                            .read_text(encoding="utf-8"))
    # OTLP over HTTP (the product's exporter), on the port the top of docker-compose.yml names.
    endpoint = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert endpoint == "0.0.0.0:4318" and "grpc" not in config["receivers"]["otlp"]["protocols"]
    header = COMPOSE_FILE.read_text(encoding="utf-8").split("\nname:", 1)[0]
    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318 docker compose --profile observability up" in header
    # The traces pipeline exports to a service of the profile.
    (pipeline,) = config["service"]["pipelines"].values()
    assert pipeline["receivers"] == ["otlp"]
    for exporter in pipeline["exporters"]:
        host = config["exporters"][exporter]["endpoint"].split(":")[0]
        assert host in PROFILE_SERVICES, exporter
    # The app services read the endpoint from the operator's environment: unset, it is empty and
    # no trace leaves them (tracing.py turns tracing on only for a non-empty endpoint).
    for name in ("worker", "api"):
        env = environment(compose_services[name])
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-}", name
        assert interpolate(env["OTEL_EXPORTER_OTLP_ENDPOINT"]) == ""
        assert env["OTEL_SERVICE_NAME"] == f"agent-memory-{name}"
