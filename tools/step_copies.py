"""step_copies: the copies of each iteration of the program's loop — did the data stay on the GPU, or does every
step copy it again?

The iterations are the iterations tool's steps (NVTX step ranges, else the repeating kernel pattern; the
definitions are in iterations.py). A copy (not a unified-memory migration) belongs to the step in which it
starts (``step.start <= copy.start < step.end``); copies starting before the first step or at/after the end of
the last are outside the loop (the copies a data region moves once). Per step: copies and bytes; over the steps:
how many copy anything, the median copies and bytes per step, by direction.
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from .base import Tool, ToolParams, ToolResult, WindowInfo
from .iterations import Params as StepParams
from .iterations import run as find_steps


class Params(ToolParams):
    label: str | None = Field(None, description="NVTX label group of the step, as iterations' label (default: "
                                                "detected).")


class Direction(BaseModel):
    kind: str = Field(description="HtoD, DtoH, DtoD, ...")
    copies: int
    bytes: int


class Result(ToolResult):
    method: str = Field(description="How the steps were found (iterations' method: nvtx, kernel_pattern, none).")
    step_label: str | None = Field(None, description="The NVTX step label, or the kernel whose launches mark steps.")
    steps: int
    steps_with_copies: int = 0
    copies_inside: int = 0
    inside_bytes: int = 0
    median_copies_per_step: float | None = None
    median_step_bytes: float | None = None
    inside: list[Direction] = Field(default_factory=list, description="Copies inside the steps by direction.")
    copies_outside: int = Field(0, description="Copies before the first step or after the last.")
    outside_bytes: int = 0
    outside: list[Direction] = Field(default_factory=list, description="Those by direction.")


def _directions(rows: list[tuple]) -> list[Direction]:
    by: dict[str, list[int]] = {}
    for _, kind, nbytes in rows:
        x = by.setdefault(str(kind), [0, 0])
        x[0] += 1
        x[1] += int(nbytes)
    return [Direction(kind=k, copies=v[0], bytes=v[1]) for k, v in sorted(by.items(), key=lambda kv: -kv[1][1])]


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    it = find_steps(profile, StepParams(gpu=params.gpu, start_ms=params.start_ms, end_ms=params.end_ms,
                                        label=params.label, limit=1000))
    label = it.label or it.kernel_name
    base = {"tool": "step_copies", "window": WindowInfo.of(w), "method": it.method, "step_label": label,
            "steps": it.step_count, "notes": list(it.notes)}
    copies = profile.rows(f"""SELECT start, kind, bytes FROM memcpy WHERE NOT migration AND "end" > {w.start_ns}
                              AND start < {w.end_ns} AND device_id IN ({", ".join(str(d) for d in devices)})
                              ORDER BY start""")
    if it.step_count == 0 or not it.steps:
        return Result(**base, copies_outside=len(copies), outside_bytes=sum(int(c[2]) for c in copies),
                      outside=_directions(copies))
    starts = np.array([s.start_ns for s in it.steps], np.int64)
    ends = np.array([s.end_ns for s in it.steps], np.int64)
    per_step_n = np.zeros(len(starts), np.int64)
    per_step_b = np.zeros(len(starts), np.int64)
    inside, outside = [], []
    for c in copies:
        i = int(np.searchsorted(starts, c[0], "right")) - 1
        if i >= 0 and c[0] < ends[i]:
            per_step_n[i] += 1
            per_step_b[i] += int(c[2])
            inside.append(c)
        else:
            outside.append(c)
    return Result(**base, steps_with_copies=int((per_step_n > 0).sum()), copies_inside=len(inside),
                  inside_bytes=int(per_step_b.sum()), median_copies_per_step=float(np.median(per_step_n)),
                  median_step_bytes=float(np.median(per_step_b)), inside=_directions(inside),
                  copies_outside=len(outside), outside_bytes=sum(int(c[2]) for c in outside),
                  outside=_directions(outside))


TOOL = Tool(
    name="step_copies",
    summary=("The copies of each iteration of the loop (steps as the iterations tool finds them): how many steps "
             "copy, copies and bytes per step by direction, and the copies outside the loop (moved once)."),
    params=Params, result=Result, run=run,
)
