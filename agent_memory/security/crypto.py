"""Per-subject encryption of event payloads, so erasure can crypto-shred the event log.

Each subject gets a random 256-bit data key, stored wrapped (AES-GCM) under a key-encryption
key (KEK) that lives outside the database, in a key provider. Deleting the wrapped key makes the
subject's payloads unreadable; rotating the KEK (re-wrap every live key, destroy the old KEK)
makes every old copy of a deleted wrapped key (WAL, backups, replicas) unreadable too.

A KeyProvider holds KEK bytes by id and a stable identifier key (HMAC of erased subject ids).
FileKeyProvider keeps them as 0600 files in a 0700 directory and can create and destroy KEKs;
EnvKeyProvider reads them from the environment and cannot rotate. A KMS can implement the same
four methods.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import json
import os
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agent_memory.core.errors import AgentMemoryError, Conflict, InvalidInput, ServiceUnavailable

LEGACY_KEK_ID = "legacy"  # the single master key of deployments before KEK ids existed
KEK_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CHECK_PLAINTEXT = b"agent-memory key-encryption key check"
_GENERATE_HINT = ("generate one with: python -c \"import os,base64;print(base64.b64encode(os.urandom(32)).decode())\"")


class KeyShreddedError(AgentMemoryError):
    """The subject's key is gone: its payloads can no longer be read."""


class KeyUnavailableError(ServiceUnavailable):
    """The key provider does not hold a key the database needs."""


class RotationUnsupportedError(Conflict):
    """The key provider cannot create or destroy keys (keys from the environment)."""


