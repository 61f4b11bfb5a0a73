"""Temporal over mutual TLS, as docker-compose.yml runs it: the certificates `temporal-certs` makes
(agent_memory.security.temporal_certs), and the project's connect code presenting its client certificate
to an endpoint that requires one.

The embedded dev server has no TLS of its own, so a TLS endpoint with the compose Temporal's
settings (its server certificate, client certificates required and verified against the CA) is put
in front of it: a real TLS handshake over real sockets, forwarding the decrypted gRPC stream to the
dev server. A client without a certificate, with one from another CA, or speaking plaintext is
refused in the handshake; the project's client with the certificate reaches Temporal.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_memory.api.search_attributes import register_search_attributes_command
from agent_memory.api.services import connect_temporal, temporal_connect_options
from agent_memory.core.settings import Settings
from agent_memory.security import temporal_certs
from agent_memory.security.temporal_certs import SERVER_NAME, ensure_certificates

REFUSED_WITHIN = 30.0  # seconds a refused client may take to give up


class MutualTlsEndpoint:
    """A TLS endpoint on 127.0.0.1 that requires a client certificate signed by `client_ca` and
    forwards each accepted connection to `target` (its own event loop, in a thread)."""

    def __init__(self, target: tuple[str, int], server_cert: Path, server_key: Path, client_ca: Path):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
        context.load_cert_chain(str(server_cert), str(server_key))
        context.verify_mode = ssl.CERT_REQUIRED
        context.set_alpn_protocols(["h2"])
        self.context, self.target = context, target
        self.accepted: list[str] = []  # the client certificates' common names
        self.refused: list[str] = []  # why each refused handshake failed
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MutualTlsEndpoint:
        self._thread.start()
        assert self._ready.wait(10), "the TLS endpoint did not start"
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def refusals(self) -> list[str]:
        """The refused handshakes' reasons, once there is one (the client may see the refusal first)."""
        for _ in range(100):
            if self.refused:
                break
            await asyncio.sleep(0.05)
        return self.refused

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        # Stopped: close the listener and every connection still open, then the loop.
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await writer.start_tls(self.context, ssl_handshake_timeout=10)
        except (TimeoutError, ssl.SSLError, OSError) as exc:
            self.refused.append(f"{type(exc).__name__}: {exc}")
            writer.transport.abort()
            return
        # Temporal's gRPC server (grpc-go) refuses a TLS connection that did not negotiate HTTP/2.
        protocol = writer.get_extra_info("ssl_object").selected_alpn_protocol()
        if protocol != "h2":
            self.refused.append(f"ALPN {protocol!r}, not h2")
            writer.transport.abort()
            return
        peer = writer.get_extra_info("peercert") or {}
        self.accepted.append(dict(pair[0] for pair in peer.get("subject", ()))["commonName"])
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, ssl.SSLError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("temporal-tls")
    assert ensure_certificates(root)["issued"] == ["ca", "server", "ui", "client"]
    return root


@pytest.fixture
def endpoint(services, certificates):
    host, port = services.settings.temporal_address.rsplit(":", 1)
    server = certificates / "server"
    # As docker-compose.yml configures Temporal: its certificate, and the CA it verifies clients by.
    with MutualTlsEndpoint((host, int(port)), server / "server.pem", server / "server.key",
                           server / "ca.pem") as tls:
        yield tls


def client_env(certificates: Path, home: Path, port: int, directory: str = "client", **extra: str) -> dict[str, str]:
    files = certificates / directory
    return {"AGENT_MEMORY_HOME": str(home), "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(files / "client.pem"),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(files / "client.key"),
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(files / "ca.pem"),
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME, **extra}


async def refused_connect(settings: Settings) -> BaseException:
    """The exception Client.connect raises for these settings (it must raise)."""
    try:
        await asyncio.wait_for(Client.connect(settings.temporal_address or "", **temporal_connect_options(settings)),
                               REFUSED_WITHIN)
    except TimeoutError:
        pytest.fail("the client hung instead of being refused")
    except RuntimeError as exc:  # the SDK's connection failure
        return exc
    pytest.fail("the client connected")


async def test_the_project_client_with_its_certificate_reaches_temporal(services, certificates, endpoint, tmp_path):
    settings = Settings.from_env(client_env(certificates, tmp_path, endpoint.port))
    client = await connect_temporal(settings, pydantic_data_converter)
    info = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
    assert info.namespace_info.name == "default"
    assert endpoint.accepted and set(endpoint.accepted) == {"agent-memory"}, endpoint.accepted
    assert not endpoint.refused, endpoint.refused
    # The UI's certificate is a client certificate of the same CA: accepted too.
    ui = Settings.from_env(client_env(certificates, tmp_path, endpoint.port, "ui"))
    await Client.connect(ui.temporal_address or "", **temporal_connect_options(ui))
    assert endpoint.accepted[-1] == "temporal-ui"


async def test_a_client_without_a_certificate_is_refused(services, certificates, endpoint, tmp_path):
    env = client_env(certificates, tmp_path, endpoint.port)
    del env["TEMPORAL_TLS_CLIENT_CERT_PATH"], env["TEMPORAL_TLS_CLIENT_KEY_PATH"]
    settings = Settings.from_env(env)
    assert temporal_connect_options(settings)["tls"].client_cert is None  # TLS, verifying the server, no cert
    await refused_connect(settings)
    assert not endpoint.accepted
    refused = await endpoint.refusals()
    assert refused and all("CERTIFICATE" in why.upper() for why in refused), refused


