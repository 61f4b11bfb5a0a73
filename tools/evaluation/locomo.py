"""`python -m tools.cli eval locomo`: how much of a LoCoMo question's evidence reaches the assembled
context, against a BM25 baseline over the raw messages packed into the same token budget.

The top half is pure (data loading, tokenization, metrics, the BM25 baseline, the table); the
bottom half is the async runner on the real stack (ingest, consolidation workflows, context
assembly). The data (CC BY-NC 4.0) is read from the directory given, never copied.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
import time
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from agent_memory.cli.progress import Progress
from agent_memory.core.errors import InvalidInput
from agent_memory.core.models import Message, Session, check_identifier
from agent_memory.memory.ingest import InputError, parse_session_line
from agent_memory.recall.recall_policy import DEFAULT_PRESET, PRESETS
from tools.evaluation.answers import AnswerJob, AnswerReport, Endpoint, check_url, preflight, run_answers
from tools.evaluation.bm25 import BM25, pack_ranked, tokenize

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ADVERSARIAL_CATEGORY = 5
STOPWORDS = frozenset("a an the of in on at to and or is was for with by her his she he they it".split())
# Measured on locomo-dev by the dataset's README (BM25 over raw messages, 1,200-token context).
BM25_FLOOR = {"evidence_all_in_context": 0.589, "mean_evidence_fraction": 0.638, "answer_token_coverage": 0.563}
METRICS = ("evidence_all_in_context", "mean_evidence_fraction", "answer_token_coverage")
DEFAULT_CONCURRENCY = 4

# --- data ------------------------------------------------------------------------------------


class LocomoQuestion(BaseModel):
    conversation_id: str
    question_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answer: Any = None
    category: int
    evidence_message_ids: list[str] = Field(default_factory=list)
    asked_at: datetime


@dataclass
class Conversation:
    conversation_id: str
    sessions: list[Session] = field(default_factory=list)  # in session_index order

    @property
    def messages(self) -> list[Message]:
        return [m for s in self.sessions for m in s.messages]


@dataclass
class LocomoData:
    conversations: list[Conversation]  # in file order
    questions: list[LocomoQuestion]
    adversarial: list[LocomoQuestion] | None  # None: no questions_adversarial.jsonl

    def first_questions(self, n: int | None) -> LocomoData:
        """The first `n` questions of categories 1-4 (file order), and no adversarial ones."""
        if n is None:
            return self
        return LocomoData(self.conversations, self.questions[:n], None if self.adversarial is None else [])

    def limited(self, n: int | None) -> LocomoData:
        if n is None:
            return self
        keep = self.conversations[:n]
        ids = {c.conversation_id for c in keep}
        return LocomoData(keep, [q for q in self.questions if q.conversation_id in ids],
                          None if self.adversarial is None else
                          [q for q in self.adversarial if q.conversation_id in ids])


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _jsonl(path: Path) -> Iterable[tuple[int, str]]:
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if line.strip():
                yield line_no, line


def _object(path: Path, line_no: int, line: str) -> dict:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}, line {line_no}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}, line {line_no}: expected a JSON object, got {type(data).__name__}")
    return data


def load_sessions(path: Path) -> list[Conversation]:
    if not path.is_file():
        raise InputError(f"{path}: no such file (a LoCoMo directory has sessions.jsonl and questions.jsonl)")
    conversations: dict[str, list[tuple[int, int, Session]]] = {}
    session_ids: dict[str, int] = {}
    for line_no, line in _jsonl(path):
        data = _object(path, line_no, line)
        cid = data.get("conversation_id")
        if not isinstance(cid, str):
            raise InputError(f"{path}, line {line_no}: conversation_id: missing or not a string (add it)")
        try:
            check_identifier("conversation_id (used as the subject id)", cid)
        except ValueError as exc:
            raise InputError(f"{path}, line {line_no}: {exc}") from None
        index = data.get("session_index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise InputError(f"{path}, line {line_no}: session_index: missing or not an integer (sessions of a "
                             "conversation are consolidated in this order)")
        try:
            session = parse_session_line(line, line_no)
        except InputError as exc:
            raise InputError(f"{path}, {exc}") from None
        if session.session_id in session_ids:
            raise InputError(f"{path}, line {line_no}: session {session.session_id!r} also on line "
                             f"{session_ids[session.session_id]}; session ids must be unique in the file")
        session_ids[session.session_id] = line_no
        conversations.setdefault(cid, []).append((index, line_no, session))
    if not conversations:
        raise InputError(f"{path}: no sessions found; expected one JSON session per line")
    result = []
    for cid, sessions in conversations.items():
        sessions.sort(key=lambda s: s[0])
        for (a, line_a, _), (b, line_b, _) in pairwise(sessions):
            if a == b:
                raise InputError(f"{path}, line {line_b}: conversation {cid!r} has session_index {b} twice "
                                 f"(also line {line_a})")
        result.append(Conversation(cid, [s for _, _, s in sessions]))
    return result


def load_questions(path: Path, conversation_ids: set[str], *, categories: set[int] | None) -> list[LocomoQuestion]:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    questions: list[LocomoQuestion] = []
    seen: dict[str, int] = {}
    for line_no, line in _jsonl(path):
        data = _object(path, line_no, line)
        try:
            q = LocomoQuestion.model_validate(data)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "line"
            raise InputError(f"{path}, line {line_no}: {where}: {err['msg'].lower()}") from None
        if categories is not None and q.category not in categories:
            raise InputError(f"{path}, line {line_no}: category {q.category} is not one of "
                             f"{sorted(categories)}")
        if q.conversation_id not in conversation_ids:
            raise InputError(f"{path}, line {line_no}: conversation {q.conversation_id!r} has no sessions in "
                             "sessions.jsonl")
        if q.question_id in seen:
            raise InputError(f"{path}, line {line_no}: question_id {q.question_id!r} also on line "
                             f"{seen[q.question_id]}")
        seen[q.question_id] = line_no
        questions.append(q.model_copy(update={"asked_at": _utc(q.asked_at)}))
    return questions


def load_locomo(data_dir: Path | str) -> LocomoData:
    """sessions.jsonl and questions.jsonl (required), questions_adversarial.jsonl (optional).
    Errors name the file and line."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"{data_dir}: not a directory (expected sessions.jsonl and questions.jsonl in it)")
    conversations = load_sessions(data_dir / "sessions.jsonl")
    ids = {c.conversation_id for c in conversations}
    questions = load_questions(data_dir / "questions.jsonl", ids, categories=set(CATEGORIES))
    adversarial_path = data_dir / "questions_adversarial.jsonl"
    adversarial = (load_questions(adversarial_path, ids, categories={ADVERSARIAL_CATEGORY})
                   if adversarial_path.exists() else None)
    return LocomoData(conversations, questions, adversarial)


