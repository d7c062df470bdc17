"""memcpy: where the copies go, how fast, which block the host, and which make kernels wait.

Definitions: a copy is in the window when it overlaps it; ``total_ns`` sums durations clipped to
the window; ``gbps`` is bytes / whole-copy duration in ns (= GB/s, 1 GB = 1e9 B). A synchronous
copy is one launched (same pid and correlation id) by a memcpy API without 'Async' in its name.
Unified-memory page migrations (copyKind 11-13: the driver moving managed pages on demand) are not
explicit copies: they are counted apart (``migrations``), outside ``by_kind``, ``host_memory``,
the synchronous copies and the stalls, but inside each device's memory busy time.
A pre-kernel stall is an HtoD copy of at least ``min_stall_ms`` during which no kernel of its
device runs and after which a kernel of that device starts: the copy sits in the gap before that
kernel. (Steps from NVTX are not used; this simpler definition needs no NVTX.)
"""
from __future__ import annotations

import numpy as np
from pydantic import BaseModel, Field

from dashcam.measure.definitions import NS_PER_MS, pct
from dashcam.measure.gpu_models import model_of, pinned_copy_ns
from dashcam.measure.intervals import EMPTY, kernel_unions, memory_unions, merge

from .base import Tool, ToolParams, ToolResult, WindowInfo

KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")  # 'Unknown' is added only when present

# A device is transfer-bound when its memory ops take more of the window than its kernels AND at
# least this share of it: below ~30 % copies leave most of the window to other causes, so making
# them faster cannot be the main win even when the kernels are even less busy.
TRANSFER_BOUND_MIN_PCT = 30.0
# A synchronous DtoH copy this small reads a flag, a scalar or a residual back to decide what to launch next: its cost
# is the wait for the GPU, not its bytes, and a CUDA graph cannot cross it (the host decides after it).
READBACK_MAX_BYTES = 4096
# A copy under 64 KiB is *small*: on PCIe or NVLink its time is mostly the fixed cost of issuing and completing a copy
# (a few µs), not bytes over the link, so many of them cost far more than one copy of their bytes.
SMALL_COPY_BYTES = 64 * 1024

# Synchronous copy calls: runtime or driver memcpy entry points without 'Async' in the name
# (cudaMemcpy, cudaMemcpy2D, cudaMemcpyToSymbol, cudaMemcpyPeer, cuMemcpyHtoD, cuMemcpyDtoH, ...).
SYNC_COPY_NAME_IDS = ("SELECT id FROM api_names WHERE regexp_matches(raw_name, '^cu(da)?Memcpy') "
                      "AND NOT contains(lower(raw_name), 'async')")


class Params(ToolParams):
    min_stall_ms: float = Field(
        1.0, ge=0, description="Shortest HtoD copy (ms) reported as a pre-kernel stall.")


class KindStats(BaseModel):
    kind: str = Field(description="Copy direction: HtoD, DtoH, DtoD, HtoH, PtoP (Unknown if the profile has others).")
    count: int = Field(description="Copies of this kind overlapping the window.")
    bytes: int = Field(description="Bytes of those copies (whole copies, not cut at the window edge).")
    total_ns: int = Field(
        description="Sum of their durations clipped to the window (summed over streams, not a union).")
    gbps: float | None = Field(
        description="bytes / summed duration of these copies in ns = GB/s (1 GB = 1e9 B). Uses whole copy "
                    "durations, so it equals bytes/total_ns unless the window cuts a copy; null when 0 ns.")


class HostMemStats(BaseModel):
    kind: str = Field(description="HtoD or DtoH.")
    host_mem: str = Field(description="Host side of the copy: pageable, pinned, or unknown (not recorded).")
    count: int
    bytes: int
    total_ns: int = Field(description="Sum of durations clipped to the window.")
    gbps: float | None = Field(description="bytes / summed whole-copy duration in ns (GB/s); null when 0 ns.")


