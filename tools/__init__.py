"""Benchmarks, evaluations and the chaos campaign (`agent-memory-tools`): imported by no product module."""
