"""What a question turns into: its targets, the tool calls made, the evidence, the answer."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from dashcam.evidence.models import Evidence, ToolCall


class Targets(BaseModel):
    """What a question points at, read from its words (agent/targets.py)."""

    gpus: list[int] = Field(default_factory=list, description='GPU ids named ("GPU 5", "gpu5", "device 5", "cuda:5").')
    all_gpus: bool = Field(False, description='"all GPUs", "every GPU", "compare the GPUs".')
    which_gpu: bool = Field(False, description='"which GPU ...?"')
    start_ms: float | None = Field(None, description="Window start, ms from the start of GPU activity.")
    end_ms: float | None = Field(None, description="Window end, ms from the start of GPU activity.")
    nvtx: str | None = Field(None, description="An NVTX range named in the question.")
    kernel: str | None = Field(None, description="A kernel named in the question.")
    step: int | None = Field(None, description='"iteration 3", "step 3".')
    api: str | None = Field(None, description='A CUDA API function named ("cudaFree", "cudaMemcpy*").')
    osrt: str | None = Field(None, description='An OS runtime function of the profile named ("pwrite64", '
                                               '"the read calls").')
    other_gpu: bool = Field(False, description='"the other GPU", "the other one": the GPU not discussed before '
                                               '(chat), resolved into gpus when the conversation says which.')
    ranks: list[int] = Field(default_factory=list, description='Ranks named ("rank 3"); a single profile answers by '
                                                               'GPU, a fleet of reports by rank.')
    streams: list[int] = Field(default_factory=list, description='Stream ids named ("stream 7", "streams 7 and 13").')

    def window_args(self) -> dict:
        out = {}
        if self.start_ms is not None:
            out["start_ms"] = self.start_ms
        if self.end_ms is not None:
            out["end_ms"] = self.end_ms
        return out


class ModelTurn(BaseModel):
    """One reply of the model in LLM mode, and what dashcam did with it (``ask --json``)."""

    text: str = Field("", description="The reply's text as the model wrote it (reasoning blocks included).")
    calls: list[str] = Field(default_factory=list, description="The tool calls it made: name(arguments).")
    fate: str = Field(description="What became of it: tool calls run; answer kept; replaced (and by what, why).")


class Answer(BaseModel):
    question: str
    answer: str
    mode: Literal["offline", "llm"]
    model: str | None = None
    intent: str | None = None
    intent_score: float | None = Field(None, description="The classifier's score of the intent (intents.py).")
    runner_up: str | None = Field(None, description="The second-best intent.")
    runner_up_score: float | None = None
    intents: list[str] = Field(default_factory=list, description="Every intent answered, in order, when the "
                                                                  "question asked several things.")
    gpus: list[int] = Field(default_factory=list, description="The GPUs the answer talks about, the main one "
                                                              "first (its evidence shows their figures).")
    targets: Targets = Field(default_factory=Targets)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    grounded: bool = True
    ungrounded_numbers: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    model_turns: list[ModelTurn] = Field(default_factory=list, description="LLM mode: each model reply and "
                                         "its fate, discarded ones included.")
    shown: str | None = Field(None, description="LLM mode, streamed: the text as it appeared on the screen "
                              "(a replaced reply and its mark included); /save writes it.")
