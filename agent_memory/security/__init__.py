"""Encryption, keys, the payload codec, API and operator keys, the leak filter."""
