"""The rule table, by topic. Order is priority: a span taken by an earlier rule is not re-read by a
later one, and specific forms (negative, "no longer", changes) come before generic ones, within a
topic and across topics (trips before the home city, so a stay never touches location/home_city)."""

from __future__ import annotations

from agent_memory.providers.offline.rules import (
    budgets,
    diet,
    homes,
    languages,
    names,
    pets,
    preferences,
    relationships,
    trips,
    work,
)
from agent_memory.providers.offline.rules.base import _Rule

RULES: list[_Rule] = [
    *diet.RULES,
    *languages.RULES,
    *preferences.RULES,
    *trips.RULES,
    *homes.RULES,
    *relationships.RULES,
    *names.RULES,
    *work.RULES,
    *pets.RULES,
    *budgets.RULES,
]