# --- metrics ---------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lowercase `\\w+` tokens after NFKC."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


def answer_tokens(answer: Any) -> set[str]:
    """The answer's distinct word tokens without stopwords; numbers and lists are str()-ed."""
    text = answer if isinstance(answer, str) else str(answer)
    return {t for t in words(text) if t not in STOPWORDS}


def answer_token_coverage(answer: Any, context_text: str) -> float | None:
    """Share of the answer's distinct tokens that occur as tokens of the context; None if the
    answer has no tokens left."""
    wanted = answer_tokens(answer)
    if not wanted:
        return None
    present = set(words(context_text))
    return len(wanted & present) / len(wanted)


def evidence_fraction(evidence_ids: Iterable[str], cited_ids: Iterable[str]) -> float | None:
    evidence = set(evidence_ids)
    if not evidence:
        return None
    return len(evidence & set(cited_ids)) / len(evidence)


class QuestionScore(BaseModel):
    evidence_all_in_context: bool | None  # None: the question has no evidence ids
    evidence_fraction: float | None
    answer_token_coverage: float | None  # None: the answer has no tokens
    context_tokens: int


def score_question(evidence_ids: list[str], answer: Any, cited_ids: Iterable[str], context_text: str,
                   context_tokens: int) -> QuestionScore:
    fraction = evidence_fraction(evidence_ids, cited_ids)
    return QuestionScore(evidence_all_in_context=None if fraction is None else fraction == 1.0,
                         evidence_fraction=fraction, answer_token_coverage=answer_token_coverage(answer, context_text),
                         context_tokens=context_tokens)


