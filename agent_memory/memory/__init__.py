"""The write path: evidence, memory events applied to the projections, conflicts, corrections."""
