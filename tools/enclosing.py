"""The NVTX range a host call was made in: the innermost range open on the calling thread when the call started
(the latest started; of ranges started at the same instant the first to end, the one nested in the others; equal
ranges by label, never by the order the export's rows came in), by its group label ("train_step <n>";
measure/names.py); None outside any. Shared by the entity tools (kernel_detail: where a kernel is launched from;
api_detail: where a function is called from)."""
from __future__ import annotations

from collections import Counter

from dashcam.measure.names import nvtx_group_label


def enclosing_ranges(profile, calls: list[tuple[int, int, int]]) -> list[tuple[str | None, int]]:
    """(group label or None, calls) for calls given as (pid, tid, start), most calls first."""
    if not calls:
        return []
    pids = ", ".join(str(int(p)) for p in sorted({c[0] for c in calls}))
    lo, hi = min(c[2] for c in calls), max(c[2] for c in calls)
    try:
        ranges = profile.rows(f"""SELECT pid, tid, start, "end", label FROM nvtx WHERE is_range AND pid IN ({pids})
                                  AND start <= {int(hi)} AND "end" > {int(lo)}""")
    except Exception:  # a capture without NVTX: every call is outside a range
        ranges = []
    by_thread: dict[tuple, list] = {}
    for p, t, a, b, label in ranges:
        by_thread.setdefault((p, t), []).append((a, b, label))
    found: Counter = Counter()
    for p, t, s in calls:
        open_ = [r for r in by_thread.get((p, t), []) if r[0] <= s < r[1]]
        inner = min(open_, key=lambda r: (-r[0], r[1], r[2] or "")) if open_ else None
        found[nvtx_group_label(inner[2] or "") if inner else None] += 1
    return sorted(found.items(), key=lambda kv: (-kv[1], str(kv[0])))