class Metrics(BaseModel):
    questions: int
    with_evidence: int  # questions counted in the evidence metrics
    with_answer_tokens: int  # questions counted in answer_token_coverage
    evidence_all_in_context: float | None
    mean_evidence_fraction: float | None
    answer_token_coverage: float | None
    mean_context_tokens: float | None


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(scores: list[QuestionScore]) -> Metrics:
    fractions = [s.evidence_fraction for s in scores if s.evidence_fraction is not None]
    coverage = [s.answer_token_coverage for s in scores if s.answer_token_coverage is not None]
    return Metrics(questions=len(scores), with_evidence=len(fractions), with_answer_tokens=len(coverage),
                   evidence_all_in_context=_mean([float(s.evidence_all_in_context) for s in scores
                                                  if s.evidence_all_in_context is not None]),
                   mean_evidence_fraction=_mean(fractions), answer_token_coverage=_mean(coverage),
                   mean_context_tokens=_mean([float(s.context_tokens) for s in scores]))


def delta(a: Metrics, b: Metrics) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in METRICS:
        x, y = getattr(a, name), getattr(b, name)
        out[name] = None if x is None or y is None else x - y
    return out


# --- the BM25 baseline -------------------------------------------------------------------------


def message_text(message: Message) -> str:
    return f"{message.speaker}: {message.content}" if message.speaker else message.content


class BM25Context(BaseModel):
    text: str
    message_ids: list[str]  # each packed message cites itself
    tokens: int


class ConversationBM25:
    """BM25 over a conversation's raw messages; a question sees only the messages created at or
    before its asked_at (one index per distinct cut-off, cached)."""

    def __init__(self, messages: list[Message]):
        self.messages = sorted(messages, key=lambda m: _utc(m.created_at))
        self.times = [_utc(m.created_at) for m in self.messages]
        self.texts = [message_text(m) for m in self.messages]
        self._indices: dict[int, BM25] = {}

    def _index(self, cutoff: int) -> BM25:
        if cutoff not in self._indices:
            self._indices[cutoff] = BM25([tokenize(t) for t in self.texts[:cutoff]])
        return self._indices[cutoff]

    def context(self, query: str, as_of: datetime | None, budget: int) -> BM25Context:
        cutoff = len(self.messages) if as_of is None else bisect.bisect_right(self.times, _utc(as_of))
        ranked = [i for i, _ in self._index(cutoff).rank(tokenize(query))]
        packed = pack_ranked(self.texts, ranked, budget)
        return BM25Context(text=packed.text, message_ids=[self.messages[i].message_id for i in packed.indices],
                           tokens=packed.tokens)


# --- report ----------------------------------------------------------------------------------


class CategoryRow(BaseModel):
    category: str  # "1".."4", "overall", "5"
    name: str
    system: Metrics
    bm25: Metrics
    delta: dict[str, float | None]  # system - bm25