async def test_a_certificate_of_another_ca_is_refused(services, certificates, endpoint, tmp_path):
    other = tmp_path / "other-ca"
    ensure_certificates(other)
    env = client_env(certificates, tmp_path, endpoint.port,
                     TEMPORAL_TLS_CLIENT_CERT_PATH=str(other / "client" / "client.pem"),
                     TEMPORAL_TLS_CLIENT_KEY_PATH=str(other / "client" / "client.key"))
    await refused_connect(Settings.from_env(env))
    assert not endpoint.accepted
    refused = await endpoint.refusals()
    assert refused and all("CERTIFICATE" in why.upper() for why in refused), refused


async def test_a_plaintext_client_is_refused(services, endpoint, tmp_path):
    settings = Settings.from_env({"AGENT_MEMORY_HOME": str(tmp_path), "TEMPORAL_ADDRESS": f"127.0.0.1:{endpoint.port}"})
    assert "tls" not in temporal_connect_options(settings)
    await refused_connect(settings)
    assert await endpoint.refusals() and not endpoint.accepted


async def test_the_client_refuses_a_server_not_named_as_configured(services, certificates, endpoint, tmp_path):
    # The client verifies the server too: a certificate for `temporal` does not pass for another name.
    env = client_env(certificates, tmp_path, endpoint.port, TEMPORAL_TLS_SERVER_NAME="elsewhere.example")
    await refused_connect(Settings.from_env(env))
    assert not endpoint.accepted


async def test_register_search_attributes_over_mutual_tls(services, certificates, endpoint, tmp_path, capsys):
    # What the compose `temporal-setup` service runs, with the environment it is given there.
    settings = Settings.from_env(client_env(certificates, tmp_path, endpoint.port))
    assert await register_search_attributes_command(settings) == 0
    assert "already registered" in capsys.readouterr().out
    assert endpoint.accepted and set(endpoint.accepted) == {"agent-memory"}


def test_the_certificates_are_private_and_fit_for_their_use(certificates):
    for directory in temporal_certs.DIRECTORIES:
        path = certificates / directory
        assert path.stat().st_mode & 0o777 == 0o700, f"{path} is not 0700"
        for file in path.iterdir():
            assert file.stat().st_mode & 0o777 == 0o600, f"{file} is not 0600"
    # The CA's key is in the CA's directory only: no service's set carries it.
    assert sorted(p.name for p in (certificates / "ca").iterdir()) == ["ca.key", "ca.pem"]
    assert sorted(p.name for p in (certificates / "server").iterdir()) == ["ca.pem", "server.key", "server.pem"]
    for directory in ("ui", "client"):
        assert sorted(p.name for p in (certificates / directory).iterdir()) == ["ca.pem", "client.key", "client.pem"]

    ca = x509.load_pem_x509_certificate((certificates / "ca" / "ca.pem").read_bytes())
    server = x509.load_pem_x509_certificate((certificates / "server" / "server.pem").read_bytes())
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert SERVER_NAME in names.get_values_for_type(x509.DNSName)
    # Temporal's nodes present the server certificate as clients of each other (internode, the
    # system worker calling the frontend): it is a client certificate too.
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= set(usages)
    for directory, common_name in (("ui", "temporal-ui"), ("client", "agent-memory")):
        cert = x509.load_pem_x509_certificate((certificates / directory / "client.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
        assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
            ExtendedKeyUsageOID.CLIENT_AUTH]
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert (certificates / directory / "ca.pem").read_bytes() == (certificates / "ca" / "ca.pem").read_bytes()


def test_a_second_run_keeps_what_is_current_and_renews_what_is_not(tmp_path):
    first = ensure_certificates(tmp_path)
    assert first == {"issued": ["ca", "server", "ui", "client"], "kept": []}
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.pem")}
    assert ensure_certificates(tmp_path) == {"issued": [], "kept": ["ca", "server", "ui", "client"]}
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.pem")} == before
    # Within RENEW_BEFORE of the leaves' expiry (not the CA's): the leaves are re-issued.
    late = dt.datetime.now(dt.UTC) + dt.timedelta(days=temporal_certs.LEAF_DAYS) - temporal_certs.RENEW_BEFORE
    assert ensure_certificates(tmp_path, now=late) == {"issued": ["server", "ui", "client"], "kept": ["ca"]}
    # --rotate-ca: a new CA, and every certificate re-issued under it.
    old_ca = (tmp_path / "ca" / "ca.pem").read_bytes()
    assert ensure_certificates(tmp_path, rotate=True, rotate_ca=True)["issued"] == ["ca", "server", "ui", "client"]
    ca = x509.load_pem_x509_certificate((tmp_path / "ca" / "ca.pem").read_bytes())
    assert ca.public_bytes(Encoding.PEM) != old_ca
    for leaf in temporal_certs.LEAVES:
        x509.load_pem_x509_certificate((tmp_path / leaf.directory / f"{leaf.stem}.pem").read_bytes()
                                       ).verify_directly_issued_by(ca)


def test_a_leaf_signed_by_another_ca_is_re_issued(tmp_path):
    ensure_certificates(tmp_path)
    (tmp_path / "client" / "client.pem").write_bytes(b"")  # unreadable: re-issued
    other = tmp_path / "other"
    ensure_certificates(other)
    for name in ("server.pem", "server.key"):
        (tmp_path / "server" / name).write_bytes((other / "server" / name).read_bytes())
    assert ensure_certificates(tmp_path) == {"issued": ["server", "client"], "kept": ["ca", "ui"]}


def test_owners_are_set_on_each_directory_and_its_files(tmp_path):
    me = (os.getuid(), os.getgid())
    ensure_certificates(tmp_path, {"client": me})
    for path in [tmp_path / "client", *(tmp_path / "client").iterdir()]:
        assert (path.stat().st_uid, path.stat().st_gid) == me
    with pytest.raises(ValueError, match="--owner names nobody: the directories are ca, server, ui, client"):
        ensure_certificates(tmp_path, {"nobody": me})
