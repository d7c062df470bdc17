"""One chat-completions request, made the way a local server needs it.

- Retries are ours, not the SDK's (its client is made with max_retries=0): 408/409/429/5xx and a refused
  connection are retried ``config.max_retries`` times (Retry-After honoured, else 0.5 s, 1 s, 2 s ...);
  a timed-out request is not — a one-slot server (llama.cpp, Ollama) is still working on it, and a retry
  would queue behind it.
- While a request runs, stderr gets "waiting for the model (N s)" (after WAIT_SHOW_S; a terminal sees
  it count in place, a log gets a line every WAIT_LOG_S).
- ``max_tokens`` is sent (config.max_output_tokens); an endpoint that wants ``max_completion_tokens``
  instead (OpenAI's reasoning models say so in a 400) gets the request again with that.
- The reply is parsed defensively: a body that is not a chat completion (an HTML page), tool-call
  ``arguments`` sent as a JSON object instead of a string, and the finish reason (``"length"``: the
  reply was cut at max_tokens) are all told apart.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dashcam.errors import DashcamError

from .llm_config import LLMConfig

WAIT_SHOW_S = 2.0   # a request shorter than this shows no waiting line
WAIT_LOG_S = 15.0   # not a terminal: one line this often
RETRY_STATUSES = {408, 409, 429}  # and every 5xx
MAX_RETRY_AFTER_S = 60.0


class LLMError(DashcamError):
    """The model's replies could not be turned into an answer (no API error)."""


@dataclass
class Reply:
    content: str = ""
    tool_calls: list[dict] = field(default_factory=list)  # {"id", "name", "arguments" (a str)}
    finish_reason: str | None = None

    @property
    def cut_off(self) -> bool:
        """The server stopped the reply at the output limit: its text and calls are incomplete."""
        return self.finish_reason == "length"


def arguments_text(arguments) -> str:
    """Tool-call arguments as a JSON string, whether the server sent a string or an object."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def make_client(config: LLMConfig):
    from openai import OpenAI

    kwargs = {"api_key": config.api_key or "not-needed", "timeout": config.timeout_s, "max_retries": 0}
    if config.base_url:
        kwargs["base_url"] = config.base_url
    return OpenAI(**kwargs)


def _first_line(e: BaseException | str) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:160]


def server_message(e: BaseException) -> str | None:
    """What the server said in an HTTP error's body ({"error": {"message"}} or {"message"} or text)."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if isinstance(msg, str) and msg.strip():
            return _first_line(msg)
    elif isinstance(body, str) and body.strip():
        return _first_line(body)
    return None


def why(e: BaseException) -> str:
    """One line on why an LLM request failed, with the server's own message when it sent one."""
    status = getattr(e, "status_code", None)
    if status is not None:
        msg = server_message(e)
        return f"{type(e).__name__}, HTTP {status}" + (f": {msg}" if msg else "")
    import openai

    if isinstance(e, openai.APITimeoutError):
        return f"{type(e).__name__}: no reply within the timeout (DASHCAM_LLM_TIMEOUT); not retried"
    return f"{type(e).__name__}: {_first_line(e)}"


def failures() -> tuple[type[BaseException], ...]:
    """What a request may raise that LLM mode answers with its fallback."""
    import openai

    out: list[type[BaseException]] = [openai.OpenAIError, LLMError]
    try:
        import httpx2

        out.append(httpx2.HTTPError)  # a stream cut after its headers is not wrapped by the SDK
    except ImportError:
        pass
    return tuple(out)