class SyncCall(BaseModel):
    api: str = Field(description="Synchronous copy API (version suffix stripped), e.g. cudaMemcpy.")
    calls: int = Field(description="Calls that launched at least one copy in the window.")
    copies: int
    bytes: int
    blocked_ns: int = Field(description="Host time inside these calls, each call clipped to the window, summed.")


class DeviceCopies(BaseModel):
    device_id: int
    copy_count: int = Field(description="Copies on this device overlapping the window.")
    copy_bytes: int
    copy_busy_ns: int = Field(description="Length of the union of memcpy and memset intervals in the window.")
    copy_busy_pct: float = Field(description="copy_busy_ns as % of the window.")
    kernel_busy_ns: int = Field(description="Length of the union of kernel intervals in the window.")
    kernel_busy_pct: float = Field(description="kernel_busy_ns as % of the window.")
    copy_kernel_overlap_ns: int = Field(
        description="Time the memory-op union overlaps the kernel union (copies hidden behind kernels).")
    copy_kernel_overlap_pct: float = Field(
        description="copy_kernel_overlap_ns as % of copy_busy_ns (0 when no memory ops).")
    transfer_bound: bool = Field(
        description=f"copy_busy_pct > kernel_busy_pct and copy_busy_pct >= {TRANSFER_BOUND_MIN_PCT:g}.")
    pre_kernel_stall_count: int
    pre_kernel_stall_ns: int
    migration_count: int = Field(0, description="Unified-memory migrations on this device overlapping the window.")
    migration_bytes: int = 0
    gpu_model: str | None = Field(None, description="The GPU's model (measure/gpu_models.py), null when unknown.")
    host_link: str | None = Field(None, description="Its link to the host (PCIe 4.0 x16...), null when unknown.")
    host_link_gbps: float | None = Field(None, description="What pinned copies achieve over that link, one direction "
                                                           "(GB/s).")
    host_copies: int = Field(0, description="HtoD and DtoH copies on this device in the window.")
    htod_bytes: int = Field(0, description="Bytes of its HtoD copies.")
    dtoh_bytes: int = Field(0, description="Bytes of its DtoH copies.")
    pinned_copies: int = Field(0, description="Those from or to pinned host memory.")
    host_copy_gbps: float | None = Field(None, description="What they achieve over the link: in the direction with the "
                                                           "most bytes, its bytes / the union of its copies' "
                                                           "intervals (concurrent copies share the link), GB/s.")
    host_copy_link_pct: float | None = Field(None, description="host_copy_gbps as % of host_link_gbps.")
    pin_saving_ns: int = Field(0, description="What pinning would save: per pageable copy, its time in the window "
                                              "less the share a pinned copy would take (latency + bytes at "
                                              "host_link_gbps), summed; 0 when the link is unknown.")
    dram_gbps: float | None = Field(None, description="The GPU model's peak DRAM bandwidth (GB/s), null when unknown.")
    dtod_gbps: float | None = Field(None, description="Its device-to-device copies: their bytes / the union of their "
                                                      "intervals, GB/s; null without any.")
    dtod_dram_gbps: float | None = Field(None, description="The DRAM traffic that makes: each byte is read and "
                                                           "written, so twice dtod_gbps.")
    dtod_dram_pct: float | None = Field(None, description="dtod_dram_gbps as % of dram_gbps: near 100, the copies run "
                                                          "as fast as the memory allows.")
    async_copies: int = Field(0, description="Explicit copies issued by an asynchronous call (name with 'Async').")
    copy_streams: int = Field(0, description="Streams the explicit copies run on.")
    readbacks: int = Field(0, description="DtoH copies of at most READBACK_MAX_BYTES issued by a synchronous call: "
                                          "the host reading a flag or a scalar back (it waits for the GPU each time).")
    exposed_copy_ns: int = Field(0, description="copy_busy_ns - copy_kernel_overlap_ns: copy time no kernel hides.")
    overlap_saving_ns: int = Field(0, description="What overlapping copies with kernels could save at most: "
                                                  "exposed_copy_ns, bounded by the kernel time no copy overlaps yet.")


