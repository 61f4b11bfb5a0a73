"""The read path: recall over facts and vectors, context and prompts, recall policies."""
