"""Answer-level evaluation on LoCoMo: an answer model answers each question from a context, a judge
model grades the answer against the gold one (CORRECT/WRONG), as the LoCoMo results of Mem0, Zep,
MemOS and Letta are reported. Three contexts per question: the assembled memory context, none
(the question alone), and the whole conversation up to the question when it fits the answer model's
window ("does not fit" otherwise, counted apart, never truncated).

The top half is pure (prompts, judge parsing, the window rule, aggregation, the table); the bottom
half calls the OpenAI-compatible endpoints.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from pydantic import BaseModel

from agent_memory.core.errors import ServiceUnavailable
from agent_memory.providers.base import estimate_tokens

COLUMNS = ("memory", "no_memory", "full_conversation")
COLUMN_TITLES = {"memory": "memory", "no_memory": "no memory", "full_conversation": "full conversation"}
ANSWER_MAX_TOKENS = 64
JUDGE_MAX_TOKENS = 16
DEFAULT_ANSWER_WINDOW = 128_000
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ATTEMPTS = 3  # one call and two retries of a transient failure

ANSWER_SYSTEM = ("You answer questions about a conversation between two people, using only the memories given. "
                 "Answer in a short phrase (at most a few words). Give dates as they are written in the "
                 "memories. If the memories do not say, answer from what you know.")
JUDGE_SYSTEM = "You grade answers. Reply with exactly one word: CORRECT or WRONG."
# The LoCoMo judge prompt as the peers use it: generous on wording, strict on the fact and the date.
JUDGE_PROMPT = """Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. You will be given:
(1) a question (posed by one user to another user),
(2) a 'gold' (ground truth) answer,
(3) a generated answer,
which you will score as CORRECT or WRONG.

The gold answer will usually be a concise and short answer that includes the referenced topic. The generated \
answer might be much longer, but you should be generous with your grading - as long as it touches on the same \
topic as the gold answer, it should be counted as CORRECT.