class SmallCopies(BaseModel):
    kind: str = Field(description="Copy direction.")
    count: int = Field(description="Copies of this kind under small_copy_bytes overlapping the window.")
    bytes: int
    total_ns: int = Field(description="Sum of their durations clipped to the window.")
    median_ns: int = Field(description="Median duration of one such copy (whole copy).")
    median_bytes: int = Field(description="Median size of one such copy.")


class Stall(BaseModel):
    device_id: int
    stream_id: int | None = None
    start_ms: float = Field(description="Copy start, ms from the start of the profile's GPU activity.")
    duration_ns: int = Field(description="Copy duration clipped to the window.")
    bytes: int
    pageable: bool | None = Field(description="True for pageable host memory, False for pinned, null if unknown.")
    next_kernel: str = Field(description="Short name of the first kernel on the device starting after the copy.")
    next_kernel_start_ms: float


class Result(ToolResult):
    copy_count: int = Field(description="Explicit copies overlapping the window on the selected GPUs (migrations "
                                        "not included).")
    copy_bytes: int
    by_kind: list[KindStats] = Field(description="Explicit copies by direction.")
    migration_count: int = Field(0, description="Unified-memory page migrations overlapping the window.")
    migration_bytes: int = 0
    migrations: list[KindStats] = Field(default_factory=list, description="Unified-memory migrations by direction.")
    host_memory: list[HostMemStats] = Field(description="Pageable vs pinned split of the host copies (HtoD, DtoH).")
    sync_copy_count: int = Field(description="Copies launched by a synchronous memcpy call (name without 'Async').")
    sync_copy_calls: int
    sync_copy_bytes: int
    sync_blocked_ns: int = Field(description="Host time blocked in those calls (each clipped to the window), summed.")
    sync_by_api: list[SyncCall]
    devices: list[DeviceCopies]
    pre_kernel_stall_min_ns: int = Field(description="Shortest copy counted as a pre-kernel stall.")
    pre_kernel_stall_count: int = Field(
        description="HtoD copies >= the minimum that run while no kernel of their device runs, followed by a kernel.")
    pre_kernel_stall_ns: int
    pre_kernel_stalls: list[Stall] = Field(description="The largest pre-kernel stalls, longest first.")
    small_copy_bytes: int = Field(SMALL_COPY_BYTES, description="Copies under this many bytes are small: their time "
                                                                "is fixed cost, not bandwidth.")
    small_copies: list[SmallCopies] = Field(default_factory=list, description="Small explicit copies by direction.")
    small_copy_count: int = Field(0, description="Explicit copies under small_copy_bytes in the window.")
    median_copy_bytes: int | None = Field(None, description="Median size of an explicit copy in the window.")


def _gbps(nbytes: int, dur_ns: int) -> float | None:
    return round(nbytes / dur_ns, 6) if dur_ns > 0 else None


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _add(acc: list[int], row: list[int]) -> None:
    for i, v in enumerate(row):
        acc[i] += v


