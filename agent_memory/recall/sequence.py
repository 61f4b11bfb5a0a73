"""Questions about a sequence ("what did she do after the trip?", "然后呢？"): the answer is
usually in the turns that follow a hit, which share none of the question's words. For such a
question the notes next in time to the best hits — the following (or preceding) turns of the same
session — join the candidates, each scored a step below the note it follows.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

import psycopg
from psycopg.rows import dict_row

Direction = Literal["after", "before"]

ANCHORS = 3  # the best-scored notes whose neighbours are brought in
NEIGHBOURS = 2  # turns taken on each anchor's side
STEP_DECAY = 0.8  # a neighbour scores its anchor's score × STEP_DECAY ** steps away

_AFTER = re.compile(r"\b(?:after|afterwards?|next|then|later|following|subsequently)\b|之后|以后|然后|接下来|后来")
_BEFORE = re.compile(r"\b(?:before|previously|prior|earlier|beforehand)\b|之前|以前")


def sequence_direction(query: str) -> Direction | None:
    """Which side of a hit the question asks about; None when it asks about no sequence (or about
    both sides, where neither is favoured)."""
    text = query.lower()
    after, before = bool(_AFTER.search(text)), bool(_BEFORE.search(text))
    if after == before:
        return None
    return "after" if after else "before"


async def neighbour_notes(conn: psycopg.AsyncConnection, tenant_id: str, subject_id: str, anchor_ids: list[str],
                          direction: Direction, as_of: datetime | None,
                          since: datetime | None) -> list[tuple[str, int, dict]]:
    """(anchor memory id, steps away, note row) for up to NEIGHBOURS notes of each anchor's session
    on `direction`'s side of it, by turn order; rows carry the fields of a context candidate."""
    if not anchor_ids:
        return []
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(_NEIGHBOURS_SQL, {"tenant": tenant_id, "subject": subject_id, "anchors": anchor_ids,
                                            "after": direction == "after", "n": NEIGHBOURS, "as_of": as_of,
                                            "since": since})
        return [(row.pop("anchor_id"), row.pop("step"), row) for row in await cur.fetchall()]


_NEIGHBOURS_SQL = """
WITH anchor AS (
    SELECT ax.memory_id, ax.session_id, m.turn_index
      FROM observations ax
      JOIN messages m ON m.tenant_id = ax.tenant_id AND m.session_id = ax.session_id AND m.message_id = ax.message_id
     WHERE ax.tenant_id = %(tenant)s AND ax.subject_id = %(subject)s AND ax.memory_id = ANY(%(anchors)s::uuid[]))
SELECT anchor.memory_id::text AS anchor_id, n.step, n.memory_id, n.version, n.text, n.happened_at,
       n.source_message_ids, n.importance, n.session_id
  FROM anchor CROSS JOIN LATERAL (
    SELECT x.memory_id::text AS memory_id, x.version, x.text, x.happened_at, x.source_message_ids,
           e.importance::int AS importance, x.session_id,
           row_number() OVER (ORDER BY CASE WHEN %(after)s THEN m.turn_index ELSE -m.turn_index END)::int AS step
      FROM observations x
      JOIN messages m ON m.tenant_id = x.tenant_id AND m.session_id = x.session_id AND m.message_id = x.message_id
      LEFT JOIN episodes e ON e.tenant_id = x.tenant_id AND e.session_id = x.session_id AND e.subject_id = x.subject_id
     WHERE x.tenant_id = %(tenant)s AND x.subject_id = %(subject)s AND x.session_id = anchor.session_id
       AND CASE WHEN %(after)s THEN m.turn_index > anchor.turn_index ELSE m.turn_index < anchor.turn_index END
       AND x.happened_at <= coalesce(%(as_of)s::timestamptz, 'infinity')
       AND x.happened_at >= coalesce(%(since)s::timestamptz, '-infinity')
     ORDER BY CASE WHEN %(after)s THEN m.turn_index ELSE -m.turn_index END
     LIMIT %(n)s) n
"""
