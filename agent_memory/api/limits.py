"""The bounds of a request, the same on every surface: the HTTP API's request models and the MCP
server's tool parameters take them from here, so a call refused on one is refused on the other."""

from __future__ import annotations

from agent_memory.lifecycle.forgetting import MAX_REASON_CHARS
from agent_memory.memory.corrections import TTL_MAX_SECONDS, TTL_MIN_SECONDS

# Messages in one append (a REST batch, the turns of one MCP `remember`): a longer conversation
# goes in several calls.
APPEND_MESSAGES_MAX = 1000
# A recall or context query.
QUERY_MAX_CHARS = 4000
# Results of a recall.
RECALL_LIMIT_MIN = 1
RECALL_LIMIT_MAX = 50
RECALL_LIMIT_DEFAULT = 5
# The token budget of an assembled context or prompt: below the minimum nothing useful fits.
BUDGET_MIN_TOKENS = 50
BUDGET_MAX_TOKENS = 32000
# The reason recorded with a forget, restore or erasure (the lifecycle refuses a longer one too).
REASON_MAX_CHARS = MAX_REASON_CHARS
# A memory id (a UUID; the bound only keeps a wrong argument short).
MEMORY_ID_MAX_CHARS = 64
# A fact written by an agent: its namespace and key name it, its value is a short statement, and
# it cites the messages that say it.
FACT_NAME_MAX_CHARS = 64
FACT_VALUE_MAX_CHARS = 1000
EVIDENCE_MAX_IDS = 100
# How long a fact written with an expiry holds (`ttl_seconds`; the library refuses others too).
FACT_TTL_MIN_SECONDS = TTL_MIN_SECONDS
FACT_TTL_MAX_SECONDS = TTL_MAX_SECONDS