class EvalReport(BaseModel):
    benchmark: str = "locomo"
    data_dir: str
    tenant_id: str
    task_queue: str
    budget: int
    conversations: list[str]
    sessions: int
    messages: int
    facts_extracted: int
    episodes_written: int
    policy: str = ""  # the recall policy preset of `rows`
    rows: list[CategoryRow]  # categories 1-4, then overall
    # The same questions under other recall policy presets (--compare): preset → rows, 1-4 and overall.
    compared: dict[str, list[CategoryRow]] = {}
    adversarial: CategoryRow | None  # category 5, not in overall; None when there is no file
    bm25_floor: dict[str, float]
    bm25_minus_floor: dict[str, float | None]  # overall BM25 here minus the dataset README's floor
    ingest_seconds: float
    questions_seconds: float
    total_seconds: float
    notes: list[str]
    answers: AnswerReport | None = None  # --answer-model/--judge-model: the answer-level evaluation

    def row(self, category: str) -> CategoryRow:
        return next(r for r in self.rows if r.category == category)

    def render(self) -> str:
        def f(v: float | None) -> str:
            return "    -" if v is None else f"{v:5.3f}"

        def d(v: float | None) -> str:
            return "     -" if v is None else f"{v:+6.3f}"

        def cells(m: Metrics) -> str:
            return " ".join([f(m.evidence_all_in_context).rjust(6), f(m.mean_evidence_fraction).rjust(7),
                             f(m.answer_token_coverage).rjust(7)])

        head = "ev.all ev.frac ans.cov"
        lines = [f"LoCoMo eval — {len(self.conversations)} conversations, {self.sessions} sessions, "
                 f"{self.messages} messages, context budget {self.budget} tokens, recall policy {self.policy!r} "
                 f"(tenant {self.tenant_id})",
                 "",
                 f"{'':<17}{'':>5}  {'agent-memory':<22}  {'BM25 baseline':<22}  delta (system - BM25)",
                 f"{'category':<17}{'n':>5}  {head}  {head}  {head}"]
        rows = self.rows + ([self.adversarial] if self.adversarial else [])
        for r in rows:
            label = r.name if r.category == "overall" else f"{r.category} {r.name}"
            if r.category == str(ADVERSARIAL_CATEGORY):
                label += "*"
            dl = " ".join([d(r.delta[k]).rjust(w) for k, w in zip(METRICS, (6, 7, 7), strict=True)])
            lines.append(f"{label:<17}{r.system.questions:>5}  {cells(r.system)}  {cells(r.bm25)}  {dl}")
        for preset, other in self.compared.items():
            lines += ["", f"the same questions under recall policy {preset!r} (agent-memory, delta to {self.policy!r}):"]
            for r in other:
                base = self.row(r.category).system
                label = r.name if r.category == "overall" else f"{r.category} {r.name}"
                dl = " ".join(d(None if a is None or b is None else a - b).rjust(w) for a, b, w in zip(
                    (r.system.evidence_all_in_context, r.system.mean_evidence_fraction, r.system.answer_token_coverage),
                    (base.evidence_all_in_context, base.mean_evidence_fraction, base.answer_token_coverage),
                    (6, 7, 7), strict=True))
                lines.append(f"{label:<17}{r.system.questions:>5}  {cells(r.system)}  {dl}")
        o = self.row("overall")
        lines += ["",
                  f"mean context tokens: agent-memory {o.system.mean_context_tokens or 0:.0f}, "
                  f"BM25 {o.bm25.mean_context_tokens or 0:.0f}",
                  "BM25 overall vs the dataset README's floor "
                  f"({self.bm25_floor['evidence_all_in_context']} / {self.bm25_floor['mean_evidence_fraction']} / "
                  f"{self.bm25_floor['answer_token_coverage']}): "
                  + " ".join(d(self.bm25_minus_floor[k]).strip() for k in METRICS),
                  f"memory: {self.facts_extracted} facts extracted, {self.episodes_written} episodes; "
                  f"ingest+consolidation {self.ingest_seconds:.1f} s, questions {self.questions_seconds:.1f} s, "
                  f"total {self.total_seconds:.1f} s"]
        lines += [f"note: {n}" for n in self.notes]
        if self.answers is not None:
            lines += ["", self.answers.render()]
        return "\n".join(lines)


