"""Encryption of every Temporal payload (workflow and activity inputs, results, query answers),
each bound to the workflow it belongs to.

The Temporal dev server (and a self-hosted one without mTLS) authenticates nobody: any local user
can read histories and start workflows. With this codec, histories are AES-GCM ciphertext to
anyone without the payload key, and a payload cannot be moved: its associated data names the
workflow id it was encoded for (the SDK's serialization context), so an input copied out of one
run's history into a new start does not decode there. (The namespace is left out so that the
Replayer, which runs histories in a namespace of its own, still decodes them: one payload key
serves one namespace.)

A payload that does not decode — plaintext, another key, another workflow, tampered — is not an
error that a retry could fix. The codec hands on a *rejected* marker in its place, and the payload
converter turns the marker into a non-retryable `PayloadRejected` failure: a forged start fails at
once with a readable reason instead of failing its workflow task forever. Inputs that decode but
do not validate (another model's input, extra fields, another kind) fail the same way, as
`InputRejected`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Self

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    EncodingPayloadConverter,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)
from temporalio.exceptions import ApplicationError

from agent_memory.core.errors import AgentMemoryError, InvalidInput
from agent_memory.core.run_metadata import PUBLIC_MARK, PublicText

ENCODING = b"binary/agent-memory-encrypted"
REJECTED_ENCODING = "binary/agent-memory-rejected"
KEY_ID_FIELD = "encryption-key-id"
# The workflow id a payload was encoded for, in clear (Temporal shows it anyway):
# a reader without serialization context (a codec endpoint for the UI) decodes with it, a worker
# checks it against the run it is decoding for.
BOUND_TO_FIELD = "bound-to"
# A run's summary and details (agent_memory/core/run_metadata.PublicText): plain JSON with this mark,
# left in clear by the codec; after decoding it carries PUBLIC_ENCODING, which reads only as text.
PUBLIC_FIELD = PUBLIC_MARK
PUBLIC_ENCODING = "binary/agent-memory-public-text"
PAYLOAD_REJECTED = "PayloadRejected"
INPUT_REJECTED = "InputRejected"
# A Schedule encodes its action's input for the id prefix it is given; Temporal appends "-" and
# the scheduled time to name each run. Only the ids the product's Schedules use qualify
# (contract.scheduled_workflow_id: "agent-memory/<schedule>/run"). Temporal also hands each run
# the result of the Schedule's previous run (its "last completion result"), encoded for that run:
# the runs of one Schedule read each other's payloads, never another Schedule's or workflow's.
SCHEDULE_ID_PREFIX = "agent-memory/"
SCHEDULED_ID_SUFFIX = "/run"
_SCHEDULED_PLACE = re.compile(re.escape(SCHEDULE_ID_PREFIX) + r"[^/]+" + re.escape(SCHEDULED_ID_SUFFIX)
                              + r"(?:-[^/]+)?")

log = logging.getLogger(__name__)

RejectionSink = Callable[[str, str], Awaitable[None]]  # (workflow id or "", reason)


def payload_key_id(key: bytes) -> str:
    """A payload key's public name: a digest prefix, so every process derives the same id."""
    return "p-" + hashlib.sha256(key).hexdigest()[:12]


def _binding(context: SerializationContext | None) -> str | None:
    if isinstance(context, (WorkflowSerializationContext, ActivitySerializationContext)) and context.workflow_id:
        return context.workflow_id
    return None


def _bound_aad(key_id: bytes, bound_to: bytes) -> bytes:
    return b"agent-memory-payload-v2\x1f" + key_id + b"\x1f" + bound_to


def _schedule_of(workflow_id: str) -> str | None:
    """"agent-memory/<schedule>/run" for that id prefix and each of its runs (".../run-<time>")."""
    if _SCHEDULED_PLACE.fullmatch(workflow_id) is None:
        return None
    return workflow_id[:workflow_id.rindex(SCHEDULED_ID_SUFFIX) + len(SCHEDULED_ID_SUFFIX)]


def _place_matches(bound_to: str, expected: str) -> bool:
    if bound_to == expected:
        return True
    # A Schedule's run reads its Schedule's input (encoded for "agent-memory/<schedule>/run") and
    # the previous run's result (encoded for ".../run-<earlier time>"); it runs as ".../run-<time>".
    schedule = _schedule_of(bound_to)
    return schedule is not None and expected != schedule and _schedule_of(expected) == schedule


def rejected(reason: str) -> Payload:
    return Payload(metadata={"encoding": REJECTED_ENCODING.encode()}, data=reason.encode())


# A payload naming a key this process does not hold reloads the keys from their source at most
# this often (a forged key id must not turn every payload into a read of the key directory).
RELOAD_SECONDS = 1.0


