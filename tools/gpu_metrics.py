"""gpu_metrics: is a busy GPU really busy? The sampled GPU metrics (``nsys profile --gpu-metrics-devices``), per GPU.

nsys samples counters per GPU (GPU_METRICS, named in TARGET_INFO_GPU_METRICS): SM active, SM issue, tensor
active, warps in flight, DRAM / PCIe / NVLink throughput, clocks. Their names differ between GPU generations
and nsys versions ("SM Active", "SMs Active", "SM Active [Throughput %]"), so each name is mapped to a
``key`` by the patterns in ``METRIC_KEYS`` (first match; unknown names keep ``key`` null and are reported as
they are). A key's *primary* metric, the one the per-GPU figures use, is its ``[Throughput %]`` variant, else
its name without a unit, else the first.

Which GPU a metric series belongs to: TARGET_INFO_GPU_METRICS.typeId, whose low 32 bits are the GPU's
TARGET_INFO_GPU.pwGpuId; failing that a "GPU <n>" in its typeName (n: TARGET_INFO_GPU.id); failing that,
with one GPU in the profile and one typeId, that GPU. Series matched to no GPU are listed in the notes.

Time weighting (measure/definitions.py, "GPU metric samples"): a sample holds its value from the previous
sample of its series to its own timestamp (the first: one median interval before). Per metric: the
time-weighted mean, min, max and percentiles (p10, p50, p90: the smallest value with at least that share of
the weighted time at or below it) over the window; the mean inside the device's kernels (kernel union) and
inside its gaps; per top kernel (most kernel time on the device, durations clipped) the mean of each keyed
metric inside that kernel's launches. The sampling interval is the median spacing of the device's samples;
``capture_rate_hz`` is the rate the capture asked for (META_DATA_CAPTURE GPU_METRICS_OPTIONS:SAMPLING_FREQUENCY)
when the export records it.
"""
from __future__ import annotations

import re

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import pct
from dashcam.measure.intervals import kernel_unions, merge

from .base import Tool, ToolParams, ToolResult, WindowInfo

# (key, pattern on the metric name): the first match names the metric.
METRIC_KEYS: tuple[tuple[str, str], ...] = (
    ("sm_active", r"^SMs? Active\b"),
    ("sm_issue", r"^SMs? Issue\b"),
    ("tensor_active", r"^Tensor (Core |Pipe )?Active\b"),
    ("warp_occupancy", r"^Compute Warps in Flight\b"),
    ("unallocated_warps", r"^Unallocated Warps in Active SMs\b"),
    ("gr_active", r"^GR Active\b"),
    ("dram_read", r"^DRAM Read\b"),
    ("dram_write", r"^DRAM Write\b"),
    ("pcie_rx", r"^PCIe RX\b"),
    ("pcie_tx", r"^PCIe TX\b"),
    ("nvlink_rx", r"^NVLink RX\b"),
    ("nvlink_tx", r"^NVLink TX\b"),
    ("gpc_clock", r"^GPC Clock\b"),
    ("sys_clock", r"^SYS Clock\b"),
)
# Keys whose metrics are a share of peak: a name without a unit is a % (older nsys names carry none).
PERCENT_KEYS = {"sm_active", "sm_issue", "tensor_active", "warp_occupancy", "unallocated_warps", "gr_active",
                "dram_read", "dram_write", "pcie_rx", "pcie_tx", "nvlink_rx", "nvlink_tx"}
UNITS = {"throughput %": "%", "mhz": "MHz", "avg": "avg", "avg warps per cycle": "warps/cycle",
         "requests": "requests", "%": "%"}
RATE_KEY = r"^GPU_METRICS_OPTIONS:SAMPLING_FREQUENCY$"
LOW_32 = 0xFFFFFFFF
PERCENTILES = (10, 50, 90)
# Samples after the window end still cover part of it (up to their previous sample): nsys samples at 10 Hz or
# faster, so those within a second of the end are read.
SLACK_NS = 1_000_000_000


