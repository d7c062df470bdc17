"""The result models of what a host thread was doing that more than one tool reports (cpu, gpu_gaps): the named
piece of its time outside CUDA calls, and a sampled function. They sit below the tools so that no tool imports
another for them."""
from __future__ import annotations

from pydantic import BaseModel, Field


class CpuCause(BaseModel):
    state: str = Field(description="os_wait, os_call, descheduled, running or unknown.")
    name: str | None = Field(description="The OS runtime call, or for running (or unknown) time its most sampled "
                                         "function; null when nothing names it. Profile text.")
    ns: int = Field(description="The time of that piece.")
    samples: int = Field(0, description="Samples of that function (self) in it: the basis of the name.")


class SampledFunction(BaseModel):
    function: str = Field(description="The function as the call stack names it (profile text).")
    module: str
    self_samples: int = Field(description="Samples with it as the innermost frame.")
    total_samples: int = Field(description="Samples with it anywhere on the stack (once per sample).")
    self_ns: int | None = Field(None, description="Estimate: self_samples x the sampling period.")
    total_ns: int | None = Field(None, description="Estimate: total_samples x the sampling period.")
