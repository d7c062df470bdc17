"""The first LLM request's size in tokens: system prompt, question and the tools offered, per question kind.

    python bench/prompt_tokens.py            # tiktoken's count when its encoding loads, else chars/3

tiktoken downloads its BPE files on first use; offline, point TIKTOKEN_CACHE_DIR at a folder holding
them (named as tiktoken caches them). The numbers are kept in docs/ask.md ("Local servers").
"""
from __future__ import annotations

import json
import os
import tempfile

from dashcam.agent.context import _get_encoding, count_tokens
from dashcam.agent.llm import build_messages
from dashcam.agent.llm_config import LLMConfig
from dashcam.agent.llm_tools import lean, offered_tools
from dashcam.agent.models import Targets
from dashcam.tools import tool_schemas

QUESTIONS = ["why is GPU 1 idle?", "how much time goes to memcpy?", "is it healthy?", "what is the NCCL time?",
             "tell me something about this file"]


def main() -> None:
    from dashcam.profile import Profile
    from dashcam.testing.scenarios import demo

    tmp = tempfile.mkdtemp(prefix="dashcam-tokens-")
    os.environ["DASHCAM_CACHE_DIR"] = os.path.join(tmp, "cache")
    profile = Profile.open(demo(os.path.join(tmp, "demo.sqlite")), progress=False)
    enc = _get_encoding()
    print(f"counting with {'tiktoken ' + enc.name if enc else 'the estimate (characters / 3)'}")
    full = tool_schemas()
    print(f"all {len(full)} tools as schemas: {count_tokens(json.dumps(full))} tokens; lean: "
          f"{count_tokens(json.dumps([lean(t) for t in full]))}")
    for q in QUESTIONS:
        tools = offered_tools(q, Targets())
        msgs = build_messages(q, profile, Targets(), None, LLMConfig())
        n_msgs = sum(count_tokens(m["content"]) for m in msgs)
        print(f"{q!r}: {len(tools)} tools, {count_tokens(json.dumps(tools))} + messages {n_msgs} = "
              f"{count_tokens(json.dumps(tools)) + n_msgs} tokens")


if __name__ == "__main__":
    main()
