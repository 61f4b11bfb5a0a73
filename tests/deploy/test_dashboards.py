"""The Grafana dashboards (deploy/grafana/dashboards) and the alert rules query only metrics the
processes expose: every PromQL expression parses (promtool), and every metric name in it is one of
the product's families (agent_memory.telemetry.metrics.REGISTRY, with the suffixes of its
exposition) or one of the Temporal SDK's names seen exposed. No server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from agent_memory.telemetry.metrics import REGISTRY
from tests.deploy.test_alert_rules import alert_rules, promtool

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))

# The Temporal SDK's metric names as the product's metrics pages expose them: read from the page of
# a temporalio 1.35 Runtime with PrometheusConfig(counters_total_suffix=True, durations_as_seconds=True)
# (agent_memory.api.services.temporal_runtime) after a worker on the embedded dev server ran a few
# workflows, one activity that failed once and one workflow that failed, and passed through
# prometheus_client's parser and exposition as agent_memory.telemetry.exposition does. Only names
# seen there are listed; a name the SDK exposes only in other situations is not.
TEMPORAL_SDK_NAMES = frozenset("""
temporal_activity_execution_failed_total
temporal_activity_execution_latency_bucket temporal_activity_execution_latency_count temporal_activity_execution_latency_sum
temporal_activity_schedule_to_start_latency_bucket temporal_activity_schedule_to_start_latency_count
temporal_activity_schedule_to_start_latency_sum
temporal_activity_succeed_endtoend_latency_bucket temporal_activity_succeed_endtoend_latency_count
temporal_activity_succeed_endtoend_latency_sum
temporal_activity_task_received_total
temporal_long_request_latency_bucket temporal_long_request_latency_count temporal_long_request_latency_sum
temporal_long_request_total
temporal_num_pollers
temporal_request_latency_bucket temporal_request_latency_count temporal_request_latency_sum temporal_request_total
temporal_sticky_cache_hit_total temporal_sticky_cache_size
temporal_worker_start_total temporal_worker_task_slots_available temporal_worker_task_slots_used
temporal_workflow_completed_total temporal_workflow_failed_total
temporal_workflow_endtoend_latency_bucket temporal_workflow_endtoend_latency_count temporal_workflow_endtoend_latency_sum
temporal_workflow_task_execution_latency_bucket temporal_workflow_task_execution_latency_count
temporal_workflow_task_execution_latency_sum
temporal_workflow_task_queue_poll_succeed_total
temporal_workflow_task_replay_latency_bucket temporal_workflow_task_replay_latency_count
temporal_workflow_task_replay_latency_sum
temporal_workflow_task_schedule_to_start_latency_bucket temporal_workflow_task_schedule_to_start_latency_count
temporal_workflow_task_schedule_to_start_latency_sum
""".split())

# PromQL words that are not metric names: aggregation operators (followed by `by (...)` or their
# parameters rather than directly by a parenthesis), set and comparison keywords, literals.
KEYWORDS = frozenset({"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
                      "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
                      "bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"})
# Grafana's variables, replaced by a value of the same kind for promtool.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def product_names() -> set[str]:
    """The sample names the product's registry exposes, with their exposition suffixes."""
    names = set()
    for family in REGISTRY.collect():
        suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}
        names |= {family.name + suffix for suffix in suffixes.get(family.type, ("",))}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: strings, label matchers, ranges and the label
    lists of `by`/`without`/`on`/`ignoring`/`group_*` removed; of the words left, those followed by
    a parenthesis are functions, the keywords are not names, and numbers and durations are skipped."""
    text = re.sub(r"\$\w+", " ", expr)
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', " ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for token in re.finditer(r"\d[\w.]*|[A-Za-z_:][\w:]*", text):
        word = token.group()
        if word[0].isdigit() or word.lower() in KEYWORDS or text[token.end():].lstrip().startswith("("):
            continue
        names.add(word)
    return names


def dashboard_exprs(node) -> list[str]:
    """Every `expr` of a dashboard, in panels, rows' panels and anywhere else."""
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [expr for value in node.values() for expr in dashboard_exprs(value)]
    if isinstance(node, list):
        return [expr for value in node for expr in dashboard_exprs(value)]
    return []


