"""Benchmarks, evaluations and the chaos campaign (`python -m tools.cli`): imported by no product module."""