def build_rows(scored: list[tuple[LocomoQuestion, QuestionScore, QuestionScore]]) -> list[CategoryRow]:
    """Rows per category present (1-4 in order, then 5 if any), then overall over categories 1-4."""
    def row(category: str, name: str, items: list) -> CategoryRow:
        system, bm25 = aggregate([s for _, s, _ in items]), aggregate([b for _, _, b in items])
        return CategoryRow(category=category, name=name, system=system, bm25=bm25, delta=delta(system, bm25))

    rows = [row(str(c), name, [x for x in scored if x[0].category == c]) for c, name in CATEGORIES.items()]
    rows.append(row("overall", "overall", [x for x in scored if x[0].category in CATEGORIES]))
    adversarial = [x for x in scored if x[0].category == ADVERSARIAL_CATEGORY]
    if adversarial:
        rows.append(row(str(ADVERSARIAL_CATEGORY), "adversarial", adversarial))
    return rows


NOTES = [
    "evidence metrics skip questions without evidence ids; answer_token_coverage skips answers without tokens",
    "answer tokens: distinct lowercase \\w+ after NFKC minus stopwords, matched against the context's tokens",
    "BM25: Okapi k1=1.5 b=0.75, idf log(1+(N-df+0.5)/(df+0.5)), \\w+ and CJK bigrams, documents 'Speaker: "
    "content' created at or before asked_at, only messages sharing a query term, packed greedily in rank order "
    "(estimate_tokens + 1 each)",
    "5 adversarial* (not in overall): the answer there is the misleading one, so answer coverage means little",
]


# --- the answer-level setup ------------------------------------------------------------------------


@dataclass
class AnswerSetup:
    answer: Endpoint
    judge: Endpoint
    window: int  # the answer model's context window, in tokens


def conversation_text(conversation: Conversation, as_of: datetime) -> str:
    """Every message of the conversation created at or before `as_of`, dated, in order: the
    full-conversation baseline's context."""
    cut = _utc(as_of)
    return "\n".join(f"[{_utc(m.created_at):%Y-%m-%d %H:%M}] {message_text(m)}"
                     for m in sorted(conversation.messages, key=lambda m: _utc(m.created_at))
                     if _utc(m.created_at) <= cut)


def answer_setup(args) -> AnswerSetup | None:
    """--answer-model/--judge-model and their options; None when neither is given."""
    import os

    if args.answer_model is None and args.judge_model is None:
        return None
    if args.answer_model is None or args.judge_model is None:
        raise InvalidInput("--answer-model and --judge-model go together: give both (the same URL twice is fine)")
    if args.answer_window < 1:
        raise InvalidInput("--answer-window must be a positive number of tokens")
    check_url("--answer-model", args.answer_model)
    check_url("--judge-model", args.judge_model)
    key = os.environ.get(args.api_key_env) or None
    return AnswerSetup(answer=Endpoint("--answer-model", args.answer_model, args.answer_model_name, key),
                       judge=Endpoint("--judge-model", args.judge_model, args.judge_model_name, key),
                       window=args.answer_window)


async def check_endpoints(setup: AnswerSetup) -> None:
    """Both endpoints answer before any server of the stack starts."""
    for endpoint in (setup.answer, setup.judge):
        client = endpoint.client()
        try:
            await preflight(endpoint, client)
        finally:
            await client.close()


# --- the runner ------------------------------------------------------------------------------


def _dump_line(q: LocomoQuestion, context, bm25: BM25Context) -> str:
    return json.dumps({
        "question_id": q.question_id, "conversation_id": q.conversation_id, "category": q.category,
        "question": q.question, "answer": q.answer, "evidence_message_ids": q.evidence_message_ids,
        "asked_at": q.asked_at.isoformat(),
        "context_text": context.text, "context_tokens": context.tokens,
        "items": [{"kind": i.kind, "text": i.text, "cited_message_ids": i.cited_message_ids} for i in context.items],
        "bm25_context_text": bm25.text, "bm25_message_ids": bm25.message_ids, "bm25_tokens": bm25.tokens,
    }, ensure_ascii=False)