def all_exprs() -> list[tuple[str, str]]:
    """(where, expr) of every dashboard panel and alert rule."""
    found = [(f"{path.name}", expr) for path in DASHBOARDS
             for expr in dashboard_exprs(json.loads(path.read_text(encoding="utf-8")))]
    return found + [(f"alert {rule['alert']}", rule["expr"]) for rule in alert_rules()]


def test_the_tokenizer_finds_metric_names_and_nothing_else():
    assert metric_names('sum by (model) (rate(agent_memory_model_calls_total{outcome="error", model=~"a.b"}[10m]))'
                        ' / sum by (model) (rate(agent_memory_model_calls_total[$__rate_interval])) > 0.1') == \
        {"agent_memory_model_calls_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le, route) (rate(x_bucket[5m] offset 1h)))") == {"x_bucket"}
    assert metric_names("deriv(max without (instance) (backlog)[15m:1m]) > 0 and on (job) up == bool 1") == \
        {"backlog", "up"}
    assert metric_names('a > ignoring (instance) group_left (tenant) b{state="paused"} unless c') == {"a", "b", "c"}


def test_the_dashboards_exist_and_query_prometheus():
    assert DASHBOARDS, "no dashboard in deploy/grafana/dashboards"
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        assert dashboard["uid"] and dashboard["title"]
        ids = [panel["id"] for panel in dashboard["panels"]]
        assert len(ids) == len(set(ids)), f"{path.name}: panel ids repeat"
        for panel in dashboard["panels"]:
            if panel["type"] != "row":
                assert panel["targets"] and all(target["expr"] for target in panel["targets"]), panel["title"]


def test_the_dashboards_cover_what_operators_watch():
    text = " ".join(expr for where, expr in all_exprs() if not where.startswith("alert "))
    for name in ("agent_memory_consolidations_total", "agent_memory_model_calls_total", "agent_memory_model_tokens_total",
                 "agent_memory_model_cost_usd_total", "agent_memory_projection_lag_seconds", "agent_memory_outbox_depth",
                 "agent_memory_dead_letters", "agent_memory_erasures", "agent_memory_webhook_deliveries_total",
                 "agent_memory_read_duration_seconds_bucket", "agent_memory_auth_failures_total",
                 "agent_memory_unavailable_responses_total", "agent_memory_schedules_not_as_designed",
                 "agent_memory_task_queue_backlog", "temporal_worker_task_slots_used"):
        assert name in text, f"no dashboard panel shows {name}"
    assert "histogram_quantile(0.5, sum by (le, route) (rate(agent_memory_read_duration_seconds_bucket" in text
    assert "histogram_quantile(0.99, sum by (le, route) (rate(agent_memory_read_duration_seconds_bucket" in text


def test_every_dashboard_expression_parses(tmp_path):
    """promtool parses each panel's expression, as a recording rule, with Grafana's variables set."""
    rules = []
    panel_exprs = [expr for where, expr in all_exprs() if not where.startswith("alert ")]
    for n, expr in enumerate(panel_exprs):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:expr_{n}", "expr": expr})
    assert rules
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}), encoding="utf-8")
    result = promtool("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_exposed_names_carry_their_suffixes():
    names = product_names()
    assert {"agent_memory_model_calls_total", "agent_memory_model_calls_created", "agent_memory_dead_letters",
            "agent_memory_read_duration_seconds_bucket", "agent_memory_read_duration_seconds_count"} <= names
    # A counter or a histogram is never queried by its bare family name.
    assert not {"agent_memory_model_calls", "agent_memory_read_duration_seconds", "agent_memory_dead_letters_total"} & names


@pytest.mark.parametrize("where, expr", all_exprs())
def test_every_metric_name_is_exposed(where, expr):
    names = metric_names(expr)
    assert names, f"{where}: no metric name found in {expr}"
    unknown = sorted(name for name in names if name not in product_names() and name not in TEMPORAL_SDK_NAMES)
    assert not unknown, f"{where}: {unknown} are exposed by neither the product's registry nor the Temporal SDK"
