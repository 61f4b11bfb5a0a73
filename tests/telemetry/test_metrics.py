"""The metrics' labels stay bounded and the families stay documented: the `tenant` label names at
most the cap of tenants (the rest `other`) or none (`all`), as the settings say, and the list of
families in docs/operations.md is the registry's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from agent_memory.core.settings import Settings
from agent_memory.telemetry import metrics
from agent_memory.telemetry.exposition import configure_process_metrics, exposition
from agent_memory.telemetry.reference import REFERENCE_END, REFERENCE_START, families, reference_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


@pytest.fixture(autouse=True)
def default_labels() -> Iterator[None]:
    yield
    configure_process_metrics(Settings.from_env({}))  # the defaults again, for the other tests


def test_the_tenant_label_names_the_first_tenants_up_to_the_cap_and_the_rest_other():
    configure_process_metrics(Settings.from_env({"AGENT_MEMORY_METRICS_TENANT_CAP": "2"}))
    assert [metrics.tenant_label(t) for t in ("acme", "globex", "acme", "initech", "umbrella", "globex")] == [
        "acme", "globex", "acme", "other", "other", "globex"]
    metrics.PARKED_RUNS.labels(metrics.tenant_label("initech")).set(3)
    assert 'agent_memory_parked_runs{tenant="other"} 3.0' in generate_latest(metrics.REGISTRY).decode()


def test_switched_off_no_label_names_a_tenant():
    configure_process_metrics(Settings.from_env({"AGENT_MEMORY_METRICS_TENANT_LABELS": "0"}))
    assert {metrics.tenant_label(t) for t in ("acme", "globex", None)} == {"all"}
    configure_process_metrics(Settings.from_env({"AGENT_MEMORY_METRICS_TENANT_CAP": "0"}))
    assert metrics.tenant_label("acme") == "other"


def test_the_erasure_deadline_is_published_for_alert_rules():
    configure_process_metrics(Settings.from_env({"AGENT_MEMORY_ERASURE_DEADLINE_SECONDS": "900"}))
    assert "agent_memory_erasure_deadline_seconds 900.0" in exposition(None).decode()


def test_the_documented_families_are_the_registry_s():
    exported = {family.name for family in metrics.REGISTRY.collect()}
    listed = families()
    # Every exported family is listed (a counter under its `_total` name), and nothing else.
    assert {name.removesuffix("_total") for name, *_ in listed} == exported
    assert ("agent_memory_erasures", "gauge", ("tenant", "state"),
            "Erasure requests by state (running, completed, failed, stuck).") in listed
    document = DOCS.read_text(encoding="utf-8")
    documented = document.split(REFERENCE_START, 1)[1].split(REFERENCE_END, 1)[0]
    assert documented == reference_table(), ("docs/operations.md lists other metrics than the registry: run "
                                             "`python -m agent_memory.telemetry.reference --write docs/operations.md`")
