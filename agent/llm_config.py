"""Whether LLM mode is on, and with which model and endpoint: read from the options and the environment.

A module of its own so that offline answers (no OPENAI_API_KEY, no OPENAI_BASE_URL) never load the LLM
loop (llm.py) to find that out.
"""
from __future__ import annotations

import os

from pydantic import BaseModel, Field

DEFAULT_MODEL = "gpt-4o-mini"


class LLMConfig(BaseModel):
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key: str | None = Field(None, repr=False)
    max_steps: int = Field(8, ge=1, description="Model turns that may call tools before the answer is forced.")
    timeout_s: float = 60
    max_retries: int = Field(2, ge=0, description="The SDK's retries (backoff, Retry-After) on 429/5xx/timeouts.")
    context_tokens: int = 16000
    temperature: float | None = Field(0, description="None: not sent (models that accept only their default).")


def config_from_env(model: str | None = None) -> LLMConfig | None:
    """The LLM config from --model / DASHCAM_MODEL, OPENAI_API_KEY, OPENAI_BASE_URL; None = offline mode."""
    key = os.environ.get("OPENAI_API_KEY") or None
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    if key is None and base_url is None:
        return None
    return LLMConfig(model=model or os.environ.get("DASHCAM_MODEL") or DEFAULT_MODEL, base_url=base_url,
                     api_key=key)
