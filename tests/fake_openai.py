"""A scripted OpenAI chat-completions server on 127.0.0.1 for tests (the SDK 3.x talks httpx2: no respx).

    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say("GPU 1 idled 59.18 %.")]) as fake:
        config = LLMConfig(base_url=fake.base_url, api_key="test")
        ...
        fake.requests  # every request body (parsed JSON), in order

Each POST /v1/chat/completions consumes the next scripted reply, whatever the request:
- an assistant message: ``say(text)``, ``call(name, args)``, ``calls(call(..), call(..), content=None)``
  (``args`` a dict, or a str sent verbatim — malformed JSON included);
- an error: ``error(429)`` (Retry-After: 0), ``error(500)``, ``error(503)``;
- a delay: ``delayed(seconds, reply)`` sleeps before answering (a client timeout).
Requests with ``"stream": true`` get SSE chunks the way OpenAI sends them: content in pieces, each
tool call as {index, id, type, function.name, arguments ""} then argument fragments, a last chunk with
finish_reason, then ``data: [DONE]``. When the script is used up the server answers 500 with
``x-should-retry: false`` and records it in ``.exhausted``. GET /v1/models lists one model.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def say(text: str) -> dict:
    return {"content": text}


def call(name: str, args: dict | str | None = None, id: str | None = None) -> dict:
    """One tool call (used inside ``calls``) — or, alone in a script, a reply with just this call."""
    arguments = args if isinstance(args, str) else json.dumps(args or {})
    return {"tool_calls": [{"id": id, "name": name, "arguments": arguments}]}


def calls(*items: dict, content: str | None = None) -> dict:
    """A reply with several tool calls (parallel), optionally with content."""
    return {"content": content, "tool_calls": [tc for item in items for tc in item["tool_calls"]]}


def error(status: int, retry_after: float = 0, message: str | None = None) -> dict:
    """An HTTP error reply; 429 carries Retry-After (and retry-after-ms so the SDK waits ~1 ms)."""
    return {"error": status, "retry_after": retry_after, "message": message or f"scripted error {status}"}


def delayed(seconds: float, reply: dict) -> dict:
    return {**reply, "delay": seconds}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class FakeOpenAI:
    """Context manager: a ThreadingHTTPServer serving the scripted replies; see the module docstring."""

    def __init__(self, replies: list[dict | str], model: str = "fake-model", chunk_chars: int = 7):
        self.replies = [say(r) if isinstance(r, str) else r for r in replies]
        self.model = model
        self.chunk_chars = chunk_chars
        self.requests: list[dict] = []
        self.exhausted = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._n = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> "FakeOpenAI":
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- script -----------------------------------------------------------------------------
    def next_reply(self, body: dict) -> dict | None:
        with self._lock:
            self.requests.append(body)
            if not self.replies:
                self.exhausted += 1
                return None
            self._n += 1
            return self.replies.pop(0)

    def completion_id(self) -> str:
        return f"chatcmpl-fake-{self._n}"


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAI
    protocol_version = "HTTP/1.0"  # one response per connection; a stream ends when the socket closes

    def log_message(self, *args) -> None:  # quiet
        pass

    def _json(self, status: int, obj: dict, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"object": "list", "data": [
                {"id": self.fake.model, "object": "model", "created": 0, "owned_by": "fake"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        reply = self.fake.next_reply(body)
        try:
            self._answer(body, reply)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _answer(self, body: dict, reply: dict | None) -> None:
        if reply is None:
            self._json(500, {"error": {"message": "fake server: no scripted reply left", "type": "server_error"}},
                       {"x-should-retry": "false"})
            return
        if reply.get("delay") and self.fake._stop.wait(reply["delay"]):
            return
        if "error" in reply:
            status = reply["error"]
            headers = {}
            if status == 429:
                ra = reply["retry_after"]
                headers = {"Retry-After": f"{ra:g}", "retry-after-ms": str(max(1, int(ra * 1000)))}
            kind = {429: "rate_limit_error"}.get(status, "server_error")
            self._json(status, {"error": {"message": reply["message"], "type": kind, "code": None}}, headers)
            return
        content = reply.get("content")
        tool_calls = [dict(tc, id=tc.get("id") or f"call_fake_{self.fake._n}_{i}")
                      for i, tc in enumerate(reply.get("tool_calls") or [])]
        finish = "tool_calls" if tool_calls else "stop"
        model = body.get("model", self.fake.model)
        if body.get("stream"):
            self._stream(model, content, tool_calls, finish)
            return
        message = {"role": "assistant", "content": content, "refusal": None}
        if tool_calls:
            message["tool_calls"] = [{"id": tc["id"], "type": "function",
                                      "function": {"name": tc["name"], "arguments": tc["arguments"]}}
                                     for tc in tool_calls]
        self._json(200, {"id": self.fake.completion_id(), "object": "chat.completion", "created": int(time.time()),
                         "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                      "finish_reason": finish}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    def _stream(self, model: str, content: str | None, tool_calls: list[dict], finish: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        base = {"id": self.fake.completion_id(), "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model}

        def send(delta: dict, finish_reason: str | None = None) -> None:
            chunk = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None,
                                         "finish_reason": finish_reason}])
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        send({"role": "assistant", "content": ""})
        if content:
            for piece in _pieces(content, self.fake.chunk_chars):
                send({"content": piece})
        for i, tc in enumerate(tool_calls):
            send({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                  "function": {"name": tc["name"], "arguments": ""}}]})
            for frag in _pieces(tc["arguments"], self.fake.chunk_chars):
                send({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
        send({}, finish)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
