"""A model's reply read as JSON and validated against a response model: tolerant of ```json fences,
chatter around the JSON and <think> blocks; anything else is ProviderOutputInvalid."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent_memory.core.models import storable_text
from agent_memory.providers.errors import ProviderOutputInvalid

M = TypeVar("M", bound=BaseModel)


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript)?[ \t]*\r?\n?(.*?)```", re.S)


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the JSON object/array opening at `start`, honouring strings and escapes."""
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return None
            if not stack:
                return i + 1
    return None


MAX_JSON_STARTS = 16


def extract_json(text: str) -> Any:
    """The JSON payload of a model's reply: the whole text, else the first ```json fence, else the
    first balanced object/array that parses. Raises ProviderOutputInvalid(raw_text, errors)."""
    raw = text or ""
    body = _THINK.sub("", raw).strip()
    if not body:
        raise ProviderOutputInvalid(raw, ["empty output"])
    candidates = [body] + [m.group(1).strip() for m in _FENCE.finditer(body)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            pass
    # Only the first few openings are tried: scanning from every "{" is quadratic in the length.
    for match in itertools.islice(re.finditer(r"[{\[]", body), MAX_JSON_STARTS):
        end = _balanced_end(body, match.start())
        if end is None:
            continue
        try:
            return json.loads(body[match.start():end])
        except (ValueError, RecursionError):
            continue
    raise ProviderOutputInvalid(raw, ["no parseable JSON object or array in the output"])


def _unstorable(payload: Any) -> str | None:
    """The first string Postgres could not store (NUL, lone surrogate), as a reason."""
    if isinstance(payload, str):
        try:
            storable_text(payload)
        except ValueError as exc:
            return str(exc)
    elif isinstance(payload, dict):
        return next((r for v in [*payload.keys(), *payload.values()] if (r := _unstorable(v))), None)
    elif isinstance(payload, list):
        return next((r for v in payload if (r := _unstorable(v))), None)
    return None


def validated(raw: str, payload: Any, model: type[M]) -> M:
    if reason := _unstorable(payload):  # refuse before anything is recorded, not half-way
        raise ProviderOutputInvalid(raw, [f"a value {reason}"])
    fields = list(model.model_fields)
    # A bare list where {"facts": [...]} was asked: the first field's, when the others may be left out.
    if isinstance(payload, list) and fields and not any(model.model_fields[f].is_required() for f in fields[1:]):
        payload = {fields[0]: payload}
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        # loc and msg only: the offending input values may repeat the transcript
        errors = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in exc.errors()]
        raise ProviderOutputInvalid(raw, errors) from None
