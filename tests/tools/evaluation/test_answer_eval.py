"""The answer-level LoCoMo evaluation: judge parsing, the window rule, the table and JSON, the calls
against a scripted real HTTP server, the CLI's endpoint errors, and one run end to end against
the local llama.cpp model on the real stack."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.runner import invoke
from tests.providers.openai_server import FakeOpenAIServer, Recorded, Reply, chat_completion
from tests.tools.evaluation.test_locomo_eval import ADVERSARIAL, QUESTIONS, SESSIONS, _write
from tools.cli import build_parser
from tools.evaluation.answers import (
    COLUMNS,
    AnswerJob,
    AnswerReport,
    Endpoint,
    Graded,
    build_answer_rows,
    column_metrics,
    fits_window,
    parse_judgement,
    percentile,
    run_answers,
)
from tools.evaluation.locomo import CATEGORIES, conversation_text, load_locomo


@pytest.fixture
def locomo_dir(tmp_path):
    d = tmp_path / "locomo"
    d.mkdir()
    _write(d / "sessions.jsonl", SESSIONS)
    _write(d / "questions.jsonl", QUESTIONS)
    _write(d / "questions_adversarial.jsonl", ADVERSARIAL)
    return d


# --- the judge's reply ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["CORRECT", "correct", " CORRECT.", "Label: CORRECT", '{"label": "CORRECT"}',
                                  "**CORRECT**\n"])
def test_correct_variants(text):
    assert parse_judgement(text) is True


@pytest.mark.parametrize("text", ["WRONG", "wrong", "INCORRECT", "Incorrect.", '{"label": "WRONG"}',
                                  "The answer is WRONG"])
def test_wrong_variants(text):
    assert parse_judgement(text) is False


@pytest.mark.parametrize("text", [None, "", "yes", "CORRECTLY stated", "CORRECT or WRONG", "not CORRECT but WRONG",
                                  "I cannot grade this", "RIGHT"])
def test_a_malformed_reply_is_an_error_never_correct(text):
    assert parse_judgement(text) is None


def test_a_malformed_judgement_counts_as_an_error_not_as_correct():
    items = [Graded(category=1, context_tokens=10, answer="x", latency_seconds=0.1, correct=True),
             Graded(category=1, context_tokens=10, answer="x", latency_seconds=0.2, correct=None, error="malformed")]
    m = column_metrics(items)
    assert (m.questions, m.graded, m.correct, m.errors, m.accuracy) == (2, 1, 1, 1, 0.5)


# --- the window rule --------------------------------------------------------------------------------


def test_fits_window_leaves_room_for_the_answer():
    assert fits_window(100, 200, answer_tokens=64)
    assert fits_window(136, 200, answer_tokens=64)
    assert not fits_window(137, 200, answer_tokens=64)
    assert not fits_window(10_000, 8_192)


def test_does_not_fit_is_counted_apart_from_accuracy():
    items = [Graded(category=2, fits=False, context_tokens=9000),
             Graded(category=2, context_tokens=500, answer="May", latency_seconds=1.0, correct=True)]
    m = column_metrics(items)
    assert (m.questions, m.does_not_fit, m.accuracy, m.errors, m.mean_context_tokens) == (2, 1, 1.0, 0, 500)
    nothing = column_metrics([Graded(category=2, fits=False, context_tokens=9000)])
    assert nothing.accuracy is None and nothing.latency_p50_seconds is None


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 21)], 95) == 19.0
    assert percentile([5.0], 95) == 5.0


def test_full_conversation_is_every_message_up_to_the_question_and_limit_keeps_the_first(locomo_dir):
    data = load_locomo(locomo_dir)
    conv = data.conversations[0]
    messages = sorted(conv.messages, key=lambda m: m.created_at)
    text = conversation_text(conv, messages[-1].created_at)
    assert all(m.content in text for m in messages)
    cut = conversation_text(conv, messages[0].created_at)
    assert messages[0].content in cut and messages[-1].content not in cut
    first = data.first_questions(1)
    assert [q.question_id for q in first.questions] == [data.questions[0].question_id]
    assert first.adversarial == [] and data.first_questions(None) is data


# --- the table and the JSON ----------------------------------------------------------------------------


def _report() -> AnswerReport:
    def g(category: int, correct: bool | None, fits: bool = True) -> Graded:
        return Graded(category=category, fits=fits, context_tokens=100 if fits else 9000, answer="a",
                      latency_seconds=0.5 if fits else None, correct=correct if fits else None)

    graded = [{"memory": g(1, True), "no_memory": g(1, False), "full_conversation": g(1, True)},
              {"memory": g(4, False), "no_memory": g(4, None), "full_conversation": g(4, None, fits=False)}]
    return AnswerReport(answer_model="m @ http://a/v1", judge_model="j @ http://b/v1", answer_window=8192,
                        budget=1200, rows=build_answer_rows(graded, CATEGORIES), seconds=1.0, notes=["n"])


def test_rows_per_category_present_then_overall():
    report = _report()
    assert [r.category for r in report.rows] == ["1", "4", "overall"]
    overall = report.row("overall").columns
    assert set(overall) == set(COLUMNS)
    assert overall["memory"].accuracy == 0.5 and overall["no_memory"].accuracy == 0.0
    assert overall["no_memory"].errors == 1
    assert overall["full_conversation"].does_not_fit == 1 and overall["full_conversation"].accuracy == 1.0


def test_render_and_json():
    report = _report()
    text = report.render()
    for word in ("memory", "no memory", "full conversation", "1 multi-hop", "4 single-hop", "overall", "not fit",
                 "m @ http://a/v1"):
        assert word in text, word
    data = json.loads(json.dumps(report.model_dump(mode="json")))
    assert data["rows"][-1]["columns"]["full_conversation"]["does_not_fit"] == 1
    assert data["answer_window"] == 8192


# --- the calls, against a real HTTP server -----------------------------------------------------------------


def _responder(judge_reply: str):
    def respond(request: Recorded) -> Reply | dict:
        system = request.body["messages"][0]["content"]
        if "grade answers" in system:
            return chat_completion(judge_reply)
        return chat_completion("cello")
    return respond


async def test_run_answers_over_http_three_columns_and_window():
    job = AnswerJob(question="What does Lin play?", gold="cello", category=4, memory_context="Lin plays the cello.",
                    memory_tokens=6, conversation="Lin: I play the cello in a jazz band. " * 40)
    with FakeOpenAIServer() as server:
        server.responder = _responder("CORRECT")
        endpoint = Endpoint("--answer-model", server.base_url, "test-chat", None, timeout_seconds=10)
        judge = Endpoint("--judge-model", server.base_url, "test-judge", None, timeout_seconds=10)
        report = await run_answers([job], endpoint, judge, window=100_000, budget=1200, categories=CATEGORIES,
                                   progress=False)
        small = await run_answers([job], endpoint, judge, window=200, budget=1200, categories=CATEGORIES,
                                  progress=False)
        server.responder = _responder("Maybe.")
        malformed = await run_answers([job], endpoint, judge, window=100_000, budget=1200, categories=CATEGORIES,
                                      progress=False)
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    overall = report.row("overall").columns
    assert all(overall[c].accuracy == 1.0 and overall[c].latency_p50_seconds > 0 for c in COLUMNS)
    assert overall["memory"].mean_context_tokens == 6 and overall["no_memory"].mean_context_tokens == 0
    assert overall["full_conversation"].mean_context_tokens > 200
    assert small.row("overall").columns["full_conversation"].does_not_fit == 1
    assert malformed.row("overall").columns["memory"].errors == 1
    assert malformed.row("overall").columns["memory"].accuracy == 0.0
    assert {r.body["model"] for r in chats} == {"test-chat", "test-judge"}
    # the memory column's prompt carries the assembled context; the no-memory one only the question
    prompts = [r.body["messages"][1]["content"] for r in chats if r.body["model"] == "test-chat"]
    assert any("Lin plays the cello." in p for p in prompts)
    assert any(p == "Question: What does Lin play?\nAnswer:" for p in prompts)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_unreachable_endpoint_is_one_line_exit_1(locomo_dir):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = invoke(build_parser(), ["eval", "locomo", "--data", str(locomo_dir), "--answer-model", url,
                                  "--judge-model", url, "--answer-model-name", "m"], {})
    assert out.returncode == 1, out
    (line,) = out.stderr.strip().splitlines()
    assert "--answer-model" in line and "unreachable" in line and "Traceback" not in out.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["--answer-model", "localhost:8080", "--judge-model", "http://x/v1"], ["--answer-model", "http"]),
    (["--answer-model", "http://x/v1"], ["--judge-model"]),
])
def test_cli_bad_endpoint_flags(locomo_dir, args, words):
    out = invoke(build_parser(), ["eval", "locomo", "--data", str(locomo_dir), *args], {})
    assert out.returncode in (1, 2), out
    (line,) = out.stderr.strip().splitlines()
    assert all(w in line for w in words), line


# --- end to end on the local model ----------------------------------------------------------------


@pytest.fixture(scope="module")
def local_server(tmp_path_factory):
    from workers.local_model import LocalModelServer, ensure_binary, ensure_model

    model = ensure_model()
    binary = ensure_binary()
    log = tmp_path_factory.mktemp("llama-server") / "llama-server.log"
    # One slot: each request is decoded alone, so an output does not depend on which other
    # request shared its batch (the tiny model's JSON holds or breaks the same way every run).
    # One thread: the suite keeps both cores busy, and two llama.cpp threads wait for each other.
    with LocalModelServer(binary, model, log, parallel=1, threads=1) as server:
        yield server


@pytest.mark.stack
@pytest.mark.timeout(3600)
def test_the_command_prints_one_json_document(locomo_dir, local_server, tmp_path):
    """`python -m tools.cli eval locomo --answer-model ... --json` as a user runs it, on its own
    private stack, end to end against the local model: stdout is the JSON document and nothing
    else, with every column's figures for each category and overall."""
    url = local_server.base_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY_")}
    env["AGENT_MEMORY_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-m", "tools.cli", "eval", "locomo", "--data", str(locomo_dir), "--limit-conversations", "1",
                           "--limit", "3", "--answer-model", url, "--judge-model", url,
                           "--answer-window", str(local_server.context_tokens // local_server.parallel), "--json"],
                          cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=1800, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout)["answers"]
    # conv-a's questions: single-hop and multi-hop
    assert [r["category"] for r in answers["rows"]] == ["1", "4", "overall"]
    for row in answers["rows"]:
        assert set(row["columns"]) == {"memory", "no_memory", "full_conversation"}
        for name, m in row["columns"].items():
            assert m["questions"] >= 1
            assert m["does_not_fit"] == 0  # the synthetic conversation is short
            assert 0.0 <= m["accuracy"] <= 1.0
            assert m["latency_p50_seconds"] > 0 and m["latency_p95_seconds"] >= m["latency_p50_seconds"]
            if name != "no_memory":
                assert m["mean_context_tokens"] > 0
