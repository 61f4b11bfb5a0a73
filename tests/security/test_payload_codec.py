"""The payload codec and the strict converter, without a server: what decodes where, what a
rotation keeps readable, and how a refusal surfaces (a non-retryable failure, never a crash)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import ActivitySerializationContext, WorkflowSerializationContext
from temporalio.exceptions import ApplicationError

from agent_memory.core.models import ErasureInput, RebuildInput
from agent_memory.security.crypto import FileKeyProvider
from agent_memory.security.payload_codec import (
    INPUT_REJECTED,
    PAYLOAD_REJECTED,
    REJECTED_ENCODING,
    encrypted_data_converter,
)


def _at(workflow_id: str) -> WorkflowSerializationContext:
    return WorkflowSerializationContext(namespace="default", workflow_id=workflow_id)


def _activity(workflow_id: str | None) -> ActivitySerializationContext:
    return ActivitySerializationContext(namespace="default", activity_id="1", activity_type="begin_erasure",
                                        activity_task_queue="q", workflow_id=workflow_id,
                                        workflow_type="ErasureWorkflow" if workflow_id else None,
                                        is_local=False)


async def _encode(converter, context, value) -> Payload:
    [payload] = await converter.with_context(context).encode([value])
    return payload


async def _decode(converter, context, payload, type_hint):
    bound = converter.with_context(context) if context is not None else converter
    [value] = await bound.decode([payload], [type_hint])
    return value


ERASE = ErasureInput(tenant_id="acme", subject_id="lin", request_id="r1")


async def test_a_payload_decodes_for_its_own_run_and_its_activities(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    payload = await _encode(converter, _at("erase/acme/lin/r1"), ERASE)
    assert b"lin" not in payload.data
    assert await _decode(converter, _at("erase/acme/lin/r1"), payload, ErasureInput) == ERASE
    assert await _decode(converter, _activity("erase/acme/lin/r1"), payload, ErasureInput) == ERASE
    assert await _decode(converter, None, payload, ErasureInput) == ERASE  # a reader without context


async def test_a_payload_copied_into_another_run_is_rejected_non_retryably(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    payload = await _encode(converter, _at("rebuild/acme/lin/r1"), ERASE)
    with pytest.raises(ApplicationError) as refused:
        await _decode(converter, _at("erase/acme/lin/r1"), payload, ErasureInput)
    assert refused.value.type == PAYLOAD_REJECTED and refused.value.non_retryable
    assert "rebuild/acme/lin/r1" in str(refused.value)
    # The bound place cannot be edited: it is part of the associated data.
    payload.metadata["bound-to"] = b"erase/acme/lin/r1"
    with pytest.raises(ApplicationError, match="does not decrypt"):
        await _decode(converter, _at("erase/acme/lin/r1"), payload, ErasureInput)


async def test_the_converter_of_a_context_is_derived_once_and_stays_bound_to_it(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    run, other = converter.with_context(_at("erase/acme/lin/r1")), converter.with_context(_at("erase/acme/lin/r2"))
    assert converter.with_context(_at("erase/acme/lin/r1")) is run and run is not other
    # Kept converters keep their binding: r1's payload is refused where r2 reads.
    payload = await _encode(converter, _at("erase/acme/lin/r1"), ERASE)
    assert await _decode(converter, _at("erase/acme/lin/r1"), payload, ErasureInput) == ERASE
    with pytest.raises(ApplicationError) as refused:
        await _decode(converter, _at("erase/acme/lin/r2"), payload, ErasureInput)
    assert refused.value.type == PAYLOAD_REJECTED


async def test_a_schedules_input_decodes_in_its_runs_only(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    payload = await _encode(converter, _at("agent-memory/key-rotation/run"), ERASE)
    assert await _decode(converter, _at("agent-memory/key-rotation/run-2026-12-03T00:00:00Z"), payload,
                         ErasureInput) == ERASE
    other = await _encode(converter, _at("erase/acme/lin/run"), ERASE)  # not a Schedule's id
    with pytest.raises(ApplicationError):
        await _decode(converter, _at("erase/acme/lin/run-x"), other, ErasureInput)


async def test_a_scheduled_run_reads_the_previous_runs_result_and_nothing_outside_its_schedule(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    previous = await _encode(converter, _at("agent-memory/review/run-2026-12-02T00:00:00Z"), ERASE)
    # Temporal hands each run of a Schedule the result of the one before it.
    assert await _decode(converter, _at("agent-memory/review/run-2026-12-03T00:00:00Z"), previous,
                         ErasureInput) == ERASE
    for elsewhere in ("agent-memory/key-rotation/run-2026-12-03T00:00:00Z",  # another Schedule's run
                      "agent-memory/review/run",  # not a run of the Schedule
                      "review/acme/manual-1",  # a run started by hand
                      "agent-memory/review/run-x/y"):
        with pytest.raises(ApplicationError) as refused:
            await _decode(converter, _at(elsewhere), previous, ErasureInput)
        assert refused.value.type == PAYLOAD_REJECTED and "copied from another run" in str(refused.value)


async def test_an_activity_outside_any_workflow_is_refused(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    payload = await _encode(converter, _at("erase/acme/lin/r1"), ERASE)
    with pytest.raises(ApplicationError, match="outside any workflow"):
        await _decode(converter, _activity(None), payload, ErasureInput)


async def test_plaintext_and_unbound_payloads_are_refused_unless_draining_an_upgrade(tmp_path):
    keys = FileKeyProvider(tmp_path).payload_keys()
    strict = encrypted_data_converter(keys)
    plain = Payload(metadata={"encoding": b"json/plain"}, data=ERASE.model_dump_json().encode())
    with pytest.raises(ApplicationError, match="not encrypted"):
        await _decode(strict, _at("erase/acme/lin/r1"), plain, ErasureInput)
    draining = encrypted_data_converter(keys, accept_legacy=True)
    assert await _decode(draining, _at("erase/acme/lin/r1"), plain, ErasureInput) == ERASE
    [marker] = await strict.payload_codec.decode([plain])
    assert marker.metadata["encoding"] == REJECTED_ENCODING.encode()


async def test_another_models_input_is_refused_by_kind_and_undeclared_fields(tmp_path):
    converter = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    context = _at("erase/acme/lin/r1")
    rebuild = await _encode(converter, context, RebuildInput(tenant_id="acme", subject_id="lin", request_id="r1"))
    with pytest.raises(ApplicationError) as refused:
        await _decode(converter, context, rebuild, ErasureInput)
    assert refused.value.type == INPUT_REJECTED and refused.value.non_retryable
    assert "kind" in str(refused.value)
    extra = await _encode(converter, context, {**ERASE.model_dump(), "force": True})
    with pytest.raises(ApplicationError, match="force"):
        await _decode(converter, context, extra, ErasureInput)


async def test_a_rotated_payload_key_encodes_new_payloads_and_reads_old_ones_until_destroyed(tmp_path):
    provider = FileKeyProvider(tmp_path)
    before = encrypted_data_converter(provider.payload_keys())
    old = await _encode(before, _at("erase/acme/lin/r1"), ERASE)
    provider.rotate_payload_key()
    after = encrypted_data_converter(provider.payload_keys())
    new = await _encode(after, _at("erase/acme/lin/r1"), ERASE)
    assert new.metadata["encryption-key-id"] != old.metadata["encryption-key-id"]
    assert await _decode(after, _at("erase/acme/lin/r1"), old, ErasureInput) == ERASE
    with pytest.raises(ApplicationError, match="does not hold"):  # the old key never saw the new one
        await _decode(before, _at("erase/acme/lin/r1"), new, ErasureInput)

    assert provider.destroy_retired_payload_keys(datetime.now(UTC) - timedelta(days=1)) == []  # replaced just now
    assert provider.destroy_retired_payload_keys(datetime.now(UTC) + timedelta(seconds=1)) == ["payload"]
    pruned = encrypted_data_converter(provider.payload_keys())
    assert len(provider.payload_keys()) == 1
    assert await _decode(pruned, _at("erase/acme/lin/r1"), new, ErasureInput) == ERASE
    with pytest.raises(ApplicationError, match="does not hold"):
        await _decode(pruned, _at("erase/acme/lin/r1"), old, ErasureInput)
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in tmp_path.glob("payload*.key"))


async def test_a_converter_with_its_key_source_reads_a_key_rotated_by_another_process_and_encodes_under_it(tmp_path):
    provider = FileKeyProvider(tmp_path)
    running = encrypted_data_converter(provider.payload_keys(), reload=provider.payload_keys)
    before = await _encode(running, _at("erase/acme/lin/r1"), ERASE)
    FileKeyProvider(tmp_path).rotate_payload_key()  # another process: the CLI
    started_after = encrypted_data_converter(FileKeyProvider(tmp_path).payload_keys())
    new = await _encode(started_after, _at("erase/acme/lin/r1"), ERASE)
    assert new.metadata["encryption-key-id"] != before.metadata["encryption-key-id"]
    assert await _decode(running, _at("erase/acme/lin/r1"), new, ErasureInput) == ERASE
    assert (await _encode(running, _at("erase/acme/lin/r1"), ERASE)).metadata["encryption-key-id"] == \
        new.metadata["encryption-key-id"]
    assert await _decode(running, _at("erase/acme/lin/r1"), before, ErasureInput) == ERASE  # the old key is kept
    # A key no source holds stays refused.
    other = await _encode(encrypted_data_converter(FileKeyProvider(tmp_path / "elsewhere").payload_keys()),
                          _at("erase/acme/lin/r1"), ERASE)
    with pytest.raises(ApplicationError, match="does not hold"):
        await _decode(running, _at("erase/acme/lin/r1"), other, ErasureInput)