def run(profile, params: Params) -> Result:
    w = profile.window(params.start_ms, params.end_ms)
    devices = profile.check_gpu(params.gpu)
    w0, w1 = int(w.start_ns), int(w.end_ns)
    dev_filter = "" if params.gpu is None else f" AND device_id = {int(params.gpu)}"
    # In the window: overlaps it, or is a zero-length copy on its edge.
    in_window = f'(("end" > {w0} AND start < {w1}) OR (start = "end" AND start BETWEEN {w0} AND {w1})){dev_filter}'
    clipped = f'greatest(least("end", {w1}) - greatest(start, {w0}), 0)'

    groups = profile.rows(
        f"SELECT kind, host_mem, device_id, migration, count(*), sum(bytes), sum({clipped}), sum(dur) "
        f"FROM memcpy WHERE {in_window} GROUP BY ALL")
    kinds = {k: [0, 0, 0, 0] for k in KINDS}
    migrations: dict[str, list[int]] = {}
    host: dict[tuple[str, str], list[int]] = {}
    per_dev: dict[int, list[int]] = {}
    per_dev_mig: dict[int, list[int]] = {}
    for kind, mem, dev, migration, n, nbytes, clip_ns, dur_ns in groups:
        row = [int(n), int(nbytes or 0), int(clip_ns or 0), int(dur_ns or 0)]
        if migration:
            _add(migrations.setdefault(kind, [0, 0, 0, 0]), row)
            if dev is not None:
                _add(per_dev_mig.setdefault(int(dev), [0, 0]), row[:2])
            continue
        _add(kinds.setdefault(kind, [0, 0, 0, 0]), row)
        if kind in ("HtoD", "DtoH"):
            _add(host.setdefault((kind, mem or "unknown"), [0, 0, 0, 0]), row)
        if dev is not None:
            d = per_dev.setdefault(int(dev), [0, 0])
            d[0] += row[0]
            d[1] += row[1]
    by_kind = [KindStats(kind=k, count=n, bytes=b, total_ns=t, gbps=_gbps(b, dur))
               for k, (n, b, t, dur) in kinds.items()]
    migration_rows = [KindStats(kind=k, count=n, bytes=b, total_ns=t, gbps=_gbps(b, dur))
                      for k, (n, b, t, dur) in sorted(migrations.items(), key=lambda x: _kind_order(x[0]))]
    host_memory = [HostMemStats(kind=k, host_mem=m, count=n, bytes=b, total_ns=t, gbps=_gbps(b, dur))
                   for (k, m), (n, b, t, dur) in sorted(host.items(), key=lambda x: (KINDS.index(x[0][0]), x[0][1]))]

    # Names are resolved after grouping: api_calls carries name ids only.
    sync_rows = profile.rows(
        f"""WITH c AS (SELECT pid, correlation_id, bytes FROM memcpy WHERE {in_window} AND NOT migration),
                 a AS (SELECT pid, correlation_id, arg_max(name_id, "end" - start) AS name_id,
                              min(start) AS s, max("end") AS e
                       FROM api_calls WHERE name_id IN ({SYNC_COPY_NAME_IDS}) GROUP BY 1, 2),
                 calls AS (SELECT n.name, count(*) AS copies, sum(c.bytes) AS nbytes,
                                  greatest(least(any_value(a.e), {w1}) - greatest(any_value(a.s), {w0}), 0) AS blocked
                           FROM c JOIN a USING (pid, correlation_id) JOIN api_names n ON n.id = a.name_id
                           GROUP BY a.pid, a.correlation_id, n.name)
            SELECT name, count(*), sum(copies), sum(nbytes), sum(blocked) FROM calls GROUP BY 1 ORDER BY 5 DESC, 1""")
    sync_by_api = [SyncCall(api=n, calls=int(c), copies=int(k), bytes=int(b or 0), blocked_ns=int(t or 0))
                   for n, c, k, b, t in sync_rows]

    ku = kernel_unions(profile, w, devices)
    mu = memory_unions(profile, w, devices)
    min_stall_ns = round(params.min_stall_ms * NS_PER_MS)
    stalls, stall_dev = _pre_kernel_stalls(profile, w, in_window, ku, min_stall_ns, params.limit)

    links = _host_links(profile, devices, in_window, clipped)
    out_devices = []
    for d in devices:
        k, m = ku.get(d, EMPTY), mu.get(d, EMPTY)
        overlap = int(k.overlap(m.starts, m.ends).sum()) if len(m) and len(k) else 0
        exposed = m.total - overlap
        mem_pct, k_pct = pct(m.total, w), pct(k.total, w)
        n_stall, t_stall = stall_dev.get(d, (0, 0))
        out_devices.append(DeviceCopies(
            device_id=d, copy_count=per_dev.get(d, [0, 0])[0], copy_bytes=per_dev.get(d, [0, 0])[1],
            copy_busy_ns=m.total, copy_busy_pct=round(mem_pct, 3),
            kernel_busy_ns=k.total, kernel_busy_pct=round(k_pct, 3),
            copy_kernel_overlap_ns=overlap,
            copy_kernel_overlap_pct=round(100.0 * overlap / m.total, 3) if m.total else 0.0,
            transfer_bound=bool(mem_pct > k_pct and mem_pct >= TRANSFER_BOUND_MIN_PCT),
            pre_kernel_stall_count=n_stall, pre_kernel_stall_ns=t_stall,
            migration_count=per_dev_mig.get(d, [0, 0])[0], migration_bytes=per_dev_mig.get(d, [0, 0])[1],
            exposed_copy_ns=exposed, overlap_saving_ns=max(0, min(exposed, k.total - overlap)), **links.get(d, {}),
        ))

    notes = []
    if not profile.has_table("memcpy"):
        notes.append("No memcpy rows (CUPTI_ACTIVITY_KIND_MEMCPY absent or empty): no copies to report.")
    elif any(m == "unknown" for _, m in host):
        notes.append("Some host copies have no srcKind/dstKind: pageable vs pinned is unknown for them.")
    if not profile.has_table("runtime"):
        notes.append("No CUDA API rows: synchronous copies cannot be identified (sync_* fields are 0).")
    if not profile.has_table("kernel"):
        notes.append("No kernels: copy/kernel overlap and pre-kernel stalls cannot be measured.")

    n_all = sum(v[0] for v in kinds.values())
    small = _small_copies(profile, in_window, clipped)
    return Result(
        tool="memcpy", window=WindowInfo.of(w),
        copy_count=n_all, copy_bytes=sum(v[1] for v in kinds.values()),
        by_kind=[r for r in by_kind if r.kind in KINDS or r.count],
        migration_count=sum(r.count for r in migration_rows), migration_bytes=sum(r.bytes for r in migration_rows),
        migrations=migration_rows,
        host_memory=host_memory,
        sync_copy_count=sum(r.copies for r in sync_by_api), sync_copy_calls=sum(r.calls for r in sync_by_api),
        sync_copy_bytes=sum(r.bytes for r in sync_by_api), sync_blocked_ns=sum(r.blocked_ns for r in sync_by_api),
        sync_by_api=sync_by_api, devices=out_devices,
        pre_kernel_stall_min_ns=min_stall_ns,
        pre_kernel_stall_count=sum(n for n, _ in stall_dev.values()),
        pre_kernel_stall_ns=sum(t for _, t in stall_dev.values()),
        pre_kernel_stalls=stalls, notes=notes,
        small_copies=small, small_copy_count=sum(k.count for k in small),
        median_copy_bytes=_median_bytes(profile, in_window),
    )


