"""top_kernels: which kernels take the most GPU time, across all devices or per device."""
from __future__ import annotations

from pydantic import BaseModel, Field

from dashcam.measure.labels import kernel_family

from .base import Tool, ToolParams, ToolResult, WindowInfo


class Params(ToolParams):
    by_device: bool = Field(
        False, description="True: one ranking per device (limit rows each). False: one ranking across all devices.")
    name_contains: str | None = Field(
        None, description="Only kernels whose full or short name contains this text (case-insensitive).")


class KernelRow(BaseModel):
    name: str = Field(description="Short kernel name (display only; rows are grouped by full_name).")
    full_name: str = Field(description="Demangled kernel name; template instantiations are separate rows.")
    device_id: int | None = Field(description="Device of this row; null when ranked across all devices.")
    count: int = Field(description="Launches overlapping the window.")
    total_ns: int = Field(description="Summed kernel durations, clipped to the window.")
    avg_ns: float
    max_ns: int
    min_ns: int
    pct: float = Field(description=(
        "total_ns as % of the summed kernel time inside the window of this row's device (by_device) or of all "
        "selected devices (across devices). The denominator ignores name_contains. Sums of durations, not a "
        "union: concurrent kernels each count."))


class DeviceKernelTime(BaseModel):
    device_id: int
    kernel_count: int = Field(description="Kernels overlapping the window on this device.")
    kernel_time_ns: int = Field(description="Summed kernel durations on this device, clipped to the window.")


class FamilyRow(BaseModel):
    family: str = Field(description="GEMM, attention, convolution, normalization, softmax, reduction, elementwise, "
                                    "copy, NCCL (measure/labels.py), or the kernel's own short name.")
    kernel_count: int
    total_ns: int = Field(description="Summed clipped durations of the family's kernels.")
    pct: float = Field(description="total_ns as % of total_kernel_ns (all selected devices; name_contains ignored).")
    top_kernel: str = Field(description="Short name of the family's kernel (one instantiation: one full name) with "
                                        "the most time.")
    top_kernel_full_name: str = Field("", description="Its demangled name.")
    top_kernel_pct: float = Field(0.0, description="Its time as % of total_kernel_ns: a family never hides how "
                                                   "much its largest instantiation takes.")
    instantiations: int = Field(1, description="Distinct full kernel names in the family.")


class Result(ToolResult):
    by_device: bool
    name_contains: str | None = None
    kernel_count: int = Field(description="Kernels overlapping the window on the selected devices.")
    total_kernel_ns: int = Field(description="Summed kernel durations on the selected devices, clipped to the window.")
    matched_count: int | None = Field(None, description="Kernels matching name_contains (null without a filter).")
    matched_ns: int | None = Field(None, description="Summed clipped durations of the matching kernels.")
    matched_pct: float | None = Field(None, description="matched_ns as % of total_kernel_ns.")
    devices: list[DeviceKernelTime]
    kernels: list[KernelRow] = Field(description="Sorted by total_ns descending (per device when by_device).")
    families: list[FamilyRow] = Field(default_factory=list, description=(
        "Kernel time by family across the selected devices, most first (limit rows)."))


def _share(part: float, whole: float) -> float:
    """``part`` as % of ``whole``, within [0, 100] (0 when whole is 0)."""
    return round(max(0.0, min(100.0, 100.0 * part / whole)), 3) if whole > 0 else 0.0


