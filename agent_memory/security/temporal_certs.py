"""Certificates for Temporal's mutual TLS in docker-compose: a private CA, the server's certificate
(frontend and internode) and the clients' certificates, each set in its own directory.

    python -m agent_memory.security.temporal_certs DIR [--owner NAME=UID:GID ...] [--rotate] [--rotate-ca]

DIR holds one directory per holder; compose mounts each as its own volume into the one service
that uses it (docker-compose.yml, `temporal-certs`):

    ca/      ca.pem, ca.key                 the CA's key: only this program ever reads it
    server/  ca.pem, server.pem, server.key the Temporal server (frontend, internode, its own CLI)
    ui/      ca.pem, client.pem, client.key temporal-ui
    client/  ca.pem, client.pem, client.key agent-memory (worker, api, temporal-setup, the CLI)

Every directory is 0700 and every file 0600, owned by the --owner given for the directory (the
user its service runs as; chown needs root). A run issues only what is missing, signed by another
CA, or within RENEW_BEFORE of expiring, and keeps the rest, so it can run at every start: --rotate
re-issues the server's and clients' certificates, --rotate-ca the CA and everything it signed.
stdout carries one JSON object: what was issued and what was kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agent_memory.core.errors import InvalidInput

# The name clients verify the server by: the compose service's host name.
SERVER_NAME = "temporal"
# Also valid for clients on the compose host (the port is published on 127.0.0.1 only).
SERVER_ALT_NAMES = ("temporal", "localhost")
SERVER_ALT_IPS = ("127.0.0.1",)
CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class Leaf:
    directory: str
    stem: str  # <stem>.pem and <stem>.key
    common_name: str
    server: bool  # a server certificate (also a client one: Temporal's nodes call each other with it)


LEAVES = (
    Leaf("server", "server", SERVER_NAME, server=True),
    Leaf("ui", "client", "temporal-ui", server=False),
    Leaf("client", "client", "agent-memory", server=False),
)
DIRECTORIES = ("ca", *(leaf.directory for leaf in LEAVES))


def _write_private(path: Path, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write `data` to `path` as a 0600 file (replaced atomically), owned by `owner` if given."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    if owner is not None:
        os.chown(temp, *owner)
    temp.replace(path)


def _private_dir(path: Path, owner: tuple[int, int] | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        os.chown(path, *owner)
    path.chmod(0o700)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _issue_ca(now: dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agent-memory"),
                      x509.NameAttribute(NameOID.COMMON_NAME, "agent-memory Temporal CA")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _issue_leaf(leaf: Leaf, ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate,
                now: dt.datetime) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if leaf.server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agent-memory"),
                                        x509.NameAttribute(NameOID.COMMON_NAME, leaf.common_name)]))
               .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=LEAF_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if leaf.server:
        names: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVER_ALT_NAMES]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVER_ALT_IPS]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _load(cert_path: Path, key_path: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return None
    return key, cert


def _current(cert: x509.Certificate, now: dt.datetime) -> bool:
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - RENEW_BEFORE > now


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def ensure_certificates(root: Path, owners: dict[str, tuple[int, int]] | None = None, *, rotate: bool = False,
                        rotate_ca: bool = False, now: dt.datetime | None = None) -> dict[str, list[str]]:
    """Make or renew the CA and the certificates under `root` (see the module's docstring).
    Returns {"issued": [...], "kept": [...]}, by directory."""
    owners = owners or {}
    unknown = sorted(set(owners) - set(DIRECTORIES))
    if unknown:
        raise InvalidInput(f"--owner names {', '.join(unknown)}: the directories are {', '.join(DIRECTORIES)}")
    now = now or dt.datetime.now(dt.UTC)
    issued: list[str] = []
    kept: list[str] = []
    for name in DIRECTORIES:
        _private_dir(root / name, owners.get(name))

    ca_dir = root / "ca"
    loaded_ca = None if rotate_ca else _load(ca_dir / "ca.pem", ca_dir / "ca.key")
    if loaded_ca is None or not _current(loaded_ca[1], now):
        ca_key, ca = _issue_ca(now)
        _write_private(ca_dir / "ca.key", _key_pem(ca_key), owners.get("ca"))
        _write_private(ca_dir / "ca.pem", _cert_pem(ca), owners.get("ca"))
        issued.append("ca")
    else:
        ca_key, ca = loaded_ca
        kept.append("ca")

    for leaf in LEAVES:
        directory, owner = root / leaf.directory, owners.get(leaf.directory)
        cert_path, key_path = directory / f"{leaf.stem}.pem", directory / f"{leaf.stem}.key"
        loaded = None if rotate else _load(cert_path, key_path)
        if loaded is None or not _current(loaded[1], now) or not _signed_by(loaded[1], ca):
            key, cert = _issue_leaf(leaf, ca_key, ca, now)
            _write_private(key_path, _key_pem(key), owner)
            _write_private(cert_path, _cert_pem(cert), owner)
            issued.append(leaf.directory)
        else:
            kept.append(leaf.directory)
        # The CA certificate beside each set: what its holder verifies the other side by.
        _write_private(directory / "ca.pem", _cert_pem(ca), owner)
    return {"issued": issued, "kept": kept}


def _owner(value: str) -> tuple[str, tuple[int, int]]:
    name, sep, ids = value.partition("=")
    uid, colon, gid = ids.partition(":")
    if not (sep and colon and uid.isdigit() and gid.isdigit()):
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME=UID:GID, e.g. client=10001:10001")
    return name, (int(uid), int(gid))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent_memory.security.temporal_certs",
                                     description="Make or renew the certificates of Temporal's mutual TLS.")
    parser.add_argument("directory", type=Path, help="where the ca/, server/, ui/ and client/ directories are")
    parser.add_argument("--owner", type=_owner, action="append", default=[], metavar="NAME=UID:GID",
                        help="owner of a directory and its files (the user its service runs as)")
    parser.add_argument("--rotate", action="store_true", help="re-issue the server's and clients' certificates")
    parser.add_argument("--rotate-ca", action="store_true", help="replace the CA, then re-issue everything")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = ensure_certificates(args.directory, dict(args.owner), rotate=args.rotate or args.rotate_ca,
                                     rotate_ca=args.rotate_ca)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
