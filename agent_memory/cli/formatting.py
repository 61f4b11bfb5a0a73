"""The output of the `agent-memory` commands: one line per row, the receipts and reports, and the
private files an export writes. Types are imported for checking only, so the commands' help needs
none of the library."""

from __future__ import annotations

import errno
import json
import os
import stat
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent_memory.core.errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import BaseModel

    from agent_memory.core.models import ErasureStatus, FactRow, RederiveReport
    from agent_memory.core.projection_models import ProjectionLag
    from agent_memory.core.run_metadata import RunPayloads
    from agent_memory.providers.policy import ProviderPolicy
    from agent_memory.recall.prompt import BuiltPrompt
    from agent_memory.store.inventory import ImportanceSpread, SessionSummary, SubjectSummary

PolicyT = TypeVar("PolicyT", bound="BaseModel")


def changed_provider_policy(policy: ProviderPolicy, redact: str | None,
                            exclude: list[str] | None) -> ProviderPolicy:
    """The policy with the options given on the command line applied."""
    from agent_memory.providers.policy import ProviderPolicy, parse_kinds

    update: dict[str, Any] = {}
    if redact is not None:
        update["redact"] = parse_kinds(redact)
    if exclude is not None:
        names = [n.strip() for n in exclude if n.strip() and n.strip().lower() != "none"]  # none: clear
        update["exclude_namespaces"] = list(dict.fromkeys(names))
    return ProviderPolicy.model_validate({**policy.model_dump(), **update})


def check_private_target(path: Path, *, force: bool = False) -> None:
    """Refuse, before any work, a target `write_private` would refuse: a symbolic link always,
    an existing file unless `force`."""
    if path.is_symlink():
        raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never written)")
    if path.exists() and not force:
        raise InvalidInput(f"--out {path} exists: name a new file, or add --force to replace it")


def write_private(path: Path, text: str, *, force: bool = False) -> None:
    """Write a file only its owner can read (an export holds a person's data). The file is
    created here (O_EXCL), never reached through a symbolic link (O_NOFOLLOW), so a link or a
    file planted at `path` is not written through; `force` replaces an existing regular file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        if path.is_symlink():
            raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never "
                               "written)") from None
        raise InvalidInput(f"--out {path} exists: name a new file, or add --force to replace it") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW on a link
            raise InvalidInput(f"--out {path} is a symbolic link: name a new file (the link's target is never "
                               "written)") from None
        raise
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        if not stat.S_ISREG(os.fstat(out.fileno()).st_mode):
            raise InvalidInput(f"--out {path} is not a regular file: name a new file")
        os.fchmod(out.fileno(), 0o600)  # a replaced file keeps its old mode otherwise
        out.write(text)


def format_projection_lag(lag: ProjectionLag) -> str:
    age = lag.oldest_pending_age_seconds
    return (f"projection: {lag.pending} pending ({lag.due} due now, {lag.retrying} retrying)"
            + (f", oldest {age:.0f} s old" if age is not None else "")
            + f", {lag.dead_letters} dead letter(s)")


def format_importance(spread: ImportanceSpread) -> str:
    """The episodes' importance: min, median, max and the count per score, then the warning of a
    collapsed score on a line of its own."""
    if not spread.episodes:
        return "episode importance: no episodes yet"
    counts = "  ".join(f"{score}:{n}" for score, n in spread.per_score.items() if n)
    line = (f"episode importance: {spread.episodes} episodes, min {spread.min}, median {spread.median:g}, "
            f"max {spread.max}  (score:episodes {counts})")
    return line + (f"\nwarning: {spread.warning}" if spread.warning else "")


def format_fact(f: FactRow) -> str:
    until = f.valid_to.isoformat() if f.valid_to else "now"
    status = "" if f.status == "active" else f"  ({f.status})"
    return (f"{f.namespace}/{f.key} = {f.value!r}  [{f.valid_from.isoformat()} → {until}]  v{f.version} "
            f"confidence {f.confidence:.2f}  confirmed {f.last_confirmed_at.isoformat()}  "
            f"evidence {','.join(f.evidence_message_ids)}  by {f.extracted_by or 'unknown'}{status}")


def format_run_payloads(run: RunPayloads) -> str:
    """A run's decoded input and result, indented under its line (one compact JSON each)."""
    lines = [f"    summary {run.summary}"] if run.summary else []
    if run.unreadable:
        return "\n".join([*lines, f"    payloads not decodable here: {run.unreadable}"])
    lines.append(f"    input   {json.dumps(run.input, separators=(',', ':'), default=str)}")
    if run.result is not None:
        lines.append(f"    result  {json.dumps(run.result, separators=(',', ':'), default=str)}")
    return "\n".join(lines)


