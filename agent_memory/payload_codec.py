"""Encryption of every Temporal payload (workflow and activity inputs, results, query answers).

The Temporal dev server (and a self-hosted one without mTLS) authenticates nobody: any local user
can read histories and start workflows. With this codec, histories are AES-GCM ciphertext to
anyone without the payload key, and a workflow started without it never runs: its input does not
decode, so the worker fails the workflow task before any step executes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

ENCODING = b"binary/agent-memory-encrypted"
KEY_ID_FIELD = "encryption-key-id"


class PayloadRejectedError(ValueError):
    """A payload that this deployment did not encrypt (or encrypted under another key)."""


class EncryptionCodec(PayloadCodec):
    def __init__(self, key_id: str, key: bytes, *, accept_plaintext: bool = False):
        self._key_id = key_id.encode()
        self._aead = AESGCM(key)
        # Only to drain runs started before encryption was on, during an upgrade.
        self._accept_plaintext = accept_plaintext

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            nonce = os.urandom(12)
            sealed = self._aead.encrypt(nonce, payload.SerializeToString(), self._key_id)
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID_FIELD: self._key_id}, data=nonce + sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                if self._accept_plaintext:
                    out.append(payload)
                    continue
                raise PayloadRejectedError("a Temporal payload is not encrypted by this deployment: refused (a "
                                           "workflow started without the payload key?)")
            if payload.metadata.get(KEY_ID_FIELD) != self._key_id:
                raise PayloadRejectedError("a Temporal payload is encrypted under another payload key: refused")
            try:
                plain = self._aead.decrypt(payload.data[:12], payload.data[12:], self._key_id)
            except InvalidTag:
                raise PayloadRejectedError("a Temporal payload does not decrypt under this deployment's key") from None
            decoded = Payload()
            decoded.ParseFromString(plain)
            out.append(decoded)
        return out


def encrypted_data_converter(key_id: str, key: bytes, *, accept_plaintext: bool = False) -> DataConverter:
    """pydantic_data_converter with every payload encrypted."""
    return dataclasses.replace(pydantic_data_converter,
                               payload_codec=EncryptionCodec(key_id, key, accept_plaintext=accept_plaintext))
