"""Whether LLM mode is on, and with which model, endpoint and limits: read from the options and the environment.

A module of its own so that offline answers (no OPENAI_API_KEY, no OPENAI_BASE_URL) never load the LLM
loop (llm.py) to find that out.

The limits a local server needs (docs/ask.md, "Local servers"), each from a CLI option, else its
environment variable, else the default:

    DASHCAM_LLM_TIMEOUT     seconds one request may take (a CPU server reading a long first prompt needs minutes)
    DASHCAM_LLM_RETRIES     retries after 429/5xx or a refused connection (never after a timeout)
    DASHCAM_LLM_MAX_TOKENS  the most tokens one reply may have (sent as max_tokens)
    DASHCAM_LLM_CONTEXT     the model's context in tokens (tool results are cut to fit)
"""
from __future__ import annotations

import os
from contextlib import contextmanager

from pydantic import BaseModel, Field

from dashcam.errors import BadParameter

DEFAULT_MODEL = "gpt-4o-mini"


class LLMConfig(BaseModel):
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = Field(None, repr=False)
    max_steps: int = Field(8, ge=1, description="Model turns that may call tools before the answer is forced.")
    timeout_s: float = Field(600, gt=0, description="Seconds one request may take before it is abandoned.")
    max_retries: int = Field(2, ge=0, description="Retries after 429/5xx or a refused connection; a timed-out "
                                                  "request is not retried (a one-slot server is still on it).")
    max_output_tokens: int = Field(1500, ge=16, description="The most tokens one reply may have (max_tokens).")
    context_tokens: int = Field(16000, ge=2000)
    temperature: float | None = Field(0, description="None: not sent (models that accept only their default).")


# setting -> (environment variable, LLMConfig field, type)
SETTINGS = {
    "timeout": ("DASHCAM_LLM_TIMEOUT", "timeout_s", float),
    "retries": ("DASHCAM_LLM_RETRIES", "max_retries", int),
    "max_tokens": ("DASHCAM_LLM_MAX_TOKENS", "max_output_tokens", int),
    "context": ("DASHCAM_LLM_CONTEXT", "context_tokens", int),
}
_options: dict[str, float | int] = {}  # set by the CLI for one command (llm_options)


@contextmanager
def llm_options(**values):
    """The CLI's --llm-timeout, --llm-retries, --llm-max-tokens, --llm-context for one command (None: not given)."""
    saved = dict(_options)
    _options.update({k: v for k, v in values.items() if v is not None})
    try:
        yield
    finally:
        _options.clear()
        _options.update(saved)


def _limits() -> dict:
    out = {}
    for name, (env, fld, kind) in SETTINGS.items():
        value = _options.get(name)
        if value is None and os.environ.get(env, "").strip():
            try:
                value = kind(os.environ[env].strip())
            except ValueError:
                raise BadParameter(f"{env}={os.environ[env]!r} is not a number") from None
        if value is not None:
            out[fld] = value
    return out


def config_from_env(model: str | None = None) -> LLMConfig | None:
    """The LLM config from --model / DASHCAM_MODEL, OPENAI_API_KEY, OPENAI_BASE_URL and the limits above;
    None = offline mode."""
    key = os.environ.get("OPENAI_API_KEY") or None
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    if key is None and base_url is None:
        return None
    limits = _limits()
    try:
        return LLMConfig(model=model or os.environ.get("DASHCAM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                         api_key=key, **limits)
    except ValueError as e:  # pydantic's ValidationError: a limit out of range
        err = e.errors()[0] if hasattr(e, "errors") else {"loc": ["?"], "msg": str(e)}
        fld = err["loc"][0]
        env = next((v[0] for v in SETTINGS.values() if v[1] == fld), fld)
        raise BadParameter(f"{env}: {err['msg']}") from None