class _PayloadKeys:
    """The payload keys a process holds, shared by every context of its codec; reloaded from their
    source (`reload`) when a payload names a key not held yet: a key rotated by another process
    (`agent-memory keys rotate-payload`) is picked up without a restart, and encodes from then on."""

    def __init__(self, keys: Sequence[bytes], reload: Callable[[], Sequence[bytes]] | None) -> None:
        self._reload_from = reload
        self._reloaded_at = -RELOAD_SECONDS
        self._use(keys)

    def _use(self, keys: Sequence[bytes]) -> None:
        if not keys:
            raise InvalidInput("at least one payload key is needed")
        self.aeads = {payload_key_id(key).encode(): AESGCM(key) for key in keys}
        self.active_id = payload_key_id(keys[0]).encode()

    def find(self, key_id: bytes) -> AESGCM | None:
        aead = self.aeads.get(key_id)
        if aead is not None or self._reload_from is None or time.monotonic() - self._reloaded_at < RELOAD_SECONDS:
            return aead
        self._reloaded_at = time.monotonic()
        try:
            keys = list(self._reload_from())
        except Exception as exc:  # an unreadable key source: keep the keys held
            log.warning("the payload keys could not be reloaded: %s", exc)
            return None
        if keys:
            if payload_key_id(keys[0]).encode() != self.active_id:
                log.info("payload key %s is active now (rotated)", payload_key_id(keys[0]))
            self._use(keys)
        return self.aeads.get(key_id)