class Waiting:
    """'waiting for the model (N s)' on stderr while a request runs; see the module docstring."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self._done = threading.Event()
        self._shown = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._done.is_set():
            return
        self._done.set()
        self._thread.join(1)
        if self._shown and _tty():
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        if self._done.wait(WAIT_SHOW_S):
            return
        tty = _tty()
        while not self._done.is_set():
            line = f"waiting for the model ({time.monotonic() - self.t0:.0f} s)"
            try:
                sys.stderr.write(f"\r\x1b[K{line}" if tty else line + "\n")
                sys.stderr.flush()
            except (ValueError, OSError):  # stderr closed
                return
            self._shown = True
            if self._done.wait(1.0 if tty else WAIT_LOG_S):
                return


def _tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (ValueError, AttributeError):
        return False


def _retry_delay(e: BaseException, attempt: int) -> float | None:
    """Seconds before retrying after ``e``, or None when ``e`` is not retried."""
    import openai

    if isinstance(e, openai.APITimeoutError):
        return None
    if isinstance(e, openai.APIStatusError):
        if e.status_code not in RETRY_STATUSES and e.status_code < 500:
            return None
        headers = getattr(e.response, "headers", {}) or {}
        if headers.get("x-should-retry") == "false":
            return None
        for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
            try:
                return min(MAX_RETRY_AFTER_S, max(0.0, float(headers[name]) * scale))
            except (KeyError, TypeError, ValueError):
                continue
    elif not isinstance(e, openai.APIConnectionError):
        return None
    return min(8.0, 0.5 * 2 ** attempt)


def _wants_max_completion_tokens(e: BaseException, kwargs: dict) -> bool:
    msg = (server_message(e) or "") + " " + str(e)
    return (getattr(e, "status_code", None) == 400 and "max_tokens" in kwargs
            and "max_completion_tokens" in msg)


def request(client, config: LLMConfig, kwargs: dict, on_content: Callable[[str], None] | None = None,
            on_tool_call: Callable[[], None] | None = None) -> Reply:
    """One chat completion; streamed when ``on_content`` is given (it gets the content deltas)."""
    kwargs = {"max_tokens": config.max_output_tokens, **kwargs}
    attempt = 0
    streamed: list[str] = []  # deltas already passed on: a request that sent some is not retried

    def passed_on(delta: str) -> None:
        streamed.append(delta)
        on_content(delta)

    while True:
        try:
            with Waiting() as wait:
                if on_content is None:
                    return _parse(client.chat.completions.create(**kwargs))
                return _stream(client.chat.completions.create(stream=True, **kwargs), wait,
                               passed_on, on_tool_call)
        except Exception as e:
            if _wants_max_completion_tokens(e, kwargs):
                kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
                continue
            delay = _retry_delay(e, attempt) if not streamed else None
            if delay is None or attempt >= config.max_retries:
                raise
            attempt += 1
            time.sleep(delay)


def _parse(resp) -> Reply:
    choices = getattr(resp, "choices", None)
    if choices is None:
        text = resp if isinstance(resp, str) else type(resp).__name__
        raise LLMError("the server's reply is not a chat completion (is OPENAI_BASE_URL an OpenAI-compatible "
                       f"/v1 endpoint?): {_first_line(text) or 'empty body'}")
    if not choices:
        raise LLMError("the model returned no choices")
    msg = choices[0].message
    calls = [{"id": tc.id, "name": tc.function.name or "", "arguments": arguments_text(tc.function.arguments)}
             for tc in getattr(msg, "tool_calls", None) or [] if getattr(tc, "function", None) is not None]
    return Reply(msg.content or "", calls, getattr(choices[0], "finish_reason", None))


def _stream(chunks, wait: Waiting, on_content, on_tool_call) -> Reply:
    text: list[str] = []
    slots: dict[int, dict] = {}
    finish = None
    seen = False
    for chunk in chunks:
        wait.stop()
        choices = getattr(chunk, "choices", None)
        if choices is None:
            continue
        seen = True
        if not choices:
            continue
        finish = getattr(choices[0], "finish_reason", None) or finish
        delta = choices[0].delta
        if delta is None:
            continue
        for tc in delta.tool_calls or []:
            if on_tool_call:
                on_tool_call()
            key = tc.index if tc.index is not None else len(slots)
            slot = slots.setdefault(key, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                slot["id"] = tc.id
            fn = tc.function
            if fn is not None:
                if fn.name and fn.name != slot["name"]:
                    slot["name"] += fn.name
                if fn.arguments:
                    slot["arguments"] += arguments_text(fn.arguments)
        if delta.content:
            text.append(delta.content)
            on_content(delta.content)
    if not seen:
        raise LLMError("the server sent no chat-completion chunks (is OPENAI_BASE_URL an OpenAI-compatible "
                       "/v1 endpoint?)")
    return Reply("".join(text), [slots[k] for k in sorted(slots)], finish)
