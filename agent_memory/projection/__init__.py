"""Projections built from the event log: the outbox projector, rebuilds, re-embedding."""