class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """AES-GCM under the active payload key; decodes under any retained one (rotation). With
    `reload` (the key provider's payload_keys), a payload under a key not held yet reloads them."""

    def __init__(self, keys: Sequence[bytes], *, accept_legacy: bool = False,
                 on_rejected: RejectionSink | None = None, context: SerializationContext | None = None,
                 reload: Callable[[], Sequence[bytes]] | None = None):
        self._keyset = _PayloadKeys(keys, reload)
        # Only to drain runs started before payloads were encrypted or bound, during an upgrade.
        self._accept_legacy = accept_legacy
        self._on_rejected = on_rejected
        self._context = context
        self._expected = _binding(context)

    def with_context(self, context: SerializationContext) -> Self:
        # The same keys bound to another place: the ciphers are shared, not derived again.
        bound = copy.copy(self)
        bound._context, bound._expected = context, _binding(context)
        return bound

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        active_id = self._keyset.active_id
        aead = self._keyset.aeads[active_id]
        metadata = {"encoding": ENCODING, KEY_ID_FIELD: active_id}
        bound_to = (self._expected or "").encode()
        if bound_to:
            metadata[BOUND_TO_FIELD] = bound_to
        for payload in payloads:
            if payload.metadata.get(PUBLIC_FIELD) == b"1":
                out.append(payload)  # a PublicText of ours: ids and counts, for the UI's run list
                continue
            nonce = os.urandom(12)
            sealed = aead.encrypt(nonce, payload.SerializeToString(), _bound_aad(active_id, bound_to))
            out.append(Payload(metadata=metadata, data=nonce + sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            try:
                out.append(self._decode_one(payload))
            except PayloadRejectedError as exc:
                reason = str(exc)
                log.warning("Temporal payload rejected for %s: %s", self._expected or "a caller without context",
                            reason)
                if self._on_rejected is not None:
                    try:
                        await self._on_rejected(self._expected or "", reason)
                    except Exception:  # counting must never turn a rejection into a task failure
                        log.exception("could not count a rejected Temporal payload")
                out.append(rejected(reason))
        return out

    def decode_one(self, payload: Payload) -> Payload:
        """One payload decoded, or PayloadRejectedError (nothing logged or counted): for a reader
        such as the UI's codec endpoint, which shows an undecodable payload as it is."""
        return self._decode_one(payload)

    def _decode_one(self, payload: Payload) -> Payload:
        if payload.metadata.get(PUBLIC_FIELD) == b"1" and payload.metadata.get("encoding") == b"json/plain":
            return Payload(metadata={"encoding": PUBLIC_ENCODING.encode()}, data=payload.data)
        if payload.metadata.get("encoding") != ENCODING:
            if payload.metadata.get("encoding") == REJECTED_ENCODING.encode():
                return payload
            if self._accept_legacy:
                return payload
            raise PayloadRejectedError("the payload is not encrypted by this deployment (a workflow started "
                                       "without the payload key?)")
        key_id = payload.metadata.get(KEY_ID_FIELD, b"")
        aead = self._keyset.find(key_id)
        if aead is None:
            raise PayloadRejectedError(f"the payload is encrypted under payload key {key_id.decode(errors='replace')!r},"
                                       " which this deployment does not hold (retired, or another deployment's)")
        if isinstance(self._context, ActivitySerializationContext) and not self._context.workflow_id:
            # Every activity of the product runs for a workflow; a standalone one is a forgery.
            raise PayloadRejectedError("an activity started outside any workflow: refused")
        bound_to = payload.metadata.get(BOUND_TO_FIELD)
        if bound_to is None:
            if not self._accept_legacy:
                raise PayloadRejectedError("the payload is bound to no workflow (encoded before payloads were bound, "
                                           "or forged): refused")
            aad = key_id
        else:
            place = bound_to.decode(errors="replace")
            if self._expected is not None and not _place_matches(place, self._expected):
                raise PayloadRejectedError(f"the payload was encoded for {place!r}, not for {self._expected!r}: "
                                           "an input copied from another run is refused")
            aad = _bound_aad(key_id, bound_to)
        try:
            plain = aead.decrypt(payload.data[:12], payload.data[12:], aad)
        except InvalidTag:
            raise PayloadRejectedError("the payload does not decrypt under this deployment's payload key "
                                       "(tampered, or bound elsewhere)") from None
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded


class PayloadRejectedError(AgentMemoryError, ValueError):
    """A payload that this deployment did not encrypt, or encrypted for another place."""


class RejectedPayloadConverter(EncodingPayloadConverter):
    """Turns the codec's rejected marker into a non-retryable failure of the run or activity."""

    @property
    def encoding(self) -> str:
        return REJECTED_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never encodes anything

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raise ApplicationError(f"Temporal payload rejected: {payload.data.decode(errors='replace')}",
                               type=PAYLOAD_REJECTED, non_retryable=True)


class PublicTextPayloadConverter(EncodingPayloadConverter):
    """Writes a PublicText as marked plain JSON (the codec keeps it in clear); reads one back only
    where a text or nothing in particular is expected: a marked payload in place of a workflow's
    input or an activity's result is refused, so the mark opens no way around the encryption."""

    @property
    def encoding(self) -> str:
        return PUBLIC_ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        if not isinstance(value, PublicText):
            return None
        return Payload(metadata={"encoding": b"json/plain", PUBLIC_FIELD: b"1"},
                       data=json.dumps(str(value), ensure_ascii=False).encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        try:
            value = json.loads(payload.data)
        except ValueError:
            value = None
        if type_hint not in (None, str, PublicText) or not isinstance(value, str):
            raise ApplicationError("Temporal payload rejected: a clear text where "
                                   f"{getattr(type_hint, '__name__', 'a value')} was expected",
                                   type=PAYLOAD_REJECTED, non_retryable=True)
        return PublicText(value)


class StrictPydanticJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """An input that does not validate against the declared model fails non-retryably: the same
    payload would fail the same way on every retry."""

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        try:
            return super().from_payload(payload, type_hint)
        except ValidationError as exc:
            name = getattr(type_hint, "__name__", "the declared type")
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
                                 for e in exc.errors(include_input=False)[:5])
            raise ApplicationError(f"payload is not a valid {name}: {problems}", type=INPUT_REJECTED,
                                   non_retryable=True) from None


class StrictPayloadConverter(PydanticPayloadConverter):
    def __init__(self) -> None:
        super().__init__()
        converters = [StrictPydanticJSONPayloadConverter() if isinstance(c, PydanticJSONPlainPayloadConverter) else c
                      for c in self.converters.values()]
        self._set_converters(PublicTextPayloadConverter(), *converters, RejectedPayloadConverter())


# Bound on the converters kept per context: a worker's recent runs and their steps.
CONTEXTS_KEPT = 1024


@dataclasses.dataclass(frozen=True)
class ContextCachingDataConverter(DataConverter):
    """The SDK derives a data converter for the serialization context (the workflow, the
    activity) of every payload it converts, building a whole converter set each time. A run's
    contexts repeat (its workflow, each of its steps), so each is derived once and kept."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_by_context", {})

    def with_context(self, context: SerializationContext) -> Self:
        kept: dict[SerializationContext, Self] = self.__dict__["_by_context"]
        try:
            converter = kept.get(context)
        except TypeError:  # a context that cannot be a key: derived every time
            return super().with_context(context)
        if converter is None:
            converter = super().with_context(context)
            if len(kept) >= CONTEXTS_KEPT:
                kept.clear()
            kept[context] = converter
        return converter


def encrypted_data_converter(keys: Sequence[bytes], *, accept_legacy: bool = False,
                             on_rejected: RejectionSink | None = None,
                             reload: Callable[[], Sequence[bytes]] | None = None) -> DataConverter:
    """The strict pydantic converter with every payload encrypted and bound to its workflow.
    `keys`: the active payload key first, then the retired ones still needed to read histories;
    `reload`: where to read them again when a payload names a key not held (a rotation)."""
    return dataclasses.replace(ContextCachingDataConverter(payload_converter_class=StrictPayloadConverter),
                               payload_codec=EncryptionCodec(keys, accept_legacy=accept_legacy,
                                                             on_rejected=on_rejected, reload=reload))
