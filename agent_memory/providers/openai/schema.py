"""Structured output's JSON schemas: the strict subset a server enforces, every array bounded, and
the per-call narrowing of a schema (fewer items, cited ids from an enum)."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

from agent_memory.core.models import Message

# Every array in a response schema is bounded: a small model under a grammar otherwise keeps
# appending items until max_tokens and the JSON is cut off. (No maxLength on strings: it makes
# grammar-constrained decoding an order of magnitude slower.)
MAX_ITEMS = 16


def strict_json_schema(model: type[BaseModel]) -> dict:
    """The model's JSON schema in the strict subset: every object closed and every property
    required (optional values are nullable instead), no defaults, every array bounded."""

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            # Names in "properties" and "$defs" are names, not keywords (a property may be called "default").
            node = {k: ({name: fix(sub) for name, sub in v.items()} if k in ("properties", "$defs") else fix(v))
                    for k, v in node.items() if k != "default"}
            types = node.get("type")
            if types == "object" or "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node.get("properties", {}))
            # Any array, however nested ($defs, anyOf, a nullable ["array", "null"] type, items of items).
            if types == "array" or (isinstance(types, list) and "array" in types) or "items" in node \
                    or "prefixItems" in node:
                node.setdefault("maxItems", MAX_ITEMS)
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return fix(model.model_json_schema())


def cited_schema(schema: dict, prop: str, messages: list[Message], enabled: bool) -> dict:
    """The schema (a copy, when enabled) whose `prop` arrays may only hold these messages' ids."""
    if not enabled:
        return schema
    schema = copy.deepcopy(schema)
    for node in [schema, *schema.get("$defs", {}).values()]:
        if (cited := node.get("properties", {}).get(prop)) is not None:
            cited["items"] = {"type": "string", "enum": list(dict.fromkeys(m.message_id for m in messages))}
    return schema


def bounded_schema(schema: dict, **bounds: int | None) -> dict:
    """The schema with the maxItems of the named array properties (wherever defined) lowered to
    the given bounds; None leaves one as it is."""
    for node in [schema, *schema.get("$defs", {}).values()]:
        for name, prop in node.get("properties", {}).items():
            if bounds.get(name) is not None and "maxItems" in prop:
                prop["maxItems"] = min(prop["maxItems"], bounds[name])
    return schema
