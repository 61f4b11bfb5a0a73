"""Per-subject encryption of event payloads, so erasure can crypto-shred the event log.

Each subject gets a random 256-bit data key, stored wrapped (AES-GCM) under the deployment's
master key. Deleting the wrapped key makes every payload of that subject unreadable and every
key digest and memory id of that subject unlinkable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class KeyShreddedError(Exception):
    """The subject's key is gone: its payloads can no longer be read."""


def load_master_key(configured: str | None, home: Path) -> bytes:
    """The master key from AGENT_MEMORY_MASTER_KEY, else a file created once under home."""
    if configured:
        key = base64.b64decode(configured)
        if len(key) != 32:
            raise ValueError("AGENT_MEMORY_MASTER_KEY must be base64 of exactly 32 bytes; "
                             "generate one with: python -c \"import os,base64;print(base64.b64encode(os.urandom(32)).decode())\"")
        return key
    path = home / "master.key"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(base64.b64encode(os.urandom(32)).decode())
    return base64.b64decode(path.read_text().strip())


@dataclass(frozen=True)
class SubjectKey:
    tenant_id: str
    subject_id: str
    key: bytes

    def _aad(self) -> bytes:
        return f"{self.tenant_id}\x1f{self.subject_id}".encode()

    def encrypt(self, payload: dict) -> tuple[bytes, bytes]:
        nonce = os.urandom(12)
        data = json.dumps(payload, sort_keys=True, default=str).encode()
        return AESGCM(self.key).encrypt(nonce, data, self._aad()), nonce

    def decrypt(self, ciphertext: bytes, nonce: bytes) -> dict:
        return json.loads(AESGCM(self.key).decrypt(nonce, ciphertext, self._aad()))

    def digest(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def memory_id(self, kind: str, name: str) -> uuid.UUID:
        """Deterministic id of a memory (same fact key → same id), keyed so it reveals nothing."""
        return uuid.UUID(bytes=hmac.new(self.key, f"{kind}\x1f{name}".encode(), hashlib.sha256).digest()[:16], version=4)


class KeyWrapper:
    """Wraps and unwraps subject keys under the master key."""

    def __init__(self, master_key: bytes):
        self._aead = AESGCM(master_key)

    @staticmethod
    def _aad(tenant_id: str, subject_id: str) -> bytes:
        return f"subject-key\x1f{tenant_id}\x1f{subject_id}".encode()

    def new_wrapped(self, tenant_id: str, subject_id: str) -> tuple[bytes, bytes]:
        nonce = os.urandom(12)
        return self._aead.encrypt(nonce, os.urandom(32), self._aad(tenant_id, subject_id)), nonce

    def unwrap(self, tenant_id: str, subject_id: str, wrapped: bytes, nonce: bytes) -> SubjectKey:
        key = self._aead.decrypt(nonce, wrapped, self._aad(tenant_id, subject_id))
        return SubjectKey(tenant_id, subject_id, key)