def format_erasure_status(status: ErasureStatus) -> str:
    lines = [f"request {status.request_id}: {status.status} (requested {status.requested_at:%Y-%m-%d %H:%M:%S})",
             f"  reason: {status.reason}"]
    if status.receipt is not None:
        r = status.receipt
        lines.append(f"  residue {r.residue_total}; removed " + ", ".join(f"{k} {v}" for k, v in r.removed.items()))
        lines.append(f"  subject key shredded: {r.key_shredded} (wrapped by KEK {status.key_wrapped_by})")
    lines.append("  shred irreversible: " + (
        f"yes, since {status.shred_irreversible_at:%Y-%m-%d %H:%M:%S} (rotation to {status.shred_irreversible_by_rotation})"
        if status.shred_irreversible and status.shred_irreversible_at else
        "not yet: a copy of the wrapped key in WAL or a backup decrypts until the next key rotation"))
    lines.append("  compacted: " + (f"yes, {status.compacted_at:%Y-%m-%d %H:%M:%S} ({status.compaction_id})"
                                    if status.compacted and status.compacted_at else
                                    "not yet (the hourly compaction Schedule, or agent-memory compact)"))
    lines.extend(f"  held back by Schedule {schedule_id}: {why}" for schedule_id, why in status.held_back_by.items())
    return "\n".join(lines)


def format_context(assembled) -> str:
    lines = [f"[{item.tier}] {item.text}   ⟨{item.kind}" + (f"; score {item.score:.3f}" if item.tier == "episodic" else "")
             + f"; cites {', '.join(item.cited_message_ids)}⟩" for item in assembled.items]
    lines.append(f"({len(assembled.items)} items; profile ~{assembled.profile_tokens} of {assembled.profile_budget} "
                 f"tokens, episodic ~{assembled.episodic_tokens} of {assembled.episodic_budget}, total budget "
                 f"{assembled.budget})")
    return "\n".join(lines)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_explanations(assembled) -> str:
    """Why each item is in the context, and the best candidates that are not: a row per item with
    its routes' ranks (lexical, vector, entity), relevance and the factors of its score."""
    header = (f"{'in':<13} {'tier':<8} {'kind':<11} {'score':>7} {'lex':>4} {'vec':>4} {'sim':>6} {'ent':>4} "
              f"{'relev':>6} {'decay':>6} {'imp':>5} {'access':>6} {'stale':>5}  memory")
    rows = [header]
    for item in [*assembled.items, *(assembled.below_budget or [])]:
        x = item.explanation
        if x is None:
            continue
        vector = x.routes.get("vector")
        ranks = [str(hit.rank) if (hit := x.routes.get(r)) is not None else "-" for r in ("lexical", "vector", "entity")]
        if x.profile is not None:  # a fact: its profile rank and the query words it shares stand for the routes
            ranks = [f"p{x.profile.rank}", "-", "-"]
        admitted = "yes" if x.admitted else f"no:{x.not_admitted}"
        rows.append(f"{admitted:<13} {x.tier:<8} {item.kind:<11} {x.score:>7.3f} {ranks[0]:>4} {ranks[1]:>4} "
                    f"{_num(vector.similarity if vector else None):>6} {ranks[2]:>4} {_num(x.relevance):>6} "
                    f"{_num(x.time_decay):>6} {_num(x.importance_term, 2):>5} {_num(x.access_term):>6} "
                    f"{x.staleness_term:>5.2f}  {item.memory_id}")
    return "\n".join(rows)


def format_recall_explanations(recalled) -> str:
    rows = [f"{'kind':<8} {'rank':>4} {'vec':>4} {'sim':>6} {'stale':>5}  memory"]
    rows += [f"{x.kind:<8} {x.rank:>4} {x.vector_rank or '-':>4} {_num(x.similarity):>6} {x.staleness_term:>5.2f}  "
             f"{x.memory_id}" for x in recalled.explanations or []]
    return "\n".join(rows)


