"""The OpenAI-compatible providers: chat and embeddings."""
