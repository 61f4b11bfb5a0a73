"""The OpenAI-compatible providers: chat and embeddings from any OpenAI-compatible HTTP API (OpenAI,
vLLM, Ollama, LiteLLM, ...), implementing the protocols of agent_memory.providers.base with the
`openai` package.

- `config`: the server, its models and prices, the output's bounds; the client (max_retries=0:
  failures are classified into agent_memory.providers.errors and Temporal's retry policy decides,
  a Retry-After hint travelling on the exception).
- `provider`: what every provider shares: the client, the error mapping, the usage of a call.
- `chat`: chunking a conversation to the context window; one structured-output call per chunk
  (a strict JSON schema derived from the task's response model).
- `schema`, `responses`, `parsing`: the strict schemas, the response models, and the reply read
  tolerantly (```json fences, chatter around the JSON, <think> blocks) and validated.
- `extractor`, `importance`, `summarizer`, `embedder`: the four providers; citations are checked
  against the input (a fact citing an unknown message id is dropped, an entity or a summary
  sentence keeps only known ids and is dropped when none is left); embeddings are exactly the
  stored number of floats.
- `usage`: provider, request id, input and output tokens and a cost estimate from optional
  per-1k-token prices (`estimate_cost`), recorded on each result.
- `bundle`: the four on one shared client.
"""
