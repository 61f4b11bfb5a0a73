"""Evaluations of recall against benchmarks (LoCoMo) and baselines (BM25)."""
