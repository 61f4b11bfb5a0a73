"""Replay of checked-in histories: a change that breaks workflow determinism fails here."""

from __future__ import annotations

import ast
import base64
import importlib
import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
from temporalio.workflow import _Definition

from activities.heartbeat import MIN_INTERVAL as MIN_HEARTBEAT_INTERVAL
from workers.worker import PASSTHROUGH_MODULES, WORKFLOWS


def workflow_definition(cls: type) -> _Definition:
    definition = _Definition.from_class(cls)
    assert definition is not None, cls
    return definition

HISTORIES = Path(__file__).parent.parent / "histories"
WORKFLOW_DIR = Path(__file__).resolve().parents[2] / "workflows"


@pytest.mark.parametrize("name, workflow_id", [("consolidation.json", "consolidate/acme/s1"),
                                               ("erasure-v1.json", "erase/acme/lin"),
                                               ("erasure-v2.json", "erase/acme/lin"),
                                               ("erasure-v3.json", "erase/acme/lin"),
                                               ("session-idle.json", "idle/acme/s2"),
                                               ("rebuild.json", "rebuild/acme/*/recorded"),
                                               # The versions before the event log: contract
                                               # names, presets, the
                                               # projector step behind workflow.patched.
                                               ("consolidation-v2.json", "consolidate/acme/s1"),
                                               ("erasure-v4.json", "erase/acme/lin"),
                                               ("session-idle-v2.json", "idle/acme/s2"),
                                               ("rebuild-v2.json", "rebuild/acme/*/recorded"),
                                               # The versions with the event log: consolidation
                                               # ends at the commit, the projector embeds, the
                                               # rebuild carries counts only.
                                               ("consolidation-v3.json", "consolidate/acme/s1"),
                                               ("projector.json", "projector/acme/lin"),
                                               ("rebuild-v3.json", "rebuild/acme/*/recorded"),
                                               # Session ids per subject (migration 021): the idle
                                               # timer's consolidation id names the subject.
                                               ("session-idle-v3.json", "idle/acme/ana/s2"),
                                               # Plan, commit and wake as local
                                               # activities; idle time from the newest message.
                                               ("consolidation-v4.json", "consolidate/acme/ana/s1"),
                                               ("session-idle-v4.json", "idle/acme/ana/s2"),
                                               # Importance, summary and the first plan at once.
                                               ("consolidation-v5.json", "consolidate/acme/ana/s1"),
                                               # Offline providers as local activities, the
                                               # run's own rows embedded: one workflow task.
                                               ("consolidation-v6.json", "consolidate/acme/lin/s1"),
                                               # Remote providers: the run embeds its own rows
                                               # in an ordinary activity.
                                               ("consolidation-v7.json", "consolidate/acme/kai/s-oa"),
                                               # Offline providers: every step in one local
                                               # activity.
                                               ("consolidation-v8.json", "consolidate/acme/lin/s1"),
                                               # Remote providers: that local activity only says
                                               # where they compute.
                                               ("consolidation-v9.json", "consolidate/acme/kai/s-oa"),
                                               # Remote providers: after it, every step in one
                                               # ordinary activity.
                                               ("consolidation-v10.json", "consolidate/acme/kai/s-oa"),
                                               # Each step its own activity, the model calls on
                                               # the model queue: offline, then a remote model.
                                               ("consolidation-v11.json", "consolidate/acme/lin/s1"),
                                               ("consolidation-v12.json", "consolidate/acme/kai/s-oa"),
                                               # Offline providers' steps as local activities.
                                               ("consolidation-v13.json", "consolidate/acme/lin/s1"),
                                               # A remote model's run checks the tenant's token
                                               # budget; this one parked on it, then was released
                                               # by a signal.
                                               ("consolidation-v14.json", "consolidate/acme/kai/s-oa")])
async def test_recorded_history_replays(name, workflow_id):
    history = WorkflowHistory.from_json(workflow_id, (HISTORIES / name).read_text())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    # A real run, not an empty file: started, then at least one workflow task, then closed.
    kinds = [e.event_type for e in history.events]
    assert kinds[0] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED and len(kinds) >= 10
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in kinds


CONSOLIDATIONS = sorted(p.name for p in HISTORIES.glob("consolidation*.json"))