class Params(ToolParams):
    pass


class MetricStats(BaseModel):
    name: str = Field(description="The metric as the export names it (TARGET_INFO_GPU_METRICS.metricName).")
    key: str | None = Field(description="What it measures (METRIC_KEYS: sm_active, sm_issue, tensor_active, "
                                        "warp_occupancy, dram_read, ...); null for a name no pattern knows.")
    primary: bool = Field(description="The metric the device's figures use for its key.")
    unit: str | None = Field(description="%, MHz, avg, warps/cycle, requests; null when the name does not say.")
    samples: int = Field(description="Samples whose interval overlaps the window.")
    covered_ns: int = Field(description="Time their intervals cover inside the window.")
    mean: float | None = Field(description="Time-weighted mean over the window.")
    p10: float | None = None
    p50: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    in_kernels_mean: float | None = Field(None, description="Time-weighted mean while the device's kernels run.")
    in_kernels_ns: int = Field(0, description="Covered time inside the kernel union.")
    in_gaps_mean: float | None = Field(None, description="Time-weighted mean inside the device's gaps.")
    in_gaps_ns: int = Field(0, description="Covered time inside the gaps.")


class KernelMetrics(BaseModel):
    name: str = Field(description="Kernel short name (untrusted profile text).")
    kernel_time_ns: int = Field(description="Its launches' durations on this device, clipped to the window.")
    means: dict[str, float] = Field(description="Primary metric key -> time-weighted mean inside its launches.")
    sm_active_pct: float | None = Field(None, description="means['sm_active'] when that metric is a %.")
    tensor_active_pct: float | None = Field(None, description="means['tensor_active'] when that metric is a %.")
    dram_read_pct: float | None = Field(None, description="means['dram_read'] when that metric is a %.")


class DeviceMetrics(BaseModel):
    device_id: int
    metric_set: list[str] = Field(description="The metrics sampled on this GPU (their export names).")
    samples: int = Field(description="Samples overlapping the window, all metrics.")
    sample_interval_ns: int | None = Field(description="Median spacing of one metric's samples.")
    sample_rate_hz: float | None = Field(description="1 s / sample_interval_ns.")
    kernel_busy_pct: float = Field(description="Kernel union as % of the window (what a timeline shows as busy).")
    gr_active_pct: float | None = Field(None, description="Primary gr_active metric (the graphics/compute engine "
                                                          "busy: what a utilization sampler shows), mean over the "
                                                          "window.")
    sm_active_pct: float | None = Field(None, description="Primary sm_active metric, mean over the window.")
    sm_active_in_kernels_pct: float | None = Field(None, description="Primary sm_active metric, mean while kernels "
                                                                     "run.")
    tensor_active_in_kernels_pct: float | None = Field(None, description="Primary tensor_active metric, mean while "
                                                                         "kernels run.")
    warp_occupancy_in_kernels_pct: float | None = Field(None, description="Primary warp_occupancy metric (% "
                                                                          "variant), mean while kernels run.")
    metrics: list[MetricStats]
    top_kernels: list[KernelMetrics] = Field(description="Kernels with the most time on this device (at most "
                                                         "`limit`), with their metric means.")


class Result(ToolResult):
    capture_rate_hz: float | None = Field(None, description="Sampling rate the capture asked for, when the export "
                                                            "records it.")
    devices: list[DeviceMetrics] = Field(description="GPUs with metric samples in the window.")


def metric_key(name: str) -> str | None:
    for key, pattern in METRIC_KEYS:
        if re.search(pattern, name, re.IGNORECASE):
            return key
    return None


def metric_unit(name: str, key: str | None) -> str | None:
    m = re.search(r"\[([^\]]+)\]\s*$", name)
    if m:
        return UNITS.get(m.group(1).strip().lower(), m.group(1).strip())
    return "%" if key in PERCENT_KEYS else None