For time related questions, the gold answer will be a specific date, month, year, etc. The generated answer \
might be much longer or use relative time references (like "last Tuesday" or "next month"), but you should be \
generous with your grading - as long as it refers to the same date or time period as the gold answer, it should \
be counted as CORRECT. Even if the format differs (e.g., "May 7th" vs "7 May"), consider it CORRECT if it's the \
same date. A different fact, person, place or date is WRONG.

Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Reply with one word: CORRECT or WRONG."""


def answer_prompt(question: str, context: str | None) -> str:
    if context is None:
        return f"Question: {question}\nAnswer:"
    return f"Memories:\n{context}\n\nQuestion: {question}\nAnswer:"


def judge_prompt(question: str, gold: Any, answer: str) -> str:
    gold_text = gold if isinstance(gold, str) else str(gold)
    return JUDGE_PROMPT.format(question=question, gold=gold_text, answer=answer)


_LABEL = re.compile(r"\b(CORRECT|WRONG|INCORRECT)\b", re.IGNORECASE)


def parse_judgement(text: str | None) -> bool | None:
    """True for CORRECT, False for WRONG (or INCORRECT); None when the reply is malformed: no label,
    or both labels (a judge that hedges is an error, never a pass). A JSON reply such as
    {"label": "CORRECT"} is read the same way."""
    if not text:
        return None
    labels = {m.upper() for m in _LABEL.findall(text)}
    labels = {"WRONG" if x == "INCORRECT" else x for x in labels}
    if labels == {"CORRECT"}:
        return True
    if labels == {"WRONG"}:
        return False
    return None


def fits_window(prompt_tokens: int, window: int, *, answer_tokens: int = ANSWER_MAX_TOKENS) -> bool:
    """Whether a prompt of `prompt_tokens` (estimated) leaves room for the answer in `window`."""
    return prompt_tokens + answer_tokens <= window


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# --- results ---------------------------------------------------------------------------------------


class Graded(BaseModel):
    """One question under one column."""

    category: int
    fits: bool = True  # False: the full conversation does not fit; nothing was asked
    context_tokens: int = 0
    answer: str | None = None
    latency_seconds: float | None = None  # the answer call, retries included
    correct: bool | None = None  # None: not graded (answer or judge failed, or the judge was malformed)
    error: str | None = None


class ColumnMetrics(BaseModel):
    questions: int
    graded: int  # questions with a CORRECT/WRONG judgement
    correct: int
    errors: int  # answer call failed or the judge reply was malformed: counted as not correct
    does_not_fit: int  # not asked (full conversation only); outside `accuracy`
    accuracy: float | None  # correct / (questions - does_not_fit)
    mean_context_tokens: float | None
    latency_p50_seconds: float | None
    latency_p95_seconds: float | None


def column_metrics(items: Sequence[Graded]) -> ColumnMetrics:
    asked = [g for g in items if g.fits]
    correct = sum(g.correct is True for g in asked)
    latencies = [g.latency_seconds for g in asked if g.latency_seconds is not None]
    return ColumnMetrics(
        questions=len(items), graded=sum(g.correct is not None for g in asked), correct=correct,
        errors=sum(g.correct is None for g in asked), does_not_fit=len(items) - len(asked),
        accuracy=correct / len(asked) if asked else None,
        mean_context_tokens=sum(g.context_tokens for g in asked) / len(asked) if asked else None,
        latency_p50_seconds=percentile(latencies, 50), latency_p95_seconds=percentile(latencies, 95))


WIDTH = 31  # one column's cells: acc, err, tok, p50, p95


class AnswerRow(BaseModel):
    category: str  # "1".."4" or "overall"
    name: str
    columns: dict[str, ColumnMetrics]  # COLUMNS


class AnswerReport(BaseModel):
    answer_model: str  # name @ url
    judge_model: str
    answer_window: int
    budget: int
    rows: list[AnswerRow]  # categories present (1-4 in order), then overall
    seconds: float
    notes: list[str]

    def row(self, category: str) -> AnswerRow:
        return next(r for r in self.rows if r.category == category)

    def render(self) -> str:
        def f(v: float | None, spec: str) -> str:
            return "-" if v is None else format(v, spec)

        head = f"{'acc':>5} {'err':>4} {'tok':>6} {'p50 s':>6} {'p95 s':>6}"
        lines = [f"LoCoMo answer-level eval — answer model {self.answer_model}, judge {self.judge_model}, "
                 f"memory context budget {self.budget} tokens, answer window {self.answer_window} tokens", "",
                 f"{'':<17}{'':>5}  " + "  ".join(f"{COLUMN_TITLES[c]:<{WIDTH}}" for c in COLUMNS) + "  full: not fit",
                 f"{'category':<17}{'n':>5}  " + "  ".join(f"{head:<{WIDTH}}" for _ in COLUMNS)]
        for r in self.rows:
            label = r.name if r.category == "overall" else f"{r.category} {r.name}"
            cells = []
            for c in COLUMNS:
                m = r.columns[c]
                cells.append(f"{f(m.accuracy, '5.3f'):>5} {m.errors:>4} {f(m.mean_context_tokens, '6.0f'):>6} "
                             f"{f(m.latency_p50_seconds, '6.2f'):>6} {f(m.latency_p95_seconds, '6.2f'):>6}".ljust(WIDTH))
            questions = r.columns["memory"].questions
            lines.append(f"{label:<17}{questions:>5}  " + "  ".join(cells)
                         + f"  {r.columns['full_conversation'].does_not_fit:>13}")
        lines += ["", "acc: judged CORRECT / questions asked (errors count as not correct); err: answer call failed "
                  "or judge reply malformed; tok: mean context tokens; p50/p95: answer latency"]
        lines += [f"note: {n}" for n in self.notes] + [f"answer eval {self.seconds:.1f} s"]
        return "\n".join(lines)


def build_answer_rows(graded: Sequence[dict[str, Graded]], categories: dict[int, str]) -> list[AnswerRow]:
    """Rows per category present in `graded` (in `categories` order), then overall."""
    rows = []
    for number, name in categories.items():
        items = [g for g in graded if g["memory"].category == number]
        if items:
            rows.append(AnswerRow(category=str(number), name=name,
                                  columns={c: column_metrics([g[c] for g in items]) for c in COLUMNS}))
    rows.append(AnswerRow(category="overall", name="overall",
                          columns={c: column_metrics([g[c] for g in graded]) for c in COLUMNS}))
    return rows


NOTES = [
    "memory: the assembled context (the one the retrieval figures measure); no memory: the question alone; full "
    "conversation: every message up to the question's time, when it fits the answer window (else 'not fit', "
    "outside its accuracy)",
    "judge: the LoCoMo judge prompt (lenient on wording, strict on facts and dates); a reply that is not exactly "
    "one of CORRECT/WRONG is an error",
    "categories 1-4 only; adversarial questions (5) are not answered",
    "tokens are the product's estimate (estimate_tokens), not the answer model's tokenizer",
]


# --- the endpoints ---------------------------------------------------------------------------------


class EndpointError(ServiceUnavailable):
    """An endpoint that cannot be used: the message names the flag and the fix (exit 1)."""


@dataclass
class Endpoint:
    flag: str  # "--answer-model" or "--judge-model", for messages
    url: str
    model: str | None
    api_key: str | None
    timeout_seconds: float = 120.0

    def client(self) -> Any:
        from openai import AsyncOpenAI

        # Retries are ours (bounded, transient errors only): the vendor client's are off.
        return AsyncOpenAI(base_url=self.url, api_key=self.api_key or "not-needed", max_retries=0,
                           timeout=self.timeout_seconds)


def check_url(flag: str, url: str) -> None:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise EndpointError(f"{flag} {url!r} is not an http(s) URL: give the OpenAI-compatible base URL, e.g. "
                            "http://127.0.0.1:8080/v1 or https://api.openai.com/v1")


def _transient(exc: BaseException) -> bool:
    import openai

    return isinstance(exc, openai.APIConnectionError | openai.RateLimitError | openai.InternalServerError)


async def with_retries(call: Callable[[], Awaitable[Any]], attempts: int = ATTEMPTS) -> Any:
    """`call` once, then again on a transient failure (connection, timeout, 429, 5xx), with backoff."""
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

    async for attempt in AsyncRetrying(retry=retry_if_exception(_transient), stop=stop_after_attempt(attempts),
                                       wait=wait_exponential(multiplier=0.5, max=8), reraise=True):
        with attempt:
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover - AsyncRetrying returns or raises


async def preflight(endpoint: Endpoint, client: Any) -> str:
    """The endpoint answers, the key is accepted; the model name (the first listed when not given)."""
    import openai

    try:
        models = await with_retries(lambda: client.models.list(), attempts=2)
    except openai.AuthenticationError:
        raise EndpointError(f"{endpoint.flag} {endpoint.url}: the key was refused (401): set the key in the "
                            "variable named by --api-key-env") from None
    except (openai.APIConnectionError, openai.InternalServerError) as exc:
        raise EndpointError(f"{endpoint.flag} {endpoint.url}: unreachable ({type(exc).__name__}): start the "
                            "server or fix the URL (an OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1)"
                            ) from None
    except openai.APIStatusError as exc:
        if endpoint.model:  # some servers list no models; the name given is used as is
            return endpoint.model
        raise EndpointError(f"{endpoint.flag} {endpoint.url}: listing models failed ({exc.status_code}): pass "
                            f"{endpoint.flag}-name NAME") from None
    if endpoint.model:
        return endpoint.model
    ids = [m.id for m in getattr(models, "data", [])]
    if not ids:
        raise EndpointError(f"{endpoint.flag} {endpoint.url} lists no model: pass {endpoint.flag}-name NAME")
    return ids[0]


async def chat(client: Any, model: str, system: str, prompt: str, max_tokens: int) -> str:
    response = await with_retries(lambda: client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
        max_tokens=max_tokens, temperature=0))
    return (response.choices[0].message.content or "").strip()


@dataclass
class AnswerJob:
    question: str
    gold: Any
    category: int
    memory_context: str
    memory_tokens: int
    conversation: str  # every message up to the question's time


async def grade_one(job: AnswerJob, column: str, *, answer_client: Any, answer_model: str, judge_client: Any,
                    judge_model: str, window: int) -> Graded:
    context: str | None
    if column == "memory":
        context, tokens = job.memory_context, job.memory_tokens
    elif column == "no_memory":
        context, tokens = None, 0
    else:
        context, tokens = job.conversation, estimate_tokens(job.conversation)
    prompt = answer_prompt(job.question, context)
    if column == "full_conversation" and not fits_window(estimate_tokens(ANSWER_SYSTEM + prompt), window):
        return Graded(category=job.category, fits=False, context_tokens=tokens)
    started = time.monotonic()
    try:
        answer = await chat(answer_client, answer_model, ANSWER_SYSTEM, prompt, ANSWER_MAX_TOKENS)
    except Exception as exc:  # one failed question is an error in the table, not a failed run
        return Graded(category=job.category, context_tokens=tokens, error=f"answer: {type(exc).__name__}: {exc}"[:300])
    latency = time.monotonic() - started
    try:
        verdict = await chat(judge_client, judge_model, JUDGE_SYSTEM, judge_prompt(job.question, job.gold, answer),
                             JUDGE_MAX_TOKENS)
    except Exception as exc:
        return Graded(category=job.category, context_tokens=tokens, answer=answer, latency_seconds=latency,
                      error=f"judge: {type(exc).__name__}: {exc}"[:300])
    correct = parse_judgement(verdict)
    return Graded(category=job.category, context_tokens=tokens, answer=answer, latency_seconds=latency,
                  correct=correct, error=None if correct is not None else f"judge reply malformed: {verdict[:80]!r}")


async def run_answers(jobs: Sequence[AnswerJob], answer: Endpoint, judge: Endpoint, *, window: int, budget: int,
                      categories: dict[int, str], concurrency: int = 2, progress: bool = True) -> AnswerReport:
    from agent_memory.cli.progress import Progress

    started = time.monotonic()
    answer_client, judge_client = answer.client(), judge.client()
    try:
        answer_model = await preflight(answer, answer_client)
        judge_model = await preflight(judge, judge_client)
        semaphore = asyncio.Semaphore(concurrency)
        bar = Progress("answers", len(jobs) * len(COLUMNS), enabled=progress)

        async def one(job: AnswerJob, column: str) -> Graded:
            async with semaphore:
                result = await grade_one(job, column, answer_client=answer_client, answer_model=answer_model,
                                         judge_client=judge_client, judge_model=judge_model, window=window)
            bar.advance()
            if result.error:
                print(f"answer eval: {column}: {result.error}", file=sys.stderr)
            return result

        async with asyncio.TaskGroup() as group:
            tasks = [{c: group.create_task(one(job, c)) for c in COLUMNS} for job in jobs]
        bar.close()
    finally:
        await answer_client.close()
        await judge_client.close()
    graded = [{c: t.result() for c, t in row.items()} for row in tasks]
    return AnswerReport(answer_model=f"{answer_model} @ {answer.url}", judge_model=f"{judge_model} @ {judge.url}",
                        answer_window=window, budget=budget, rows=build_answer_rows(graded, categories),
                        seconds=round(time.monotonic() - started, 2), notes=list(NOTES))
