"""agent-memory: long-term memory for AI agents, consolidated by durable Temporal workflows.

The library's layers, bottom up (each imports only those before it; tests/test_layering.py):
core (models, contract, settings, errors) ← store (PostgreSQL, Redis, migrations) ← security
(encryption, keys, the payload codec) ← providers (models that extract, score, summarize, embed) ←
memory (the write path and its event log) ← projection ← recall (the read path) ← lifecycle
(forgetting, retention, erasure) ← api (client, HTTP, console, MCP) ← cli.
"""