@pytest.mark.parametrize("name", CONSOLIDATIONS)
async def test_every_recorded_consolidation_replays_inside_the_sdks_sandbox(name):
    """The worker runs the consolidation workflow unsandboxed; here its code runs in the sandbox
    (a twin re-imports workflows/consolidation.py there), which fails the replay on a wall clock,
    randomness, I/O or a module that is not passed through."""
    from tests.workflows.sandboxed_consolidation import SandboxedConsolidationWorkflow
    from workflows.consolidation import ConsolidationWorkflow

    assert not workflow_definition(ConsolidationWorkflow).sandboxed  # what the product runs
    assert workflow_definition(SandboxedConsolidationWorkflow).sandboxed
    text = (HISTORIES / name).read_text()
    workflow_id = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"].get(
        "workflowId", "consolidate")
    history = WorkflowHistory.from_json(workflow_id, text)
    replayer = Replayer(workflows=[SandboxedConsolidationWorkflow], data_converter=pydantic_data_converter,
                        workflow_runner=SandboxedWorkflowRunner(
                            restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None


def test_consolidation_histories_are_all_checked():
    assert len(CONSOLIDATIONS) == 14


@pytest.mark.parametrize("name, model_steps_local", [("consolidation-v11.json", False),
                                                     ("consolidation-v12.json", False),
                                                     ("consolidation-v13.json", True),
                                                     ("consolidation-v14.json", False)])
def test_a_step_route_history_names_each_step_and_carries_no_text(name, model_steps_local):
    from tests.workflows.history_steps import LOCAL, history_steps

    text = (HISTORIES / name).read_text()
    history = WorkflowHistory.from_json("consolidate", text)
    every = history_steps(history)
    # A remote model's rounds of calls are each preceded by a check of the token budget (from v14;
    # that run parked once, so its second round was checked twice).
    budget_checks = [step for step, _ in every if step == "check_token_budget"]
    assert len(budget_checks) == (3 if name == "consolidation-v14.json" else 0)
    steps = [s for s in every if s[0] != "check_token_budget"]
    assert [step for step, _ in steps] == ["locate_providers", "extract_facts", "score_importance",
                                           "summarize_session", "check_conflicts", "commit_consolidation",
                                           "project_outbox_batch"]
    assert {queue for step, queue in steps if step in ("extract_facts", "score_importance",
                                                       "summarize_session")} == {steps[1][1]}
    assert steps[1][1] == LOCAL if model_steps_local else steps[1][1].endswith("-model")
    assert steps[4][1] == steps[5][1] == LOCAL
    # The recorded session's words are in Postgres, never in the history (payloads decoded).
    payloads: list[str] = []

    def collect(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("data"), str) and isinstance(node.get("metadata"), dict):
                payloads.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(json.loads(text))
    assert any('"facts_extracted"' in p or '"operation_id"' in p for p in payloads)
    for word in ("Hangzhou", "Lin Wei", "My name", "辣"):
        assert not any(word in p for p in payloads) and word not in text


def test_every_retry_preset_retries_transient_failures_without_an_attempt_cap():
    """A one-minute Postgres or provider outage must not fail a run: transient failures retry
    until they pass at a capped interval; permanent ones end retries as non-retryable types. The
    dead-lettering presets (a webhook delivery) give up after a bounded number of attempts, at
    exponentially growing intervals, and the work is dead-lettered for an operator to re-drive."""
    from agent_memory.core.contract import ACTIVITY_PRESETS, DEAD_LETTERING_PRESETS, ErrorType

    assert len(ACTIVITY_PRESETS) >= 7
    for name, preset in ACTIVITY_PRESETS.items():
        policy = preset.retry_policy()
        if name in DEAD_LETTERING_PRESETS:
            assert policy.maximum_attempts > 1 and policy.backoff_coefficient > 1, name
            assert policy.maximum_interval is not None and policy.maximum_interval > policy.initial_interval, name
        else:
            assert policy.maximum_attempts == 0, f"{name} gives up after {policy.maximum_attempts} attempts"
            assert policy.maximum_interval is not None and policy.maximum_interval.total_seconds() <= 120, name
        permanent = set(policy.non_retryable_error_types or ())
        assert permanent and permanent <= {str(t) for t in ErrorType}, name
        assert ErrorType.PROVIDER_RETRYABLE not in permanent, name
        options = preset.options()
        assert options["retry_policy"] == policy and options["start_to_close_timeout"] == preset.start_to_close
        if preset.heartbeat is not None:
            # Activities heartbeat at a third of it (activities/heartbeat.py): several beats per timeout.
            assert options["heartbeat_timeout"] >= 3 * MIN_HEARTBEAT_INTERVAL, name


def test_every_activity_call_of_a_workflow_uses_a_contract_preset():
    """No workflow module builds its own RetryPolicy or timeouts: each activity call takes its
    options from agent_memory.core.contract (`**contract.PRESET.options()`), and only from there."""
    from temporalio.common import RetryPolicy

    from agent_memory.core.contract import ACTIVITY_PRESETS

    for path in sorted(WORKFLOW_DIR.glob("*.py")):
        module = importlib.import_module(f"workflows.{path.stem}")
        own = [name for name, value in vars(module).items() if isinstance(value, RetryPolicy)]
        assert not own, f"{path.name} defines its own retry policies {own}: use a contract preset"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr.startswith(("execute_activity", "start_activity"))):
                continue
            where = f"{path.name}:{node.lineno}"
            named = {k.arg for k in node.keywords if k.arg}
            assert not named & {"start_to_close_timeout", "schedule_to_close_timeout", "heartbeat_timeout",
                                "retry_policy"}, f"{where} sets activity options itself"
            spread = [ast.unparse(k.value) for k in node.keywords if k.arg is None]
            assert len(spread) == 1 and spread[0].startswith("contract.") and spread[0].endswith(".options()"), where
            assert spread[0].split(".")[1] in ACTIVITY_PRESETS, where


def test_the_history_recorder_imports():
    """tests/histories/record_histories.py records each new workflow version: it must keep up
    with the package it drives."""
    module = importlib.import_module("tests.histories.record_histories")
    assert set(module.CURRENT) >= {"consolidation", "consolidation-remote", "erasure"}
    assert all((HISTORIES / name).is_file() for name in module.CURRENT.values())