def _rank(name: str) -> int:
    """Primary choice among a key's metrics: the % variant, then no unit, then the rest."""
    m = re.search(r"\[([^\]]+)\]\s*$", name)
    if not m:
        return 1
    return 0 if m.group(1).strip().lower() == "throughput %" else 2


def weighted(values: np.ndarray, weights: np.ndarray) -> dict[str, float | None]:
    """Time-weighted mean, percentiles, min and max (module docstring); None without weight."""
    keep = weights > 0
    v, wt = values[keep], weights[keep].astype(np.float64)
    if not len(v):
        return {"mean": None, **{f"p{p}": None for p in PERCENTILES}, "min": None, "max": None}
    o = np.argsort(v, kind="stable")
    v, wt = v[o], wt[o]
    cum = np.cumsum(wt)
    total = cum[-1]
    out = {"mean": round(float((v * wt).sum() / total), 3)}
    for p in PERCENTILES:
        i = int(np.searchsorted(cum, total * p / 100.0 - 1e-9 * total, side="left"))
        out[f"p{p}"] = round(float(v[min(i, len(v) - 1)]), 3)
    out["min"], out["max"] = round(float(v[0]), 3), round(float(v[-1]), 3)
    return out


def _mean(values: np.ndarray, weights: np.ndarray) -> float | None:
    total = float(weights.sum())
    return round(float((values * weights).sum() / total), 3) if total > 0 else None


def series_devices(profile) -> dict[int, int | None]:
    """typeId -> device id (module docstring), for every typeId of TARGET_INFO_GPU_METRICS / GPU_METRICS."""
    names = profile.rows("SELECT DISTINCT type_id, type_name FROM gpu_metric_names WHERE type_id IS NOT NULL")
    seen = {int(t) for (t,) in profile.rows("SELECT DISTINCT type_id FROM gpu_metric_samples WHERE type_id IS NOT "
                                           "NULL")}
    types = {int(t): n for t, n in names} | {t: None for t in seen if t not in {int(x) for x, _ in names}}
    gpus = profile.rows("SELECT device_id, nsys_gpu_id, pw_gpu_id FROM gpus WHERE device_id IS NOT NULL")
    by_pw = {int(pw): int(d) for d, _, pw in gpus if pw is not None}
    by_id = {int(n): int(d) for d, n, _ in gpus if n is not None}
    out: dict[int, int | None] = {}
    for t, type_name in types.items():
        dev = by_pw.get(t & LOW_32)
        if dev is None and type_name:
            m = re.search(r"\bGPU\s*(\d+)", type_name)
            if m:
                dev = by_id.get(int(m.group(1)))
        out[t] = dev
    if len(types) == 1 and len(profile.devices) == 1 and None in out.values():
        out = dict.fromkeys(out, profile.devices[0])
    return out


def _series(profile, w, type_ids: list[int]) -> tuple[dict[tuple[int, int], dict[str, np.ndarray]], int]:
    """(type_id, metric_id) -> t, value of the samples whose interval can reach into the window."""
    ids = ", ".join(str(int(t)) for t in type_ids)
    d = profile.con.execute(f"""SELECT type_id, metric_id, t, value FROM gpu_metric_samples
        WHERE type_id IN ({ids}) AND value IS NOT NULL AND t > {int(w.start_ns)} AND t < {int(w.end_ns) + SLACK_NS}
        ORDER BY type_id, metric_id, t""").fetchnumpy()
    ty, mi = np.asarray(d["type_id"], np.int64), np.asarray(d["metric_id"], np.int64)
    t, v = np.asarray(d["t"], np.int64), np.asarray(d["value"], np.float64)
    out = {}
    if len(t):
        cuts = np.flatnonzero((np.diff(ty) != 0) | (np.diff(mi) != 0)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(t)]):
            out[(int(ty[a]), int(mi[a]))] = {"t": t[a:b], "value": v[a:b]}
    return out, len(t)