def decode_key(value: str, name: str) -> bytes:
    try:
        key = base64.b64decode(value.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise InvalidInput(f"{name} must be base64 of exactly 32 bytes; {_GENERATE_HINT}")
    return key


class KeyProvider(Protocol):
    rotatable: bool

    def kek(self, kek_id: str) -> bytes | None: ...

    def create_kek(self) -> str: ...

    def destroy_kek(self, kek_id: str) -> None: ...

    def identifier_key(self, *, create: bool = False) -> bytes | None: ...

    def payload_keys(self) -> list[bytes]: ...

    def rotate_payload_key(self) -> str: ...

    def destroy_retired_payload_keys(self, retired_before: datetime) -> list[str]: ...


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _write_private(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(path.parent)  # a key that wraps data must survive a power loss once written


def _destroy_file(path: Path) -> None:
    """Overwrite, flush and unlink: what is left on the file system is random bytes."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.write(os.urandom(max(size, 64)))
        f.flush()
        os.fsync(f.fileno())
    path.unlink()
    _fsync_dir(path.parent)


class FileKeyProvider:
    """KEKs as `kek-<id>.key` files (base64) in a private directory; the identifier key beside.

    `legacy_master` is the pre-rotation `master.key`: readable as KEK 'legacy' until a rotation
    destroys it."""

    rotatable = True

    def __init__(self, directory: Path, legacy_master: Path | None = None):
        self.directory = directory
        self.legacy_master = legacy_master
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory.chmod(0o700)

    def _path(self, kek_id: str) -> Path:
        if kek_id == LEGACY_KEK_ID and self.legacy_master is not None:
            return self.legacy_master
        if not KEK_ID_PATTERN.match(kek_id):
            raise InvalidInput(f"invalid key-encryption key id {kek_id!r}")
        return self.directory / f"kek-{kek_id}.key"

    def kek(self, kek_id: str) -> bytes | None:
        path = self._path(kek_id)
        if not path.exists():
            return None
        return decode_key(path.read_text(), str(path))

    def create_kek(self) -> str:
        kek_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
        _write_private(self._path(kek_id), base64.b64encode(os.urandom(32)).decode())
        return kek_id

    def destroy_kek(self, kek_id: str) -> None:
        """Overwrite, flush and unlink: what is left on the file system is random bytes."""
        path = self._path(kek_id)
        if path.exists():
            _destroy_file(path)

    def identifier_key(self, *, create: bool = False) -> bytes | None:
        """None when missing, unless `create` (only before any digest exists: KeyRing decides)."""
        path = self.directory / "identifier.key"
        if not path.exists():
            if not create:
                return None
            with contextlib.suppress(FileExistsError):  # another process created it first
                _write_private(path, base64.b64encode(os.urandom(32)).decode())
        return decode_key(path.read_text(), str(path))

    def _rotated_payload_keys(self) -> list[Path]:
        """`payload-<UTC time>-<hex>.key`, newest first (the names sort by creation time)."""
        return sorted(self.directory.glob("payload-*.key"), reverse=True)

    def payload_keys(self) -> list[bytes]:
        """Temporal payload keys, the active one first, then the retired ones still kept to read
        histories of older runs. `payload.key` is created on first use and is the oldest. Losing
        them makes the histories of runs still in flight unreadable, nothing stored in Postgres."""
        first = self.directory / "payload.key"
        rotated = self._rotated_payload_keys()
        if not rotated and not first.exists():
            with contextlib.suppress(FileExistsError):  # another process created it first
                _write_private(first, base64.b64encode(os.urandom(32)).decode())
        return [decode_key(path.read_text(), str(path)) for path in [*rotated, first] if path.exists()]

    def rotate_payload_key(self) -> str:
        """A new active payload key; processes pick it up when they restart."""
        self.payload_keys()  # the first key exists before any successor
        name = "payload-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + "-" + secrets.token_hex(3)
        _write_private(self.directory / f"{name}.key", base64.b64encode(os.urandom(32)).decode())
        return name

    def destroy_retired_payload_keys(self, retired_before: datetime) -> list[str]:
        """Destroy every payload key whose successor was created before `retired_before`: no
        history still retained was written under it. The active key is never destroyed."""
        keys = [*self._rotated_payload_keys(), self.directory / "payload.key"]
        destroyed = []
        for successor, retired in itertools.pairwise(keys):
            created = datetime.strptime(successor.name.split("-")[1], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
            if created < retired_before and retired.exists():
                _destroy_file(retired)
                destroyed.append(retired.stem)
        return destroyed


class EnvKeyProvider:
    """Keys from the environment: AGENT_MEMORY_MASTER_KEY is `base64` (KEK 'legacy') or
    `id:base64[,id:base64…]`, the last one newest; AGENT_MEMORY_IDENTIFIER_KEY is base64.
    Rotation needs a provider that can create and destroy keys (a key directory or a KMS)."""

    rotatable = False

    def __init__(self, master_keys: str, identifier_key: str | None, payload_key: str | None = None):
        self._keks: dict[str, bytes] = {}
        for i, item in enumerate(part.strip() for part in master_keys.split(",") if part.strip()):
            kek_id, sep, value = item.rpartition(":")
            if not sep:
                kek_id, value = LEGACY_KEK_ID, item
            if not KEK_ID_PATTERN.match(kek_id):
                raise InvalidInput(f"AGENT_MEMORY_MASTER_KEY entry {i + 1}: invalid key id {kek_id!r}; "
                                   "use letters, digits, '.', '_' or '-'")
            self._keks[kek_id] = decode_key(value, f"AGENT_MEMORY_MASTER_KEY entry {i + 1} ({kek_id})")
        if not self._keks:
            raise InvalidInput(f"AGENT_MEMORY_MASTER_KEY is empty; {_GENERATE_HINT}")
        if not identifier_key:
            raise InvalidInput("AGENT_MEMORY_IDENTIFIER_KEY must be set with AGENT_MEMORY_MASTER_KEY (it digests erased "
                               f"subject ids in tombstones and must never change); {_GENERATE_HINT}")
        self._identifier = decode_key(identifier_key, "AGENT_MEMORY_IDENTIFIER_KEY")
        # `base64`, or `id:base64[,id:base64…]` with the newest (active) last, like the master key.
        self._payload = [decode_key(item.rpartition(":")[2], f"AGENT_MEMORY_PAYLOAD_KEY entry {i + 1}")
                         for i, item in enumerate(part.strip() for part in (payload_key or "").split(",")
                                                  if part.strip())][::-1]

    @property
    def newest(self) -> str:
        return list(self._keks)[-1]

    def kek(self, kek_id: str) -> bytes | None:
        return self._keks.get(kek_id)

    _CANNOT_ROTATE = ("keys come from AGENT_MEMORY_MASTER_KEY, which agent-memory cannot change: rotate with a key "
                      "directory (AGENT_MEMORY_KEY_DIR) or a KMS key provider")

    def create_kek(self) -> str:
        raise RotationUnsupportedError(self._CANNOT_ROTATE)

    def destroy_kek(self, kek_id: str) -> None:
        raise RotationUnsupportedError(self._CANNOT_ROTATE)

    def identifier_key(self, *, create: bool = False) -> bytes | None:
        return self._identifier

    def payload_keys(self) -> list[bytes]:
        if not self._payload:
            raise InvalidInput("AGENT_MEMORY_PAYLOAD_KEY must be set with AGENT_MEMORY_MASTER_KEY (it encrypts what "
                               f"Temporal stores); {_GENERATE_HINT}")
        return self._payload

    _PAYLOAD_IN_ENV = ("payload keys come from AGENT_MEMORY_PAYLOAD_KEY: add a new `id:base64` entry last, restart "
                       "every process, and drop the old entry once no retained history needs it")

    def rotate_payload_key(self) -> str:
        raise RotationUnsupportedError(self._PAYLOAD_IN_ENV)

    def destroy_retired_payload_keys(self, retired_before: datetime) -> list[str]:
        raise RotationUnsupportedError(self._PAYLOAD_IN_ENV)


def identifier_check_value(identifier_key: bytes) -> str:
    return hmac.new(identifier_key, b"agent-memory identifier key check", hashlib.sha256).hexdigest()


def trace_digest_key(identifier_key: bytes) -> bytes:
    """The key of the workflow ids' digests in exported traces (telemetry.tracing): derived from
    the identifier key, so every process of a deployment writes the same digest for a run, and
    a digest in a trace matches no digest of the database."""
    return hmac.new(identifier_key, b"agent-memory trace workflow ids", hashlib.sha256).digest()


def kek_check_value(kek: bytes) -> tuple[bytes, bytes]:
    nonce = os.urandom(12)
    return nonce, AESGCM(kek).encrypt(nonce, _CHECK_PLAINTEXT, b"kek-check")


def kek_matches(kek: bytes, nonce: bytes, ciphertext: bytes) -> bool:
    try:
        return AESGCM(kek).decrypt(nonce, ciphertext, b"kek-check") == _CHECK_PLAINTEXT
    except Exception:  # InvalidTag: another key
        return False


def subject_digest(identifier_key: bytes, tenant_id: str, subject_id: str) -> str:
    """The keyed digest that stands for an erased subject id in what erasure keeps."""
    mac = hmac.new(identifier_key, f"subject\x1f{tenant_id}\x1f{subject_id}".encode(), hashlib.sha256)
    return "erased:" + mac.hexdigest()


def request_authorization(identifier_key: bytes, kind: str, tenant_id: str, subject_id: str, request_id: str,
                          workflow_id: str) -> str:
    """The keyed digest a registered destructive request carries: it names the one run allowed
    to act on it."""
    text = "\x1f".join(("request-authorization", kind, tenant_id, subject_id, request_id, workflow_id))
    return hmac.new(identifier_key, text.encode(), hashlib.sha256).hexdigest()


def event_aad(tenant_id: str, subject_id: str, event_id: uuid.UUID, memory_id: uuid.UUID, version: int,
              event_type: str) -> bytes:
    """Associated data of an event payload (AAD version 2): a ciphertext decrypts only as the
    event it was written for."""
    return "\x1f".join(("event-v2", tenant_id, subject_id, str(event_id), str(memory_id), str(version),
                        event_type)).encode()


@dataclass(frozen=True)
class SubjectKey:
    tenant_id: str
    subject_id: str
    key: bytes

    def legacy_aad(self) -> bytes:
        return f"{self.tenant_id}\x1f{self.subject_id}".encode()

    def encrypt(self, payload: dict[str, Any], aad: bytes) -> tuple[bytes, bytes]:
        nonce = os.urandom(12)
        data = json.dumps(payload, sort_keys=True, default=str).encode()
        return AESGCM(self.key).encrypt(nonce, data, aad), nonce

    def decrypt(self, ciphertext: bytes, nonce: bytes, aad: bytes) -> dict[str, Any]:
        payload: dict[str, Any] = json.loads(AESGCM(self.key).decrypt(nonce, ciphertext, aad))
        return payload

    def digest(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def memory_id(self, kind: str, name: str) -> uuid.UUID:
        """Deterministic id of a memory (same fact key → same id), keyed so it reveals nothing."""
        return uuid.UUID(bytes=hmac.new(self.key, f"{kind}\x1f{name}".encode(), hashlib.sha256).digest()[:16], version=4)


def _wrap_aad(tenant_id: str, subject_id: str) -> bytes:
    return f"subject-key\x1f{tenant_id}\x1f{subject_id}".encode()


def wrap_subject_key(kek: bytes, tenant_id: str, subject_id: str, key: bytes) -> tuple[bytes, bytes]:
    nonce = os.urandom(12)
    return AESGCM(kek).encrypt(nonce, key, _wrap_aad(tenant_id, subject_id)), nonce


def unwrap_subject_key(kek: bytes, tenant_id: str, subject_id: str, wrapped: bytes, nonce: bytes) -> SubjectKey:
    return SubjectKey(tenant_id, subject_id, AESGCM(kek).decrypt(nonce, wrapped, _wrap_aad(tenant_id, subject_id)))


def rewrap_proof(key: bytes, tenant_id: str, subject_id: str) -> bytes:
    """What a rotation shows the database to re-wrap a subject key: only a holder of the key
    (so of a KEK) can compute it, and it reveals nothing of the key (HMAC, one-way)."""
    return hmac.new(key, b"rewrap-proof\x1f" + _wrap_aad(tenant_id, subject_id), hashlib.sha256).digest()


def rewrap_check(key: bytes, tenant_id: str, subject_id: str) -> bytes:
    """What the database keeps to verify a re-wrap (subject_keys.rewrap_check): SHA-256 of the proof."""
    return hashlib.sha256(rewrap_proof(key, tenant_id, subject_id)).digest()


def _reason_aad(tenant_id: str, request_id: str) -> bytes:
    return f"erasure-reason\x1f{tenant_id}\x1f{request_id}".encode()


def encrypt_reason(kek: bytes, tenant_id: str, request_id: str, reason: str) -> tuple[bytes, bytes]:
    nonce = os.urandom(12)
    return AESGCM(kek).encrypt(nonce, reason.encode(), _reason_aad(tenant_id, request_id)), nonce


def decrypt_reason(kek: bytes, tenant_id: str, request_id: str, ciphertext: bytes, nonce: bytes) -> str:
    return AESGCM(kek).decrypt(nonce, ciphertext, _reason_aad(tenant_id, request_id)).decode()


def key_provider_for(master_key: str | None, key_dir: Path | None, home: Path,
                     identifier_key: str | None = None, payload_key: str | None = None) -> KeyProvider:
    """AGENT_MEMORY_MASTER_KEY (environment) wins; else the key directory (default home/keys),
    which also reads a pre-rotation home/master.key as KEK 'legacy'."""
    if master_key:
        return EnvKeyProvider(master_key, identifier_key, payload_key)
    return FileKeyProvider(key_dir or home / "keys", legacy_master=home / "master.key")
