"""agent_memory/core/contract.py: the names, ids and types a running deployment depends on by value."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

from temporalio import activity, workflow

from agent_memory.core import contract
from workers.worker import WORKFLOWS


def test_workflow_type_names_are_pinned_by_the_contract():
    names = sorted(workflow._Definition.must_from_class(cls).name for cls in WORKFLOWS)
    assert names == sorted(contract.WORKFLOW_NAMES)


def test_every_activity_has_a_pinned_name():
    names = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "activities").glob("*.py")):
        module = importlib.import_module(f"activities.{path.stem}")
        for cls in [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]:
            for attr, fn in inspect.getmembers(cls, inspect.isfunction):
                defn = activity._Definition.from_callable(fn)
                if defn is not None:
                    assert attr not in names, f"two activities named {attr}"
                    names[attr] = defn.name
    # Every activity's type name comes from the contract (a method rename cannot change it).
    assert sorted(names.values()) == sorted(contract.ACTIVITY_NAMES)
    assert len(set(contract.ACTIVITY_NAMES)) == len(contract.ACTIVITY_NAMES)


def test_workflow_id_formats():
    assert contract.consolidation_workflow_id("acme", "lin", "s1") == "consolidate/acme/lin/s1"
    assert contract.idle_workflow_id("acme", "lin", "s2") == "idle/acme/lin/s2"
    assert contract.legacy_consolidation_workflow_id("acme", "s1") == "consolidate/acme/s1"  # replay only
    assert contract.erasure_workflow_id("acme", "lin", "r1") == "erase/acme/lin/r1"
    assert contract.rebuild_workflow_id("acme", None, "recorded") == "rebuild/acme/*/recorded"
    assert contract.rebuild_workflow_id("acme", "kim", "x") == "rebuild/acme/kim/x"
    assert contract.manual_key_rotation_workflow_id("abc") == "key-rotation/manual-abc"
    assert contract.manual_compaction_workflow_id("abc") == "physical-compaction/manual-abc"
    assert contract.scheduled_workflow_id(contract.KEY_ROTATION_SCHEDULE_ID) == "agent-memory/key-rotation/run"
    assert contract.webhook_delivery_workflow_id("0f1e") == "webhook-delivery-0f1e"
    assert contract.webhook_delivery_workflow_id("0f1e", 2) == "webhook-delivery-0f1e-r2"  # the 2nd re-delivery
    assert contract.manual_review_workflow_id("acme", "abc") == "review/acme/manual-abc"
    assert contract.scheduled_workflow_id(contract.REVIEW_SCHEDULE_ID) == "agent-memory/review/run"


def test_the_tenant_is_read_back_from_per_tenant_workflow_ids_only():
    for workflow_id in (contract.consolidation_workflow_id("acme", "lin", "s/1"),
                        contract.idle_workflow_id("acme", "lin", "s"), contract.legacy_consolidation_workflow_id("acme", "s"),
                        contract.erasure_workflow_id("acme", "lin", "r"), contract.rebuild_workflow_id("acme", None, "r"),
                        contract.projector_workflow_id("acme", "lin"), contract.manual_review_workflow_id("acme", "x")):
        assert contract.workflow_id_tenant(workflow_id) == "acme", workflow_id
    for workflow_id in (contract.manual_key_rotation_workflow_id("abc"), contract.manual_compaction_workflow_id("a"),
                        contract.scheduled_workflow_id(contract.PROJECTION_SWEEP_SCHEDULE_ID), "consolidate", ""):
        assert contract.workflow_id_tenant(workflow_id) is None, workflow_id


def test_error_type_values_are_the_recorded_strings():
    assert {t.value for t in contract.ErrorType} >= {
        "SubjectErased", "VersionConflict", "NotFound", "ProviderPermanent", "ProviderOutputInvalid",
        "ProviderRetryable", "UnstorableValue", "ErasureRequestConflict", "KeyUnavailable", "RotationUnsupported",
        "OperationMismatch", "EventLogUnreadable", "ErasureResidue"}
    assert contract.ErrorType.NOT_FOUND == "NotFound" and f"{contract.ErrorType.NOT_FOUND}" == "NotFound"


def test_search_attribute_registry():
    assert contract.SEARCH_ATTRIBUTE_NAMES == ("TenantId", "SubjectId", "SessionId")
    assert [contract.search_attribute_type_name(k) for k in contract.SEARCH_ATTRIBUTES] == ["Keyword"] * 3


def test_the_contract_imports_no_worker_code():
    forbidden = ("workers", "activities", "workflows", "temporalio.worker", "temporalio.client")
    code = ("import sys, agent_memory.core.contract; "
            f"print([m for m in sys.modules if m.split('.')[0] in {forbidden!r} or m.startswith({forbidden!r})])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