def _cover(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
    """Each sample's interval [from, t) and the series' median interval."""
    if len(t) < 2:
        return t, t, None
    step = int(np.median(np.diff(t)))
    return np.r_[t[0] - step, t[:-1]], t, step


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    notes: list[str] = []
    rate = next((v for k, v in profile.metadata_items() if re.search(RATE_KEY, k)), None)
    try:
        rate_hz = float(rate) if rate is not None else None
    except ValueError:
        rate_hz = None
    if not profile.has_table("gpu_metrics"):
        notes.append("No GPU metrics in this capture (GPU_METRICS): `nsys profile --gpu-metrics-devices=all` samples "
                     "SM, tensor-core, warp and memory-throughput activity per GPU.")
        return Result(tool="gpu_metrics", window=WindowInfo.of(w), capture_rate_hz=rate_hz, devices=[], notes=notes)
    owner = series_devices(profile)
    lost = sorted(t for t, d in owner.items() if d is None)
    if lost:
        notes.append(f"{len(lost)} metric source(s) match no GPU of the profile (typeId "
                     f"{', '.join(hex(t) for t in lost[:3])}): left out.")
    names = {(int(t), int(m)): n for t, m, n in profile.rows(
        "SELECT type_id, metric_id, metric_name FROM gpu_metric_names WHERE metric_name IS NOT NULL")}
    unions = kernel_unions(profile, w, devices)
    out = []
    for device in devices:
        types = [t for t, d in owner.items() if d == device]
        if not types:
            continue
        series, _ = _series(profile, w, types)
        union = unions[device]
        top = _top_kernels(profile, w, device, params.limit)
        stats, steps, n_samples = [], [], 0
        keyed: dict[str, list[tuple[int, str, np.ndarray, np.ndarray, np.ndarray]]] = {}
        for (t_id, m_id), s in sorted(series.items()):
            name = names.get((t_id, m_id)) or f"metric {m_id}"
            a, b, step = _cover(s["t"])
            if step:
                steps.append(step)
            a, b = np.maximum(a, w.start_ns), np.minimum(b, w.end_ns)
            inside = b > a
            if not inside.any():
                continue
            a, b, v = a[inside], b[inside], s["value"][inside]
            length = b - a
            in_k = union.overlap(a, b)
            n_samples += len(v)
            key = metric_key(name)
            st = weighted(v, length)
            stats.append(MetricStats(name=name, key=key, primary=False, unit=metric_unit(name, key), samples=len(v),
                                     covered_ns=int(length.sum()), **st,
                                     in_kernels_mean=_mean(v, in_k), in_kernels_ns=int(in_k.sum()),
                                     in_gaps_mean=_mean(v, length - in_k), in_gaps_ns=int((length - in_k).sum())))
            if key:
                keyed.setdefault(key, []).append((_rank(name), name, a, b, v))
        if not stats:
            continue
        primary = {key: min(rows, key=lambda r: (r[0], r[1])) for key, rows in keyed.items()}
        for m in stats:
            m.primary = m.key is not None and primary[m.key][1] == m.name
        stats.sort(key=lambda m: ([k for k, _ in METRIC_KEYS].index(m.key) if m.key else len(METRIC_KEYS),
                                  not m.primary, m.name))
        by_key = {m.key: m for m in stats if m.primary}
        kernels = []
        for kname, ktime, ks, ke in top:
            ku = merge(ks, ke, w)
            means = {}
            for key, (_, _, a, b, v) in primary.items():
                mean = _mean(v, ku.overlap(a, b))
                if mean is not None:
                    means[key] = mean
            pcts = {k: means.get(k) if k in means and by_key[k].unit == "%" else None
                    for k in ("sm_active", "tensor_active", "dram_read")}
            kernels.append(KernelMetrics(name=kname, kernel_time_ns=ktime, means=means,
                                         **{f"{k}_pct": v for k, v in pcts.items()}))
        interval = int(np.median(steps)) if steps else None
        warp = by_key.get("warp_occupancy")
        out.append(DeviceMetrics(
            device_id=device, metric_set=sorted({m.name for m in stats}), samples=n_samples,
            sample_interval_ns=interval, sample_rate_hz=round(1e9 / interval, 3) if interval else None,
            kernel_busy_pct=round(pct(union.total, w), 3),
            gr_active_pct=by_key["gr_active"].mean if "gr_active" in by_key else None,
            sm_active_pct=by_key["sm_active"].mean if "sm_active" in by_key else None,
            sm_active_in_kernels_pct=by_key["sm_active"].in_kernels_mean if "sm_active" in by_key else None,
            tensor_active_in_kernels_pct=(by_key["tensor_active"].in_kernels_mean if "tensor_active" in by_key
                                          else None),
            warp_occupancy_in_kernels_pct=warp.in_kernels_mean if warp is not None and warp.unit == "%" else None,
            metrics=stats, top_kernels=kernels))
    if not out:
        notes.append("No GPU metric samples of the asked GPUs inside the window.")
    return Result(tool="gpu_metrics", window=WindowInfo.of(w), capture_rate_hz=rate_hz, devices=out, notes=notes)


def mean_inside(profile, w, device: int, key: str, starts, ends) -> float | None:
    """The time-weighted mean of ``device``'s primary ``key`` metric inside the union of the intervals
    ``[starts, ends)`` (clipped to the window): what the SMs did while some kernels ran. None without samples."""
    if not profile.has_table("gpu_metrics"):
        return None
    types = [t for t, d in series_devices(profile).items() if d == device]
    if not types or not len(starts):
        return None
    names = {(int(t), int(m)): n for t, m, n in profile.rows(
        "SELECT type_id, metric_id, metric_name FROM gpu_metric_names WHERE metric_name IS NOT NULL")}
    series, _ = _series(profile, w, types)
    keyed = [(_rank(names[k]), names[k], k) for k in series if k in names and metric_key(names[k]) == key]
    if not keyed:
        return None
    s = series[min(keyed)[2]]
    a, b, _ = _cover(s["t"])
    u = merge(np.asarray(starts, np.int64), np.asarray(ends, np.int64), w)
    return _mean(s["value"], u.overlap(np.maximum(a, w.start_ns), np.minimum(b, w.end_ns)))


def _top_kernels(profile, w, device: int, limit: int) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """The device's kernels with the most (clipped) time: (short name, ns, starts, ends)."""
    clip = f'least("end", {w.end_ns}) - greatest(start, {w.start_ns})'
    rows = profile.rows(f"""SELECT short_name_id, sum({clip})::BIGINT FROM kernel_times
        WHERE device_id = {int(device)} AND "end" > {w.start_ns} AND start < {w.end_ns}
        GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT {int(limit)}""")
    if not rows:
        return []
    label = {int(i): v for i, v in profile.rows("SELECT id, value FROM strings WHERE id IN (SELECT unnest(?))",
                                                [[int(r[0]) for r in rows if r[0] is not None]])}
    out = []
    for sid, ns in rows:
        d = profile.con.execute(f"""SELECT start, "end" FROM kernel_times WHERE device_id = {int(device)}
            AND short_name_id {'IS NULL' if sid is None else f'= {int(sid)}'} AND "end" > {w.start_ns}
            AND start < {w.end_ns}""").fetchnumpy()
        out.append((label.get(int(sid), "<unnamed kernel>") if sid is not None else "<unnamed kernel>", int(ns),
                    np.asarray(d["start"], np.int64), np.asarray(d["end"], np.int64)))
    return out


TOOL = Tool(
    name="gpu_metrics",
    summary=("Is a busy GPU really busy? The sampled GPU metrics (SM active, SM issue, tensor active, warps in "
             "flight, DRAM/PCIe/NVLink throughput) per GPU: time-weighted mean and percentiles over the window, "
             "while kernels run versus in the gaps, and per top kernel; the metric set and sampling rate."),
    params=Params, result=Result, run=run,
)
