"""The alert rules of deploy/prometheus (alerts.yml): valid for Prometheus, each with its unit tests
(alerts_test.yml: it fires on a failing deployment's series and stays quiet on a healthy one), a
severity, a wait (`for`) and a runbook section in docs/operations.md; and the scrape configuration
(prometheus.yml) valid. No server: Prometheus' own `promtool` checks and runs them (Debian's
`prometheus` package; .ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.test_docs import anchors

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
ALERTS = PROMETHEUS / "alerts.yml"
ALERTS_TEST = PROMETHEUS / "alerts_test.yml"
OPERATIONS = ROOT / "docs" / "operations.md"


def promtool(*args: str | Path) -> subprocess.CompletedProcess:
    """Runs promtool; a missing one fails the test (it is part of the test environment)."""
    found = shutil.which("promtool") or "/usr/bin/promtool"
    assert Path(found).is_file(), "promtool is missing: apt-get install prometheus (.ci/run does)"
    return subprocess.run([found, *map(str, args)], capture_output=True, text=True, timeout=120)


def alert_rules() -> list[dict]:
    groups = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rules():
    result = promtool("check", "rules", ALERTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_the_unit_tests_of_the_rules_pass():
    result = promtool("test", "rules", ALERTS_TEST)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_fails_a_rule_that_its_unit_test_contradicts(tmp_path):
    """The unit tests can fail: with the projection-lag threshold raised above the test's lag,
    the alert they expect does not fire."""
    (tmp_path / "alerts.yml").write_text(ALERTS.read_text(encoding="utf-8").replace(
        "(agent_memory_projection_lag_seconds) > 600", "(agent_memory_projection_lag_seconds) > 6000"), encoding="utf-8")
    tests = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    tests["tests"] = [test for test in tests["tests"]
                      if any(case["alertname"] == "AgentMemoryProjectionLag" for case in test["alert_rule_test"])]
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(tests), encoding="utf-8")
    result = promtool("test", "rules", tmp_path / "alerts_test.yml")
    assert result.returncode != 0
    assert "alertname: AgentMemoryProjectionLag" in result.stdout + result.stderr


def test_every_alert_waits_has_a_severity_and_a_runbook_section():
    rules = alert_rules()
    assert {rule["alert"] for rule in rules} >= {
        "AgentMemoryScheduleNotAsDesigned", "AgentMemoryProjectionLag", "AgentMemoryErasureOverdue",
        "AgentMemoryDeadLetters", "AgentMemoryRunParked", "AgentMemoryModelErrors",
        "AgentMemoryAuthFailureBurst", "AgentMemoryTaskQueueBacklogGrowing"}
    sections = anchors(OPERATIONS)
    for rule in rules:
        name = rule["alert"]
        assert rule.get("for"), f"{name} has no `for`: one bad sample would page"
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        annotations = rule["annotations"]
        assert annotations.get("summary") and annotations.get("description"), name
        page, _, anchor = annotations["runbook_url"].partition("#")
        assert page == "docs/operations.md", f"{name}'s runbook is not in docs/operations.md"
        assert anchor == name.lower() and anchor in sections, f"docs/operations.md has no section {name}"


def test_the_erasure_deadline_is_the_setting():
    """The erasure alert compares against the deadline the product publishes
    (AGENT_MEMORY_ERASURE_DEADLINE_SECONDS), not a number written into the rule."""
    (rule,) = [rule for rule in alert_rules() if rule["alert"] == "AgentMemoryErasureOverdue"]
    assert "agent_memory_erasure_oldest_open_seconds > agent_memory_erasure_deadline_seconds" in rule["expr"]


def test_every_alert_is_tested_firing_and_quiet():
    cases = [case for test in yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))["tests"]
             for case in test.get("alert_rule_test", [])]
    for name in (rule["alert"] for rule in alert_rules()):
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case["exp_alerts"] for case in mine), f"no unit test where {name} fires"
        assert any(not case["exp_alerts"] for case in mine), f"no unit test where {name} stays quiet"


def test_the_prometheus_configuration_is_valid():
    # --syntax-only: the rule and key files it names are the container's paths (tests/test_compose.py
    # maps them to the repository's files).
    result = promtool("check", "config", "--syntax-only", PROMETHEUS / "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
