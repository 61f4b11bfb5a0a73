"""A scripted, real HTTP server speaking the OpenAI chat-completions and embeddings API.

stdlib only: a ThreadingHTTPServer on 127.0.0.1, port 0, in a background thread. Each test
queues canned replies (status, headers, body, delay); every request is recorded (path,
headers, JSON body) so tests can count HTTP calls and inspect what the client sent.

    with FakeOpenAIServer() as server:  # replies are consumed in order, then `responder` answers
        server.reply(chat_completion('{"importance": 7, "rationale": "..."}'))
        server.reply(Reply(status=429, headers={"Retry-After": "7"}, body=error_body("slow down")))
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATHS = ("/v1/chat/completions", "/v1/embeddings")


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list: sent as JSON; str/bytes: sent verbatim
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (for client timeouts)
    path: str | None = None  # only for this path; None: the next request to any path


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any


def chat_completion(content: str | None, *, completion_id: str = "chatcmpl-test", model: str = "test-chat",
                    prompt_tokens: int = 11, completion_tokens: int = 7, finish_reason: str = "stop",
                    refusal: str | None = None, usage: bool = True) -> dict:
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": 1715162400,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
    return body


def embeddings(vectors: list[list[float]], *, model: str = "test-embed", prompt_tokens: int = 5) -> dict:
    return {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def error_body(message: str, *, type_: str = "invalid_request_error", code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class FakeOpenAIServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self._closing = threading.Event()
        # Answers requests once the queue has nothing for them (e.g. routing on the schema name).
        self.responder: Callable[[Recorded], Reply | dict] | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                path = self.path.split("?", 1)[0]
                reply = server._record_and_pop(Recorded("POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
                if reply is None:
                    status, payload, headers = 404, error_body(f"unknown path {path}"), {}
                    if path in PATHS:
                        status, payload = 500, error_body("no scripted reply left", type_="server_error")
                    self._send(status, payload, headers)
                    return
                if reply.delay and server._closing.wait(reply.delay):
                    return  # the server is shutting down
                self._send(reply.status, reply.body, reply.headers)

            def do_GET(self) -> None:
                self._send(404, error_body("not found"), {})

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                if isinstance(body, (dict, list)):
                    data, ctype = json.dumps(body).encode(), "application/json"
                elif isinstance(body, bytes):
                    data, ctype = body, "application/octet-stream"
                else:
                    data, ctype = (body or "").encode(), "text/plain; charset=utf-8"
                try:
                    self.send_response(status)
                    if not any(k.lower() == "content-type" for k in headers):
                        self.send_header("Content-Type", ctype)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-openai", daemon=True)

    # --- scripting -------------------------------------------------------------------------------

    def reply(self, *replies: Reply | dict) -> FakeOpenAIServer:
        """Queue replies in order; a dict is a 200 JSON body."""
        with self._lock:
            for r in replies:
                self._replies.append(r if isinstance(r, Reply) else Reply(body=r))
        return self

    def _record_and_pop(self, request: Recorded) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            if request.path not in PATHS:
                return None
            for i, r in enumerate(self._replies):
                if r.path is None or r.path == request.path:
                    del self._replies[i]
                    return r
            responder = self.responder
        if responder is None:
            return None
        r = responder(request)
        return r if isinstance(r, Reply) else Reply(body=r)

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if path is None or r.path == path)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    @property
    def last(self) -> Recorded:
        with self._lock:
            return self.requests[-1]

    # --- lifecycle -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
