"""The tool results a diagnosis rests on, read as typed models through a ``ToolRuns`` memo.

``Facts(runs, scope)`` runs a tool the first time a rule (or a remedy, or an answer) reads it, on the
scope (a GPU and/or a ``start_ms``/``end_ms`` window; the whole profile by default), and never twice:
overview (with the workload), gpu_gaps, launch_latency, memcpy, nccl, small_kernels, top_kernels
(with the kernel families), iterations, cuda_graphs (with graph work in the capture) and gpu_metrics (with
GPU metrics in the capture) and os_runtime (with OS runtime calls). ``ev(tool)`` is the evidence of such a call.
"""
from __future__ import annotations

from functools import cached_property

from dashcam.evidence import Evidence, ToolRuns

FAMILY_LIMIT = 5  # top_kernels rows (and kernel families) a diagnosis reads
OS_CALL_LIMIT = 10  # os_runtime functions a diagnosis reads


class Facts:
    def __init__(self, runs: ToolRuns, scope: dict | None = None) -> None:
        self.runs = runs
        self.scope = {k: v for k, v in (scope or {}).items() if v is not None}

    @property
    def windowed(self) -> bool:
        """A --start/--end window: the capture span's whole-process facts do not describe it."""
        return "start_ms" in self.scope or "end_ms" in self.scope

    def _get(self, tool: str, **args):
        return self.runs.get(tool, **self.scope, **args)

    # -- the results ----------------------------------------------------------------------------
    @cached_property
    def overview(self):
        return self._get("overview")

    @cached_property
    def gaps(self):
        return self._get("gpu_gaps")

    @cached_property
    def launch(self):
        return self._get("launch_latency")

    @cached_property
    def memcpy(self):
        return self._get("memcpy")

    @cached_property
    def nccl(self):
        return self._get("nccl")

    @cached_property
    def small(self):
        return self._get("small_kernels")

    @cached_property
    def top(self):
        return self.runs.maybe("top_kernels", **self.scope, limit=FAMILY_LIMIT)

    @cached_property
    def iterations(self):
        return self.runs.maybe("iterations", **self.scope, limit=3)

    @cached_property
    def graphs(self):
        """cuda_graphs, only when the capture has graph work (graph kernels or whole-graph executions; None
        otherwise, or when it fails): a capture without graphs runs no extra tool."""
        p = self.runs.profile
        if "graph_work" not in p.memo:
            p.memo["graph_work"] = p.has_table("graph_trace") or bool(p.one(
                "SELECT EXISTS (SELECT 1 FROM kernel_times WHERE graph_node_id IS NOT NULL)")[0])
        return self.runs.maybe("cuda_graphs", **self.scope) if p.memo["graph_work"] else None

    @cached_property
    def os_calls(self):
        """os_runtime (the whole capture), only where the capture traced OS runtime calls and no window is set
        (None otherwise): what the host did outside the GPU window."""
        if self.windowed or "os_runtime" not in self.overview.coverage.recorded:
            return None
        return self.runs.maybe("os_runtime", limit=OS_CALL_LIMIT)

    @cached_property
    def metrics(self):
        """gpu_metrics, only when the capture has GPU metrics (None otherwise)."""
        if not self.runs.profile.has_table("gpu_metrics"):
            return None
        return self.runs.maybe("gpu_metrics", **self.scope, limit=3)

    _TOOLS = {"overview": "overview", "gpu_gaps": "gaps", "launch_latency": "launch", "memcpy": "memcpy",
              "nccl": "nccl", "small_kernels": "small"}

    def rows(self, tool: str) -> dict:
        """gpu -> the per-device row of ``tool`` (overview, gpu_gaps, launch_latency, memcpy, nccl, small_kernels)."""
        return {d.device_id: d for d in getattr(self, self._TOOLS[tool]).devices}

    def device(self, tool: str, gpu: int):
        """The per-device row of ``tool`` for ``gpu`` (None when absent)."""
        return self.rows(tool).get(gpu)

    def ev(self, tool: str, **extra) -> Evidence:
        """The evidence of ``tool`` run on the scope (with ``extra`` arguments)."""
        return self.runs.evidence_of(tool, **self.scope, **extra)

    # -- derived --------------------------------------------------------------------------------
    @property
    def workload(self):
        return self.overview.workload

    @property
    def family(self) -> str | None:
        return self.workload.family

    @property
    def window_ns(self) -> int:
        return self.overview.window_ns

    @property
    def gpus(self) -> list[int]:
        """GPUs that ran kernels in the scope."""
        return [d.device_id for d in self.overview.devices if d.kernel_count]

    @property
    def multi_gpu(self) -> bool:
        return self.overview.gpu_count > 1

    @property
    def kernel_count(self) -> int:
        return sum(d.kernel_count for d in self.overview.devices)


def gather(runs: ToolRuns, scope: dict | None = None) -> Facts:
    """The facts of ``scope`` (gpu, start_ms, end_ms; None values ignored), read on demand."""
    return Facts(runs, scope)
