"""The shared seat: several people speaking under one account in one session (user-role messages
with different `speaker` names). Only the account holder's statements are the subject's facts.

The holder of a session is the subject-role speaker whose name is the subject's known name
(`profile/name` among the current facts: the whole name, or its first word against a speaker's
first word), else the speaker of the session's first subject-role message. A session with at most
one named subject-role speaker has no holder to decide: every subject-role message is the
subject's, as in any session. A subject-role message without a speaker name in a shared session is
the holder's (the account's own voice).

What another speaker says about themselves is theirs: their edges start from the person entity
named by their speaker name (the offline extractor's entities.py and relations.py); their other
first-person facts (an allergy, a diet, a job title) are no relation's and are counted as withheld
(`ANOTHER_SPEAKER`).
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_memory.core.entities import fold
from agent_memory.core.models import KnownFact, Message

__all__ = ["ANOTHER_SPEAKER", "GENERIC_SPEAKERS", "holds_seat", "session_holder", "speaker_key"]

# The withheld reason of a fact another person sharing the account stated about themselves.
ANOTHER_SPEAKER = "another_speaker"
# Speaker labels that name a role, not a person.
GENERIC_SPEAKERS = frozenset({"user", "assistant", "system", "tool", "bot", "ai", "me", "you", "用户", "助手"})


def speaker_key(message: Message) -> str | None:
    """The message's speaker as compared (case and spacing folded); None when it names nobody."""
    key = fold(message.speaker or "")
    return key if key and key not in GENERIC_SPEAKERS else None


def session_holder(messages: Iterable[Message], subject_role: str = "user",
                   known: Iterable[KnownFact] | None = None) -> str | None:
    """The speaker key of the account holder when several named speakers share the subject's role,
    else None (see the module docstring)."""
    speakers = list(dict.fromkeys(key for m in messages if m.role == subject_role and (key := speaker_key(m))))
    if len(speakers) < 2:
        return None
    names = [fold(f.value) for f in known or () if (f.namespace, f.key) == ("profile", "name") and f.value.strip()]
    for name in reversed(names):  # the newest known name first
        if name in speakers:
            return name
        first = [s for s in speakers if s.split()[0] == name.split()[0]]
        if len(first) == 1:
            return first[0]
    return speakers[0]


def holds_seat(message: Message, holder: str | None) -> bool:
    """Whether a subject-role message is the holder's: any, when there is no holder to decide."""
    return holder is None or speaker_key(message) in (None, holder)
