"""Forgetting, retention, erasure with its ledger and receipts, sweeps and compaction."""