def _group(rows: list[tuple]) -> tuple:
    """Combine (short, count, total, max, min) aggregates of one kernel name."""
    return (rows[0][0], sum(r[1] for r in rows), sum(r[2] for r in rows), max(r[3] for r in rows),
            min(r[4] for r in rows))


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    has_filter = params.name_contains is not None
    match = ("(strpos(lower(name), lower($1)) > 0 OR strpos(lower(short), lower($1)) > 0)"
             if has_filter else "true")
    # One scan: per (device, full name) aggregates of the clipped durations; everything else from these.
    groups = profile.rows(
        f"""SELECT *, {match} FROM (
              SELECT device_id, name, any_value(short_name) AS short, count(*), sum(d), max(d), min(d)
              FROM (SELECT device_id, name, short_name,
                           least("end", {w.end_ns}) - greatest(start, {w.start_ns}) AS d
                    FROM kernels WHERE "end" > {w.start_ns} AND start < {w.end_ns}
                      AND device_id IN ({", ".join(str(d) for d in devices)}))
              GROUP BY device_id, name)""", [params.name_contains] if has_filter else [])

    per_dev = {d: [0, 0] for d in devices}
    ranked: dict[int | None, dict[str, list]] = {}
    fam: dict[str, dict] = {}
    for dev, name, short, n, tot, mx, mn, hit in groups:
        per_dev[int(dev)][0] += int(n)
        per_dev[int(dev)][1] += int(tot)
        f = fam.setdefault(kernel_family(short, name), {"n": 0, "ns": 0, "full": {}})
        f["n"] += int(n)
        f["ns"] += int(tot)
        f["full"].setdefault(name, [short, 0])[1] += int(tot)  # per instantiation, every device
        if hit:
            key = int(dev) if params.by_device else None
            ranked.setdefault(key, {}).setdefault(name, []).append((short, int(n), int(tot), int(mx), int(mn)))
    dev_rows = [DeviceKernelTime(device_id=d, kernel_count=n, kernel_time_ns=t) for d, (n, t) in per_dev.items()]
    kernel_count = sum(n for n, _ in per_dev.values())
    total_ns = sum(t for _, t in per_dev.values())

    kernels = []
    for dev in sorted(ranked, key=lambda d: -1 if d is None else d):
        whole = total_ns if dev is None else per_dev[dev][1]
        combined = sorted(((name, *_group(v)) for name, v in ranked[dev].items()), key=lambda r: (-r[3], r[0]))
        for name, short, n, tot, mx, mn in combined[: params.limit]:
            kernels.append(KernelRow(name=short, full_name=name, device_id=dev, count=n, total_ns=tot,
                                     avg_ns=round(tot / n, 1), max_ns=mx, min_ns=mn, pct=_share(tot, whole)))

    notes, matched = [], {}
    if not profile.has_table("kernel"):
        notes.append("No kernels in this profile (no CUPTI_ACTIVITY_KIND_KERNEL rows).")
    if has_filter:
        launches = [x for v in ranked.values() for rows in v.values() for x in rows]
        matched_ns = sum(x[2] for x in launches)
        matched = {"matched_count": sum(x[1] for x in launches), "matched_ns": matched_ns,
                   "matched_pct": _share(matched_ns, total_ns)}
        if not launches:
            notes.append(f"No kernel name contains {params.name_contains!r} in this window.")
    families = [_family_row(k, f, total_ns) for k, f in sorted(fam.items(), key=lambda kv: (-kv[1]["ns"], kv[0]))]
    return Result(tool="top_kernels", window=WindowInfo.of(w), by_device=params.by_device,
                  name_contains=params.name_contains, kernel_count=kernel_count, total_kernel_ns=total_ns,
                  devices=dev_rows, kernels=kernels, families=families[: params.limit], notes=notes, **matched)


def _family_row(family: str, f: dict, total_ns: int) -> FamilyRow:
    """A family's row; its top kernel is the instantiation (full name) with the most time (ties: by name)."""
    full = min(f["full"], key=lambda x: (-f["full"][x][1], x))
    short, ns = f["full"][full]
    return FamilyRow(family=family, kernel_count=f["n"], total_ns=f["ns"], pct=_share(f["ns"], total_ns),
                     top_kernel=short, top_kernel_full_name=full, top_kernel_pct=_share(ns, total_ns),
                     instantiations=len(f["full"]))


def kernel_labels(rows) -> list:
    """Rich labels for rows with ``name``/``full_name``: the short name, plus the part of the full name that
    tells rows with the same short name apart (template instantiations, lambdas: text/shorten.py: kernel_label)."""
    from rich.text import Text

    from dashcam.text.shorten import kernel_label

    shown = [(r.name, r.full_name) for r in rows]
    out = []
    for r in rows:
        label = kernel_label(r.name, r.full_name, shown)
        if label == r.name:
            out.append(Text(r.name))
            continue
        tail = label[len(r.name):].strip() if label.startswith(r.name + " …") else label  # else: the full name
        out.append(Text(r.name).append("\n" + tail, style="dim"))
    return out


def render(result: Result, console) -> None:
    from rich.table import Table
    from rich.text import Text

    from dashcam.text.format import fmt_ns
    from dashcam.text.tables import print_notes

    w = result.window
    console.print(Text(f"top_kernels  window {w.start_ms:.3f}–{w.end_ms:.3f} ms ({fmt_ns(w.length_ns)})",
                       style="bold"))
    console.print(Text(f"{result.kernel_count:,} kernels, {fmt_ns(result.total_kernel_ns)} summed kernel time"))
    if result.name_contains is not None:
        console.print(Text(f"matching {result.name_contains!r}: {result.matched_count:,} kernels, "
                           f"{fmt_ns(result.matched_ns)} ({result.matched_pct:.1f}% of kernel time)"))
    t = Table(title_justify="left")
    cols = (["device"] if result.by_device else []) + ["kernel", "count", "total", "avg", "max", "min", "%"]
    for c in cols:
        t.add_column(c, justify="left" if c == "kernel" else "right", overflow="fold",
                     ratio=1 if c == "kernel" else None)
    for r, label in zip(result.kernels, kernel_labels(result.kernels)):
        cells = [Text(str(r.device_id))] if result.by_device else []
        cells += [label] + [Text(c) for c in (f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.avg_ns),
                                              fmt_ns(r.max_ns), fmt_ns(r.min_ns), f"{r.pct:.1f}%")]
        t.add_row(*cells)
    console.print(t)
    if result.families:
        console.print(Text("families: " + ", ".join(f"{f.family} {f.pct:.1f}%" for f in result.families)))
    print_notes(result.notes, console)


TOOL = Tool(
    name="top_kernels",
    summary=("Which kernels take the most GPU time: count, total/avg/max/min duration and % of kernel time per "
             "kernel (grouped by full demangled name), across all GPUs or ranked per GPU."),
    params=Params, result=Result, run=run,
)