async def _bounded(limit: int, jobs: list, on_done=None) -> list:
    semaphore = asyncio.Semaphore(limit)

    async def one(job):
        async with semaphore:
            result = await job()
        if on_done:
            on_done()
        return result

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(job)) for job in jobs]
    return [t.result() for t in tasks]


async def run_locomo_eval(services, data_dir: Path | str, *, budget: int = 1200, limit_conversations: int | None = None,
                          dump: Path | str | None = None, progress: bool = True, task_queue: str | None = None,
                          concurrency: int = DEFAULT_CONCURRENCY, preset: str = DEFAULT_PRESET,
                          compare: Sequence[str] = (), limit_questions: int | None = None,
                          answers: AnswerSetup | None = None) -> EvalReport:
    """Ingest and consolidate every session (real workflows, an in-process worker on its own task
    queue), assemble a context per question under the recall policy `preset` (and each of
    `compare`), score it and the BM25 baseline; with `answers`, answer and judge each question of
    categories 1-4 from that context, from none and from the whole conversation."""
    from agent_memory.api.client import MemoryClient
    from agent_memory.providers.factory import providers_for
    from agent_memory.recall.context import assemble_context
    from workers.worker import build_worker

    unknown = [p for p in (preset, *compare) if p not in PRESETS]
    if unknown:
        raise InvalidInput(f"unknown recall policy preset(s) {unknown}: choose from {list(PRESETS)}")

    if budget < 1:
        raise InvalidInput(f"budget {budget} must be a positive number of tokens")
    if limit_conversations is not None and limit_conversations < 1:
        raise InvalidInput(f"limit_conversations {limit_conversations} must be at least 1")
    if limit_questions is not None and limit_questions < 1:
        raise InvalidInput(f"limit {limit_questions} must be at least 1")
    data = load_locomo(data_dir).limited(limit_conversations).first_questions(limit_questions)
    started = time.monotonic()
    tenant = f"eval-{uuid.uuid4().hex[:8]}"
    task_queue = task_queue or f"agent-memory-{tenant}"
    embedder = providers_for(services.settings).embedder
    client = MemoryClient(services, embedder, task_queue=task_queue)
    sessions_total = sum(len(c.sessions) for c in data.conversations)

    # 1. Ingest and consolidate: conversations side by side, sessions of one in order.
    bar = Progress("ingest+consolidate", sessions_total, enabled=progress)
    results = []

    def conversation_job(conv: Conversation):
        async def job():
            for session in conv.sessions:
                await client.append_messages(tenant, conv.conversation_id, session)
                handle = await client.end_session(tenant, conv.conversation_id, session.session_id)
                results.append(await client.consolidation_result(handle))
                bar.advance()
        return job

    async with build_worker(services, task_queue=task_queue):
        await _bounded(concurrency, [conversation_job(c) for c in data.conversations])
        # Consolidations end at their commits; the subjects' projectors embed the vectors after.
        await client.admin.wait_for_projection(tenant, timeout=1800)
    bar.close()
    ingested = time.monotonic()

    # 2. One context per question from each system.
    questions = data.questions + (data.adversarial or [])
    baselines = {c.conversation_id: ConversationBM25(c.messages) for c in data.conversations}
    bar = Progress("questions", len(questions), enabled=progress)

    def question_job(q: LocomoQuestion, policy_name: str):
        async def job():
            context = await assemble_context(services.pool, services.keyring, embedder, tenant, q.conversation_id,
                                             q.question, as_of=q.asked_at, token_budget=budget,
                                             policy=PRESETS[policy_name])
            bm25 = baselines[q.conversation_id].context(q.question, q.asked_at, budget)
            cited = {m for item in context.items for m in item.cited_message_ids}
            return (q, context, bm25,
                    score_question(q.evidence_message_ids, q.answer, cited, context.text, context.tokens),
                    score_question(q.evidence_message_ids, q.answer, bm25.message_ids, bm25.text, bm25.tokens))
        return job

    answered = await _bounded(concurrency, [question_job(q, preset) for q in questions], bar.advance)
    bar.close()
    compared: dict[str, list[CategoryRow]] = {}
    for other in compare:
        bar = Progress(f"questions ({other})", len(questions), enabled=progress)
        again = await _bounded(concurrency, [question_job(q, other) for q in data.questions], bar.advance)
        bar.close()
        compared[other] = build_rows([(q, sys_score, bm) for q, _, _, sys_score, bm in again])
    if dump is not None:
        with Path(dump).open("w", encoding="utf-8") as f:  # noqa: ASYNC230 - a one-off local dump after the run
            for q, context, bm25, _, _ in answered:
                f.write(_dump_line(q, context, bm25) + "\n")

    answer_report = None
    if answers is not None:
        by_id = {c.conversation_id: c for c in data.conversations}
        jobs = [AnswerJob(question=q.question, gold=q.answer, category=q.category, memory_context=context.text,
                          memory_tokens=context.tokens, conversation=conversation_text(by_id[q.conversation_id],
                                                                                       q.asked_at))
                for q, context, _, _, _ in answered if q.category in CATEGORIES]
        answer_report = await run_answers(jobs, answers.answer, answers.judge, window=answers.window, budget=budget,
                                          categories=CATEGORIES, progress=progress)
    rows = build_rows([(q, s, b) for q, _, _, s, b in answered])
    main_rows = [r for r in rows if r.category != str(ADVERSARIAL_CATEGORY)]
    adversarial = next((r for r in rows if r.category == str(ADVERSARIAL_CATEGORY)), None)
    overall_bm25 = next(r for r in rows if r.category == "overall").bm25
    finished = time.monotonic()
    notes = list(NOTES)
    if data.adversarial is None:
        notes[-1] = "no questions_adversarial.jsonl: adversarial questions not evaluated"
    if budget != 1200 or limit_conversations is not None:
        notes.append("the BM25 floor was measured on all of locomo-dev at 1,200 tokens: bm25_minus_floor only "
                     "means something for such a run")
    return EvalReport(
        data_dir=str(data_dir), tenant_id=tenant, task_queue=task_queue, budget=budget, policy=preset,
        compared=compared,
        conversations=[c.conversation_id for c in data.conversations], sessions=sessions_total,
        messages=sum(len(c.messages) for c in data.conversations),
        facts_extracted=sum(r.facts_extracted for r in results),
        episodes_written=sum(bool(r.episode_written) for r in results),
        rows=main_rows, adversarial=adversarial, bm25_floor=dict(BM25_FLOOR),
        bm25_minus_floor={k: None if getattr(overall_bm25, k) is None else getattr(overall_bm25, k) - v
                          for k, v in BM25_FLOOR.items()},
        ingest_seconds=round(ingested - started, 2), questions_seconds=round(finished - ingested, 2),
        total_seconds=round(finished - started, 2), notes=notes, answers=answer_report)


async def eval_command(args, settings) -> int:
    """The CLI: a private stack (free ports, a temporary home removed afterwards), never the live one."""
    from workers.runtime import scratch_stack

    if args.benchmark != "locomo":  # argparse only offers locomo today
        raise InvalidInput(f"unknown benchmark {args.benchmark!r}")
    if args.budget < 1 or (args.limit_conversations is not None and args.limit_conversations < 1):
        raise InvalidInput("--budget and --limit-conversations must be positive")
    if args.limit is not None and args.limit < 1:
        raise InvalidInput("--limit must be at least 1")
    load_locomo(args.data)  # fail on bad data before starting any server
    answers = answer_setup(args)
    if answers is not None:
        await check_endpoints(answers)
    async with scratch_stack(settings, "eval") as services:
        report = await run_locomo_eval(services, args.data, budget=args.budget,
                                       limit_conversations=args.limit_conversations, dump=args.dump,
                                       preset=args.preset, compare=args.compare or (), limit_questions=args.limit,
                                       answers=answers)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(report.render())
    return 0
