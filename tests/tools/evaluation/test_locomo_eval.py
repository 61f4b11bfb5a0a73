"""The LoCoMo evaluation: metrics and BM25 on hand-computed cases, loading errors, and one run on
a tiny synthetic LoCoMo-format directory against the real embedded stack (no LoCoMo data here)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from agent_memory.cli.core import parse_args
from agent_memory.core.models import Message
from agent_memory.memory.ingest import InputError
from tests.cli.runner import invoke
from tools.cli import build_parser
from tools.evaluation.bm25 import BM25, pack_ranked, tokenize
from tools.evaluation.locomo import (
    ConversationBM25,
    EvalReport,
    LocomoQuestion,
    QuestionScore,
    aggregate,
    answer_token_coverage,
    answer_tokens,
    build_rows,
    evidence_fraction,
    load_locomo,
    run_locomo_eval,
    score_question,
)

# --- tokenization and BM25 -----------------------------------------------------------------------


def test_tokenize_words_lowercase_nfkc_and_cjk_bigrams():
    assert tokenize("Hello, World! 123") == ["hello", "world", "123"]
    assert tokenize("ＡＢＣ") == ["abc"]  # full-width folded by NFKC
    assert tokenize("我住在上海") == ["我住", "住在", "在上", "上海"]
    assert tokenize("Lin住上海ok 猫") == ["lin", "住上", "上海", "ok", "猫"]


def test_bm25_scores_match_the_okapi_formula_by_hand():
    index = BM25([["a", "b"], ["b", "c", "c"], ["d"]])  # N=3, avgdl=2
    # "c": df=1, idf=ln(1 + 2.5/1.5); doc 1 has f=2, |d|=3: norm = 1.5 * (0.25 + 0.75 * 3/2) = 2.0625
    idf_c = math.log(1 + 2.5 / 1.5)
    assert index.scores(["c"]) == pytest.approx([0.0, idf_c * 2 * 2.5 / (2 + 2.0625), 0.0])
    # "b": df=2, idf=ln(1.6); the shorter document wins (norm 1.5 vs 2.0625)
    idf_b = math.log(1.6)
    assert index.scores(["b"]) == pytest.approx([idf_b * 2.5 / 2.5, idf_b * 2.5 / 3.0625, 0.0])
    assert [i for i, _ in index.rank(["b"])] == [0, 1]
    assert index.rank(["zzz"]) == []  # documents sharing no term are not ranked at all
    # a repeated query term counts twice; an unknown one adds nothing
    assert index.scores(["c", "c", "x"])[1] == pytest.approx(2 * index.scores(["c"])[1])


def test_bm25_ties_keep_document_order():
    index = BM25([["x"], ["x"], ["y"]])
    assert [i for i, _ in index.rank(["x"])] == [0, 1]


def test_pack_ranked_is_greedy_and_skips_what_does_not_fit():
    texts = ["x" * 40, "y" * 100, "z" * 8]  # 10, 25 and 2 tokens (+1 each for the newline)
    packed = pack_ranked(texts, [1, 0, 2], budget=30)
    assert packed.indices == [1, 2]  # 26 used, 0 would need 11 more, 2 fits in the remaining 4
    assert packed.tokens == 29
    assert packed.text == "y" * 100 + "\n" + "z" * 8
    assert pack_ranked(texts, [1], budget=25).indices == []


def _message(mid: str, speaker: str, content: str, when: str) -> Message:
    return Message(message_id=mid, turn_index=0, role="user", speaker=speaker, content=content,
                   created_at=datetime.fromisoformat(when.replace("Z", "+00:00")))


def test_conversation_bm25_sees_only_messages_before_asked_at_and_cites_them():
    baseline = ConversationBM25([
        _message("D1:1", "Lin", "I adopted a parrot.", "2024-01-01T10:00:00Z"),
        _message("D1:2", "Sam", "What a lovely bird.", "2024-01-01T10:00:00Z"),
        _message("D2:1", "Lin", "The parrot learned to talk.", "2024-03-01T10:00:00Z"),
    ])
    early = baseline.context("parrot?", datetime(2024, 2, 1, tzinfo=UTC), 100)
    assert early.message_ids == ["D1:1"]
    assert early.text == "Lin: I adopted a parrot."
    late = baseline.context("parrot?", None, 100)
    assert sorted(late.message_ids) == ["D1:1", "D2:1"]
    # the speaker is part of the document
    assert baseline.context("Sam", None, 100).message_ids == ["D1:2"]


# --- metrics -------------------------------------------------------------------------------------


def test_answer_tokens_drop_stopwords_and_str_non_strings():
    assert answer_tokens("The red car and a bike") == {"red", "car", "bike"}
    assert answer_tokens(2022) == {"2022"}
    assert answer_tokens(["Paris", "Rome"]) == {"paris", "rome"}
    assert answer_tokens("the of a") == set()


def test_answer_token_coverage():
    assert answer_token_coverage("The red car and a bike", "I saw a Red car.") == pytest.approx(2 / 3)
    assert answer_token_coverage(2022, "back in 2022!") == 1.0
    assert answer_token_coverage("Ｐａｒｉｓ", "she lives in paris") == 1.0  # NFKC on both sides
    assert answer_token_coverage("cat", "concatenate") == 0.0  # tokens, not substrings
    assert answer_token_coverage("it was", "anything") is None


def test_evidence_fraction_and_score_question():
    assert evidence_fraction(["D1:1", "D1:2"], ["D1:2", "D3:1"]) == 0.5
    assert evidence_fraction([], ["D1:1"]) is None
    s = score_question(["D1:1", "D1:2"], "blue", ["D1:1", "D1:2", "D9:9"], "it is blue", 3)
    assert (s.evidence_all_in_context, s.evidence_fraction, s.answer_token_coverage) == (True, 1.0, 1.0)
    s = score_question(["D1:1", "D1:2"], "blue", ["D1:2"], "red", 1)
    assert (s.evidence_all_in_context, s.evidence_fraction, s.answer_token_coverage) == (False, 0.5, 0.0)
    s = score_question([], "the", [], "", 0)
    assert (s.evidence_all_in_context, s.evidence_fraction, s.answer_token_coverage) == (None, None, None)


def test_aggregate_skips_questions_without_evidence_or_answer_tokens():
    m = aggregate([
        QuestionScore(evidence_all_in_context=True, evidence_fraction=1.0, answer_token_coverage=0.5,
                      context_tokens=10),
        QuestionScore(evidence_all_in_context=False, evidence_fraction=0.25, answer_token_coverage=None,
                      context_tokens=20),
        QuestionScore(evidence_all_in_context=None, evidence_fraction=None, answer_token_coverage=1.0,
                      context_tokens=30),
    ])
    assert (m.questions, m.with_evidence, m.with_answer_tokens) == (3, 2, 2)
    assert m.evidence_all_in_context == 0.5
    assert m.mean_evidence_fraction == pytest.approx(0.625)
    assert m.answer_token_coverage == pytest.approx(0.75)
    assert m.mean_context_tokens == 20.0
    empty = aggregate([])
    assert empty.questions == 0 and empty.mean_evidence_fraction is None


def test_build_rows_per_category_overall_and_adversarial_apart():
    def q(category: int) -> LocomoQuestion:
        return LocomoQuestion(conversation_id="c", question_id=f"q{category}", question="?", answer="x",
                              category=category, evidence_message_ids=["m"], asked_at=datetime.now(UTC))

    hit = QuestionScore(evidence_all_in_context=True, evidence_fraction=1.0, answer_token_coverage=1.0,
                        context_tokens=1)
    miss = QuestionScore(evidence_all_in_context=False, evidence_fraction=0.0, answer_token_coverage=0.0,
                         context_tokens=1)
    rows = build_rows([(q(1), hit, miss), (q(4), miss, miss), (q(5), hit, hit)])
    assert [r.category for r in rows] == ["1", "2", "3", "4", "overall", "5"]
    overall = rows[4]
    assert overall.system.questions == 2  # adversarial not in overall
    assert overall.system.evidence_all_in_context == 0.5 and overall.bm25.evidence_all_in_context == 0.0
    assert overall.delta["evidence_all_in_context"] == 0.5
    assert rows[1].system.questions == 0 and rows[1].delta["mean_evidence_fraction"] is None


# --- loading -------------------------------------------------------------------------------------


def _session(cid: str, index: int, sid: str, started: str, messages: list[tuple[str, str, str, str]]) -> dict:
    return {"conversation_id": cid, "session_id": sid, "session_index": index, "started_at": started,
            "messages": [{"message_id": mid, "turn_index": n, "role": role, "speaker": speaker, "content": text,
                          "image_caption": None, "created_at": started}
                         for n, (mid, role, speaker, text) in enumerate(messages)]}


def _question(cid: str, qid: str, question: str, answer, category: int, evidence: list[str], asked: str) -> dict:
    return {"conversation_id": cid, "question_id": qid, "question": question, "answer": answer,
            "category": category, "evidence_message_ids": evidence, "asked_at": asked}


def _write(path, rows) -> None:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")


ASKED = "2024-06-01T12:00:00Z"
# Four messages each: a shorter session gets no episode (the substance gate), and every session has one.
SESSIONS = [
    _session("conv-a", 1, "conv-a-s1", "2024-01-10T09:00:00Z", [
        ("D1:1", "user", "Lin", "I live in Kyoto now."),
        ("D1:2", "assistant", "Sam", "Kyoto sounds lovely. How is the new flat?"),
        ("D1:3", "user", "Lin", "The flat is small but bright."),
        ("D1:4", "assistant", "Sam", "Does it get the morning sun?"),
    ]),
    # out of order in the file on purpose: session_index decides
    _session("conv-a", 3, "conv-a-s3", "2024-03-05T09:00:00Z", [
        ("D3:1", "user", "Lin", "I adopted a parrot named Kiwi."),
        ("D3:2", "assistant", "Sam", "A parrot! Does it talk?"),
        ("D3:3", "user", "Lin", "Kiwi whistles every morning and copies the kettle."),
        ("D3:4", "assistant", "Sam", "Parrots often copy the sounds they hear most."),
    ]),
    _session("conv-a", 2, "conv-a-s2", "2024-02-02T18:00:00Z", [
        ("D2:1", "user", "Lin", "I joined a jazz band and I play the cello there."),
        ("D2:2", "assistant", "Sam", "That is great, music keeps you busy."),
        ("D2:3", "user", "Lin", "We rehearse every Thursday evening."),
        ("D2:4", "assistant", "Sam", "A weekly rehearsal is a good rhythm."),
    ]),
    _session("conv-b", 1, "conv-b-s1", "2024-01-20T08:00:00Z", [
        ("D1:1", "user", "Mia", "I work as a nurse at the city hospital."),
        ("D1:2", "assistant", "Tom", "Night shifts must be tough."),
        ("D1:3", "user", "Mia", "I switch to day shifts next month."),
        ("D1:4", "assistant", "Tom", "Day shifts should make weekends easier."),
    ]),
    _session("conv-b", 2, "conv-b-s2", "2024-04-11T08:00:00Z", [
        ("D2:1", "user", "Mia", "We hiked the Dolomites with my sister last weekend."),
        ("D2:2", "assistant", "Tom", "The mountains there are stunning."),
        ("D2:3", "user", "Mia", "My sister carried the map and I carried the tent."),
        ("D2:4", "assistant", "Tom", "Sharing the load makes long trails easier."),
    ]),
]
QUESTIONS = [
    _question("conv-a", "conv-a-q1", "What does Lin play in the jazz band?", "cello", 4, ["D2:1"], ASKED),
    _question("conv-a", "conv-a-q2", "Where does Lin live and what pet did she adopt?", "Kyoto, a parrot", 1,
              ["D1:1", "D3:1"], ASKED),
    _question("conv-b", "conv-b-q1", "When did Mia hike the Dolomites?", "April 2024", 2, ["D2:1"], ASKED),
]
ADVERSARIAL = [
    _question("conv-b", "conv-b-q9", "Where does Tom work as a nurse?", "city hospital", 5, ["D1:1"], ASKED),
]


@pytest.fixture
def locomo_dir(tmp_path):
    d = tmp_path / "locomo"
    d.mkdir()
    _write(d / "sessions.jsonl", SESSIONS)
    _write(d / "questions.jsonl", QUESTIONS)
    _write(d / "questions_adversarial.jsonl", ADVERSARIAL)
    return d


def test_load_locomo_orders_sessions_and_reads_questions(locomo_dir):
    data = load_locomo(locomo_dir)
    assert [c.conversation_id for c in data.conversations] == ["conv-a", "conv-b"]
    assert [s.session_id for s in data.conversations[0].sessions] == ["conv-a-s1", "conv-a-s2", "conv-a-s3"]
    assert [q.question_id for q in data.questions] == ["conv-a-q1", "conv-a-q2", "conv-b-q1"]
    assert data.adversarial is not None and data.adversarial[0].category == 5
    limited = data.limited(1)
    assert [c.conversation_id for c in limited.conversations] == ["conv-a"]
    assert {q.conversation_id for q in limited.questions} == {"conv-a"} and limited.adversarial == []


@pytest.mark.parametrize("file, rows, expected", [
    ("questions.jsonl", [QUESTIONS[0], "{oops"], "questions.jsonl, line 2: not valid JSON"),
    ("questions.jsonl", [{**QUESTIONS[0], "conversation_id": "conv-z"}],
     "questions.jsonl, line 1: conversation 'conv-z' has no sessions"),
    ("questions.jsonl", [{k: v for k, v in QUESTIONS[0].items() if k != "asked_at"}],
     "questions.jsonl, line 1: asked_at: field required"),
    ("questions.jsonl", [{**QUESTIONS[0], "category": 5}], "questions.jsonl, line 1: category 5 is not one of"),
    ("questions.jsonl", [QUESTIONS[0], QUESTIONS[0]], "line 2: question_id 'conv-a-q1' also on line 1"),
    ("sessions.jsonl", [SESSIONS[0], {k: v for k, v in SESSIONS[1].items() if k != "session_index"}],
     "sessions.jsonl, line 2: session_index: missing"),
    ("sessions.jsonl", [SESSIONS[0], {**SESSIONS[1], "messages": []}], "sessions.jsonl, line 2: session"),
    ("sessions.jsonl", [SESSIONS[0], {**SESSIONS[1], "session_index": 1}],
     "sessions.jsonl, line 2: conversation 'conv-a' has session_index 1 twice"),
    ("sessions.jsonl", [{**SESSIONS[0], "conversation_id": "bad id!"}], "sessions.jsonl, line 1: conversation_id"),
])
def test_malformed_data_names_file_and_line(locomo_dir, file, rows, expected):
    _write(locomo_dir / file, rows)
    with pytest.raises(InputError, match=None) as err:
        load_locomo(locomo_dir)
    assert expected in str(err.value)


def test_missing_directory_and_file(tmp_path):
    with pytest.raises(InputError, match="not a directory"):
        load_locomo(tmp_path / "nope")
    with pytest.raises(InputError, match=r"sessions\.jsonl: no such file"):
        load_locomo(tmp_path)


def test_cli_parses_eval_and_reports_bad_data_without_starting_a_stack(tmp_path):
    args = parse_args(build_parser(), ["eval", "locomo", "--data", str(tmp_path), "--json", "--limit-conversations",
                                      "2", "--budget", "600", "--dump", str(tmp_path / "d.jsonl")])
    assert (args.command, args.benchmark, args.json, args.limit_conversations, args.budget) == (
        "eval", "locomo", True, 2, 600)
    out = invoke(build_parser(), ["eval", "locomo", "--data", str(tmp_path / "x")], {})
    assert out.returncode == 2
    assert "not a directory" in out.stderr


# --- the whole run on the real stack ----------------------------------------------------------------


async def test_run_locomo_eval_on_a_tiny_synthetic_dir(services, locomo_dir, task_queue, tmp_path):
    dump = tmp_path / "dump.jsonl"
    report = await run_locomo_eval(services, locomo_dir, budget=1200, dump=dump, progress=False,
                                   task_queue=task_queue)
    assert isinstance(report, EvalReport)
    assert report.tenant_id.startswith("eval-") and report.task_queue == task_queue
    assert report.conversations == ["conv-a", "conv-b"]
    assert (report.sessions, report.messages) == (5, 20)
    assert report.episodes_written == 5 and report.facts_extracted >= 1  # "I live in Kyoto"
    assert [r.category for r in report.rows] == ["1", "2", "3", "4", "overall"]
    overall = report.row("overall")
    assert overall.system.questions == overall.bm25.questions == 3
    assert report.adversarial is not None and report.adversarial.system.questions == 1
    for m in (overall.system, overall.bm25):
        assert 0.0 <= m.mean_evidence_fraction <= 1.0 and 0.0 <= m.answer_token_coverage <= 1.0
        assert m.mean_context_tokens <= 1200
    assert set(report.bm25_minus_floor) == {"evidence_all_in_context", "mean_evidence_fraction",
                                            "answer_token_coverage"}
    assert "overall" in report.render() and "BM25" in report.render()

    lines = {row["question_id"]: row for row in map(json.loads, dump.read_text().splitlines())}
    assert set(lines) == {"conv-a-q1", "conv-a-q2", "conv-b-q1", "conv-b-q9"}
    jazz = lines["conv-a-q1"]
    assert {"question", "answer", "category", "evidence_message_ids", "context_text", "items",
            "bm25_context_text", "bm25_message_ids"} <= set(jazz)
    # D2:1 is the only message that mentions the jazz band: both systems must cite it.
    cited = {m for item in jazz["items"] for m in item["cited_message_ids"]}
    assert "D2:1" in cited
    assert jazz["bm25_message_ids"][0] == "D2:1"
    assert report.row("4").system.evidence_all_in_context == 1.0
    assert report.row("4").bm25.evidence_all_in_context == 1.0
    # citations stay within the conversation: conv-b's context cites none of conv-a's sessions' text
    assert "Kyoto" not in lines["conv-b-q1"]["context_text"]