def _small_copies(profile, in_window: str, clipped: str) -> list[SmallCopies]:
    rows = profile.rows(
        f"SELECT kind, count(*), sum(bytes), sum({clipped}), median(dur), median(bytes) FROM memcpy "
        f"WHERE {in_window} AND NOT migration AND bytes < {SMALL_COPY_BYTES} GROUP BY kind")
    out = [SmallCopies(kind=k, count=int(n), bytes=int(b or 0), total_ns=int(t or 0), median_ns=int(md or 0),
                       median_bytes=int(mb or 0)) for k, n, b, t, md, mb in rows]
    return sorted(out, key=lambda r: (_kind_order(r.kind), r.kind))


def _median_bytes(profile, in_window: str) -> int | None:
    rows = profile.rows(f"SELECT median(bytes) FROM memcpy WHERE {in_window} AND NOT migration")
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def _host_links(profile, devices: list[int], in_window: str, clipped: str) -> dict[int, dict]:
    """Per device: its model and host link, its host copies (pinned count, achieved rate against the link), what
    pinning the pageable ones would save, and how its explicit copies are issued (async calls, streams)."""
    names = {g.device_id: g.name for g in profile.gpus.values()}
    out: dict[int, dict] = {}
    for d in devices:
        model = model_of(names.get(d))
        out[d] = {"gpu_model": model.name if model else None, "host_link": model.link_name if model else None,
                  "host_link_gbps": model.host_link_gbps if model else None,
                  "dram_gbps": model.memory_gbps if model else None}
    dd = profile.con.execute(f"""SELECT device_id, bytes, start, "end" FROM memcpy WHERE {in_window} AND NOT migration
                                 AND kind = 'DtoD' AND device_id IS NOT NULL""").fetchnumpy()
    ddev = np.asarray(dd["device_id"], dtype=np.int64)
    for d in devices:
        sel = ddev == d
        if not sel.any():
            continue
        u = merge(np.asarray(dd["start"], dtype=np.int64)[sel], np.asarray(dd["end"], dtype=np.int64)[sel])
        rate = _gbps(int(np.asarray(dd["bytes"], dtype=np.int64)[sel].sum()), u.total)
        if rate is not None:
            dram = out[d]["dram_gbps"]
            out[d].update(dtod_gbps=rate, dtod_dram_gbps=round(2 * rate, 6),
                          dtod_dram_pct=round(100.0 * 2 * rate / dram, 3) if dram else None)
    c = profile.con.execute(
        f"SELECT device_id, host_mem, bytes, dur, {clipped} AS clip, kind = 'HtoD' AS htod, start, \"end\" FROM memcpy "
        f"WHERE {in_window} AND NOT migration "
        "AND kind IN ('HtoD', 'DtoH') AND device_id IS NOT NULL").fetchnumpy()
    dev = np.asarray(c["device_id"], dtype=np.int64)
    pinned = np.asarray([m == "pinned" for m in np.ma.asarray(c["host_mem"]).tolist()], dtype=bool)
    pageable = np.asarray([m == "pageable" for m in np.ma.asarray(c["host_mem"]).tolist()], dtype=bool)
    nbytes, dur = np.asarray(c["bytes"], dtype=np.int64), np.asarray(c["dur"], dtype=np.int64)
    clip = np.asarray(c["clip"], dtype=np.int64)
    htod = np.asarray(c["htod"], dtype=bool)
    c0, c1 = np.asarray(c["start"], dtype=np.int64), np.asarray(c["end"], dtype=np.int64)
    for d in devices:
        sel = dev == d
        row, link = out[d], out[d]["host_link_gbps"]
        row.update(host_copies=int(sel.sum()), pinned_copies=int((sel & pinned).sum()),
                   htod_bytes=int(nbytes[sel & htod].sum()), dtoh_bytes=int(nbytes[sel & ~htod].sum()))
        way = sel & (htod if row["htod_bytes"] >= row["dtoh_bytes"] else ~htod)
        if way.any():
            u = merge(c0[way], c1[way])
            row["host_copy_gbps"] = _gbps(int(nbytes[way].sum()), u.total)
        if link and row.get("host_copy_gbps") is not None:
            row["host_copy_link_pct"] = round(100.0 * row["host_copy_gbps"] / link, 3)
        if link:
            i = np.flatnonzero(sel & pageable & (dur > 0))
            ideal = np.array([pinned_copy_ns(int(b), link) for b in nbytes[i]], dtype=np.float64)
            row["pin_saving_ns"] = int(np.maximum(0.0, clip[i] * (1.0 - ideal / dur[i])).sum())
    issued = profile.rows(
        f"""WITH c AS (SELECT device_id, stream_id, pid, correlation_id FROM memcpy
                       WHERE {in_window} AND NOT migration AND device_id IS NOT NULL),
                 a AS (SELECT DISTINCT pid, correlation_id FROM api_calls
                       WHERE name_id IN (SELECT id FROM api_names WHERE regexp_matches(raw_name, '^cu(da)?Memcpy')
                                         AND contains(lower(raw_name), 'async')))
            SELECT c.device_id, count(a.pid), count(DISTINCT c.stream_id)
            FROM c LEFT JOIN a USING (pid, correlation_id) GROUP BY 1""")
    for d, n_async, streams in issued:
        if int(d) in out:
            out[int(d)].update(async_copies=int(n_async), copy_streams=int(streams))
    readbacks = profile.rows(
        f"""WITH c AS (SELECT device_id, pid, correlation_id FROM memcpy
                       WHERE {in_window} AND NOT migration AND kind = 'DtoH' AND bytes <= {READBACK_MAX_BYTES}
                       AND device_id IS NOT NULL),
                 a AS (SELECT DISTINCT pid, correlation_id FROM api_calls WHERE name_id IN ({SYNC_COPY_NAME_IDS}))
            SELECT c.device_id, count(*) FROM c JOIN a USING (pid, correlation_id) GROUP BY 1""")
    for d, n in readbacks:
        if int(d) in out:
            out[int(d)]["readbacks"] = int(n)
    return out


