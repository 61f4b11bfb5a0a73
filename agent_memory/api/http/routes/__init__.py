"""A router per resource of `/v1`: health, sessions (messages, end, runs), memory (facts, recall,
context, prompt, forget, restore, export), erasure (erasure, erasures)."""