def format_prompt(built: BuiltPrompt) -> str:
    lines = []
    for block in built.blocks:
        budget = f" of {block.budget}" if block.budget is not None else ""
        lines.append(f"── {block.name} ({block.tokens}{budget} tokens" + (
            f", {len(block.item_ids)} items" if block.name in ("profile", "episodic", "recent") else "") + ")")
        lines += [f"{m.role}: {m.content}" for m in block.messages]
    lines.append(f"({built.tokens} tokens; recent turns from {built.recent_source}, {built.summarized_turns} "
                 "summarised)")
    return "\n".join(lines)


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M}" if moment is not None else "never"


def format_subject(row: SubjectSummary) -> str:
    return (f"{row.subject_id:<24} {row.sessions} sessions, {row.messages} messages, {row.current_facts} current facts, "
            f"{row.episodes} episodes; last message {_when(row.last_message_at)}, last consolidated "
            f"{_when(row.last_consolidated_at)}")


def format_session(row: SessionSummary) -> str:
    episode = f", episode importance {row.episode_importance}" if row.episode_importance is not None else ""
    pending = f", {row.unconsolidated} not consolidated yet" if row.unconsolidated else ""
    return (f"{row.session_id:<24} {row.messages} messages {_when(row.first_message_at)} → "
            f"{_when(row.last_message_at)}; consolidated {_when(row.last_consolidated_at)}{pending}{episode}")


def with_changes(base: PolicyT, changes: list[str]) -> PolicyT:
    """`base` (a recall or retention policy) with FIELD=VALUE changes applied ("none" clears an
    optional field); a bad field or value raises InvalidInput naming it."""
    model = type(base)
    fields = dict(base.model_dump())
    for change in changes:
        name, sep, value = change.partition("=")
        if not sep or name not in model.model_fields:
            raise InvalidInput(f"{change!r} is not FIELD=VALUE with a policy field; fields: "
                               f"{', '.join(model.model_fields)}")
        if "dict" in str(model.model_fields[name].annotation):  # KEY:VALUE pairs, merged into the current
            fields[name] = {**(fields[name] or {}), **_pairs(name, value)}
        elif value.strip().lower() in ("none", "null", ""):
            fields[name] = None
        elif "list" in str(model.model_fields[name].annotation):  # a list field: comma-separated
            fields[name] = [v.strip() for v in value.split(",") if v.strip()]
        else:
            fields[name] = value
    return model.model_validate(fields)


def _pairs(name: str, value: str) -> dict[str, str | None]:
    """`location:90,profile:none` as a mapping ("none" clears the entry's value)."""
    pairs: dict[str, str | None] = {}
    for part in (p.strip() for p in value.split(",") if p.strip()):
        key, sep, item = part.partition(":")
        if not sep or not key.strip():
            raise InvalidInput(f"{name}: {part!r} is not KEY:VALUE; write e.g. {name}=location:90,profile:none")
        pairs[key.strip()] = None if item.strip().lower() in ("none", "null", "") else item.strip()
    return pairs


def budget(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise InvalidInput("--budget must be a positive number of tokens")
    return value


def format_rederive(report: RederiveReport) -> str:
    """A re-derivation: per subject its sessions and each difference by kind, then the totals."""
    r = report.result
    lines: list[str] = []
    for subject in report.subjects:
        lines.append(f"{subject.subject_id}: {len(subject.sessions)} session(s)")
        for kind in ("added", "changed", "unsupported", "kept_confirmed", "withheld"):
            for c in getattr(subject, kind):
                values = (f"{c.current_value} → {c.derived_value}" if c.current_value and c.derived_value
                          else c.derived_value or c.current_value or "")
                lines.append(f"  {kind.replace('_', ' '):<15} {c.namespace}/{c.key}: {values}  ({c.reason})")
    t = r.totals
    what = "would change (dry run, nothing written)" if r.dry_run else f"{t.events_appended} events appended"
    lines.append(f"{r.subjects} subject(s), {t.sessions} session(s) re-derived by {r.extractor or 'the extractor'}: "
                 f"{t.added} added, {t.changed} changed, {t.unsupported} unsupported (left as they are), "
                 f"{t.kept_confirmed} kept (confirmed), {t.withheld} withheld; {what}")
    return "\n".join(lines)
