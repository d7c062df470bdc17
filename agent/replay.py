"""Chat-completions on 127.0.0.1 without a model: scripted replies (FakeOpenAI) and recording (RecordingProxy).

    with FakeOpenAI([call("gpu_gaps", {"gpu": 1}), say("GPU 1 idled 59.18 %.")]) as fake:
        config = LLMConfig(base_url=fake.base_url, api_key="test")
        ...
        fake.requests  # every request body (parsed JSON), in order

FakeOpenAI: each POST /v1/chat/completions consumes the next scripted reply, whatever the request:
- an assistant message: ``say(text)``, ``call(name, args)``, ``calls(call(..), call(..), content=None)``
  (``args`` a dict, or a str sent verbatim — malformed JSON included);
- an error: ``error(429)`` (Retry-After: 0), ``error(500)``, ``error(503)``;
- a delay: ``delayed(seconds, reply)`` sleeps before answering (a client timeout);
- what real servers also send: ``raw(body)`` (a body that is not a chat completion, e.g. an HTML page),
  ``cut(reply)`` (finish_reason "length": the reply hit max_tokens), ``call(.., as_object=True)``
  (``arguments`` as a JSON object instead of a string).
Requests with ``"stream": true`` get SSE chunks the way OpenAI sends them: content in pieces, each
tool call as {index, id, type, function.name, arguments ""} then argument fragments, a last chunk with
finish_reason, then ``data: [DONE]``. When the script is used up the server answers 500 with
``x-should-retry: false`` and records it in ``.exhausted``. GET /v1/models lists one model.

RecordingProxy(upstream_base_url, api_key): the same server, but each reply comes from a real
endpoint (asked without streaming; a streaming client still gets SSE) and is kept, in order, in
``.recorded`` — the reply the model gave, or the HTTP error the endpoint answered. Replaying
``.recorded`` with FakeOpenAI gives the client the same conversation without the endpoint.

Scripts in YAML (``evals/replays/*.yaml``; ``script_reply`` reads one item, ``script_item`` writes one):
    - say: "GPU 1 was idle 59.18 % ..."              # or just the string
    - call: gpu_gaps                                 # one tool call; args a mapping,
      args: {gpu: 1}                                 #   or arguments: '{"gpu": 1' (sent verbatim)
    - calls: [{call: gpu_gaps, args: {gpu: 0}}, {call: sync}]   # parallel calls (content: optional)
    - error: 429                                     # retry_after, message optional
    - {content: "...", tool_calls: [{name: sync, arguments: "{}"}]}   # the raw form
Any item may carry ``delay: SECONDS``.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OPENAI_BASE_URL = "https://api.openai.com/v1"


# -- replies ------------------------------------------------------------------------------------

def say(text: str) -> dict:
    return {"content": text}


def call(name: str, args: dict | str | None = None, id: str | None = None, as_object: bool = False) -> dict:
    """One tool call (used inside ``calls``) — or, alone in a script, a reply with just this call.
    ``as_object``: ``arguments`` is sent as a JSON object, as some servers do, not as a string."""
    arguments = args if isinstance(args, str) else (dict(args or {}) if as_object else json.dumps(args or {}))
    return {"tool_calls": [{"id": id, "name": name, "arguments": arguments}]}


def calls(*items: dict, content: str | None = None) -> dict:
    """A reply with several tool calls (parallel), optionally with content."""
    return {"content": content, "tool_calls": [tc for item in items for tc in item["tool_calls"]]}


def error(status: int, retry_after: float = 0, message: str | None = None) -> dict:
    """An HTTP error reply; 429 carries Retry-After (and retry-after-ms so the SDK waits ~1 ms)."""
    return {"error": status, "retry_after": retry_after, "message": message or f"scripted error {status}"}


def delayed(seconds: float, reply: dict) -> dict:
    return {**reply, "delay": seconds}


def raw(body: str, status: int = 200, content_type: str = "text/html") -> dict:
    """A reply that is not a chat completion: ``body`` sent as is."""
    return {"raw": body, "status": status, "content_type": content_type}


def cut(reply: dict) -> dict:
    """``reply`` with finish_reason "length": the server stopped it at max_tokens."""
    return {**reply, "finish_reason": "length"}


def script_reply(item) -> dict:
    """One reply of a YAML script (see the module docstring) as a FakeOpenAI reply."""
    if isinstance(item, str):
        return say(item)
    if not isinstance(item, dict):
        raise ValueError(f"a script reply is a string or a mapping, not {type(item).__name__}")
    if "say" in item:
        reply = say(str(item["say"]))
    elif "call" in item:
        reply = call(item["call"], item["arguments"] if "arguments" in item else item.get("args"))
    elif "calls" in item:
        reply = calls(*[script_reply(c) for c in item["calls"]], content=item.get("content"))
    elif "error" in item:
        reply = error(int(item["error"]), item.get("retry_after", 0), item.get("message"))
    elif "content" in item or "tool_calls" in item:
        tcs = []
        for tc in item.get("tool_calls") or []:
            args = tc["arguments"] if "arguments" in tc else tc.get("args")
            tcs.append(call(tc["name"], args)["tool_calls"][0])
        reply = {"content": item.get("content"), "tool_calls": tcs}
    else:
        raise ValueError(f"unknown script reply {sorted(item)}: use say, call, calls, error or content/tool_calls")
    return delayed(item["delay"], reply) if item.get("delay") else reply


def _call_item(tc: dict) -> dict:
    """A tool call as a YAML item: args as a mapping when the arguments are a JSON object."""
    try:
        args = json.loads(tc["arguments"]) if tc["arguments"].strip() else {}
    except ValueError:
        args = None
    if isinstance(args, dict):
        return {"call": tc["name"], "args": args}
    return {"call": tc["name"], "arguments": tc["arguments"]}


def script_item(reply: dict) -> dict:
    """A FakeOpenAI reply (as recorded) in the YAML script form; ``script_reply`` reads it back."""
    if "error" in reply:
        return {"error": reply["error"], "message": reply.get("message")}
    tcs = reply.get("tool_calls") or []
    content = reply.get("content")
    if not tcs:
        return {"say": content or ""}
    if len(tcs) == 1 and not content:
        return _call_item(tcs[0])
    out: dict = {"calls": [_call_item(tc) for tc in tcs]}
    if content:
        out["content"] = content
    return out


def completion_reply(resp: dict) -> dict:
    """The assistant message of a chat.completion response as a FakeOpenAI reply."""
    choices = resp.get("choices") or []
    msg = (choices[0].get("message") if choices else None) or {}
    tcs = [{"id": tc.get("id"), "name": (tc.get("function") or {}).get("name") or "",
            "arguments": (tc.get("function") or {}).get("arguments") or ""}
           for tc in msg.get("tool_calls") or []]
    return {"content": msg.get("content"), "tool_calls": tcs}


def _pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


# -- the servers --------------------------------------------------------------------------------

class _Loopback:
    """A ThreadingHTTPServer on 127.0.0.1 answering chat-completions with ``next_reply(body)``."""

    model = "fake-model"
    chunk_chars = 7

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._n = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self):
        owner = self

        class Handler(_Handler):
            pass

        Handler.fake = owner
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

    def next_reply(self, body: dict) -> dict | None:
        raise NotImplementedError

    def completion_id(self) -> str:
        return f"chatcmpl-fake-{self._n}"


class FakeOpenAI(_Loopback):
    """Context manager: a ThreadingHTTPServer serving the scripted replies; see the module docstring."""

    def __init__(self, replies: list[dict | str], model: str = "fake-model", chunk_chars: int = 7):
        super().__init__()
        self.replies = [say(r) if isinstance(r, str) else r for r in replies]
        self.model = model
        self.chunk_chars = chunk_chars
        self.exhausted = 0

    def next_reply(self, body: dict) -> dict | None:
        with self._lock:
            self.requests.append(body)
            if not self.replies:
                self.exhausted += 1
                return None
            self._n += 1
            return self.replies.pop(0)


class RecordingProxy(_Loopback):
    """Forwards each chat-completions request to ``upstream`` and records the reply; see the module docstring.

    The API key stays in memory (sent upstream only); ``.recorded`` holds replies, never requests.
    Errors are recorded with Retry-After 0 so a replay does not wait; the live client gets the real one.
    """

    def __init__(self, upstream: str | None, api_key: str | None, timeout_s: float = 120):
        super().__init__()
        self.upstream = (upstream or OPENAI_BASE_URL).rstrip("/")
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.recorded: list[dict] = []

    def take(self) -> list[dict]:
        """The replies recorded since the last take."""
        with self._lock:
            out, self.recorded = self.recorded, []
            return out

    def _post(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(self.upstream + "/chat/completions", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return json.loads(resp.read() or b"{}")

    def next_reply(self, body: dict) -> dict:
        with self._lock:
            self.requests.append(body)
        upstream = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        try:
            reply = completion_reply(self._post(upstream))
            kept = {"content": reply["content"], "tool_calls": [dict(tc, id=None) for tc in reply["tool_calls"]]}
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read() or b"{}").get("error", {}).get("message")
            except (ValueError, AttributeError):
                message = None
            retry_after = float(e.headers.get("Retry-After") or 0) if e.headers else 0
            reply = error(e.code, retry_after, message or f"upstream HTTP {e.code}")
            kept = error(e.code, 0, reply["message"])
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as e:
            reply = kept = error(502, 0, f"upstream unreachable: {type(e).__name__}: {e}"[:300])
        with self._lock:
            self._n += 1
            self.recorded.append(kept)
        return reply


class _Handler(BaseHTTPRequestHandler):
    fake: _Loopback
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
        if "raw" in reply:
            data = reply["raw"].encode()
            self.send_response(reply["status"])
            self.send_header("Content-Type", reply["content_type"])
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
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
        finish = reply.get("finish_reason") or ("tool_calls" if tool_calls else "stop")
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
            if not isinstance(tc["arguments"], str):  # an object: in one piece
                send({"tool_calls": [{"index": i, "function": {"arguments": tc["arguments"]}}]})
                continue
            for frag in _pieces(tc["arguments"], self.fake.chunk_chars):
                send({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
        send({}, finish)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