def _pre_kernel_stalls(profile, w, in_window: str, ku: dict, min_ns: int, limit: int) -> tuple[list[Stall], dict]:
    """HtoD copies >= min_ns with no kernel of their device running and a kernel after them.

    Returns the ``limit`` longest as rows, and (count, total ns) per device.
    """
    w0, w1 = int(w.start_ns), int(w.end_ns)
    c = profile.con.execute(
        f"SELECT device_id, stream_id, greatest(start, {w0}) AS s, least(\"end\", {w1}) AS e, bytes, host_mem "
        f"FROM memcpy WHERE kind = 'HtoD' AND NOT migration AND device_id IS NOT NULL AND {in_window} "
        f"AND least(\"end\", {w1}) - greatest(start, {w0}) >= {int(min_ns)}").fetchnumpy()
    dev = np.asarray(c["device_id"], dtype=np.int64)
    s = np.asarray(c["s"], dtype=np.int64)
    e = np.asarray(c["e"], dtype=np.int64)
    hit = np.zeros(len(dev), dtype=bool)
    next_start = np.zeros(len(dev), dtype=np.int64)
    for d in np.unique(dev):
        k = ku.get(int(d))
        if k is None or not len(k):
            continue
        i = np.flatnonzero(dev == d)
        idx = np.searchsorted(k.starts, e[i], side="left")  # first kernel-union interval starting at/after the end
        ok = (idx < len(k)) & (k.overlap(s[i], e[i]) == 0)
        hit[i[ok]] = True
        next_start[i[ok]] = k.starts[idx[ok]]
    per_dev: dict[int, tuple[int, int]] = {}
    for d in np.unique(dev[hit]):
        sel = hit & (dev == d)
        per_dev[int(d)] = (int(sel.sum()), int((e[sel] - s[sel]).sum()))
    rows = np.flatnonzero(hit)
    rows = rows[np.lexsort((s[rows], -(e[rows] - s[rows])))][:limit]
    if not len(rows):
        return [], per_dev
    # Names of the listed next kernels only: the start filter reaches the scan before the name joins.
    starts = ", ".join(str(t) for t in sorted({int(next_start[r]) for r in rows}))
    names = {(int(a), int(b)): n for a, b, n in profile.rows(
        f"SELECT device_id, start, min(short_name) FROM kernels WHERE start IN ({starts}) GROUP BY 1, 2")}
    host_mem = np.ma.asarray(c["host_mem"]).tolist()
    stream = np.ma.asarray(c["stream_id"]).tolist()
    nbytes = np.asarray(c["bytes"], dtype=np.int64)
    stalls = [Stall(
        device_id=int(dev[r]), stream_id=None if stream[r] is None else int(stream[r]),
        start_ms=round(w.rel_ms(int(s[r])), 6), duration_ns=int(e[r] - s[r]), bytes=int(nbytes[r]),
        pageable=None if host_mem[r] is None else host_mem[r] == "pageable",
        next_kernel=names.get((int(dev[r]), int(next_start[r])), "<unknown kernel>"),
        next_kernel_start_ms=round(w.rel_ms(int(next_start[r])), 6)) for r in rows]
    return stalls, per_dev


TOOL = Tool(
    name="memcpy",
    summary=("How the GPU copies data: per direction count, bytes, time and GB/s, pageable vs pinned, synchronous "
             "cudaMemcpy calls blocking the host, per GPU copy busy % and overlap with kernels, and HtoD copies "
             "that stall the GPU before its next kernel."),
    params=Params, result=Result, run=run,
)
