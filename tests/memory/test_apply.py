"""The projection's handlers: every event type of the log has exactly one (server-free; what
each handler writes is checked by the commit, forget and rebuild tests on the embedded stack)."""

from __future__ import annotations

import inspect
import typing

import pytest
from pydantic import BaseModel

from agent_memory.memory import events
from agent_memory.memory.apply import HANDLERS, _handles
from agent_memory.memory.events import EventPayload, FactCreated


def _event_types() -> set[type]:
    """The payload classes a stored event can be read as (the members of EventPayload)."""
    union, *_ = typing.get_args(EventPayload)
    return set(typing.get_args(union))


def test_every_event_type_has_a_projection_handler():
    missing = sorted(t.__name__ for t in _event_types() - HANDLERS.keys())
    unknown = sorted(t.__name__ for t in HANDLERS.keys() - _event_types())
    assert (missing, unknown) == ([], [])


def test_every_payload_class_of_the_events_module_is_an_event_type():
    # A payload class defined with its `type` tag but left out of EventPayload would be neither
    # readable from the log nor checked above.
    tagged = {cls for _, cls in inspect.getmembers(events, inspect.isclass)
              if cls.__module__ == events.__name__ and "type" in getattr(cls, "model_fields", {})}
    assert tagged == _event_types()
    assert len(tagged) >= 16


def test_a_second_handler_for_an_event_type_is_refused():
    class Unhandled(BaseModel):
        pass

    handlers = dict(HANDLERS)

    async def again(t, p) -> None:
        return None

    with pytest.raises(TypeError, match="FactCreated already has a projection handler"):
        _handles(Unhandled, FactCreated)(again)
    assert handlers == HANDLERS  # nothing of the refused registration is kept
