"""um_migrations: unified-memory page migrations keep a GPU waiting, or slow the kernels that fault them in.

Migrations are memcpy rows with copyKind 11-13 (the driver moving managed pages on a fault), not
explicit copies. Two findings per GPU:

- *in the gaps*: its migrations inside its gaps (gpu_gaps ``migration_ns``) fill at least
  MIGRATION_MIN_IDLE_PCT of its idle time, with that GPU's migration count and bytes (memcpy); the saving is
  that time;
- *under the kernels* (cause ``kernel``): its migrations while its kernels run (the migrations' union in the
  window minus their part in the gaps) cover at least MIGRATION_MIN_KERNEL_PCT of its kernel busy time. The
  kernel that ran while the pages moved paid for them, not the next one (memory tool, ``kernels_waiting``):
  the finding names the kernel with the most migration time under it, its time, the bytes moved during it,
  its GPU page faults and its fault-bound share (the part of its time overlapping migrations). The saving
  is the kernel time the migrations overlap, on the assumption that with resident data (prefetched, or
  device memory) those migrations would not happen.

Severity by the saving's share of the window.
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, loss_severity, share
from dashcam.findings.thresholds import MIGRATION_MIN_IDLE_PCT, MIGRATION_MIN_KERNEL_PCT
from dashcam.text.format import count, duration, name, percent, size


def find(f) -> list[Item]:
    out = []
    for d, dev in f.rows("gpu_gaps").items():
        if dev.migration_ns and 100.0 * dev.migration_ns / max(dev.kernel_idle_ns, 1) >= MIGRATION_MIN_IDLE_PCT:
            out.append(_in_gaps(f, d, dev, f.device("memcpy", d)))
        item = _under_kernels(f, d, dev)
        if item is not None:
            out.append(item)
    return out


def _in_gaps(f, d: int, dev, mc) -> Item:
    figures = {"gpu": d, "migration_ns": dev.migration_ns, "kernel_idle_ns": dev.kernel_idle_ns,
               "migration_count": mc.migration_count, "migration_bytes": mc.migration_bytes,
               "saving_basis": "migrations removed (their time in the gaps)"}
    sentence = (f"Unified-memory page migrations keep GPU {d} waiting: they fill {duration(dev.migration_ns)} of "
                f"its {duration(dev.kernel_idle_ns)} idle time ({count(mc.migration_count, 'migration')} moved "
                f"{size(mc.migration_bytes)} on demand).")
    return Item("um_migrations", d, loss_severity(share(dev.migration_ns, f.window_ns)), dev.migration_ns, figures,
                [f.ev("gpu_gaps"), f.ev("memcpy")],
                f"GPU {d} waits on unified-memory migrations ({duration(dev.migration_ns)})", sentence,
                advice.migrations(f))


def kernel_paid(f, d: int, dev=None):
    """(the kernel of GPU ``d`` with the most migration time under it: a memory ``kernels_waiting`` row, the
    migrations' time while kernels of ``d`` run) when that time reaches MIGRATION_MIN_KERNEL_PCT of its kernel
    busy time (module docstring); else None. Runs the memory tool only for a GPU with migrations."""
    if not f.runs.profile.has_migrations:
        return None
    dev = dev or f.device("gpu_gaps", d)
    mc, o = f.device("memcpy", d), f.device("overview", d)
    if dev is None or mc is None or not mc.migration_count or o is None or not o.kernel_count:
        return None
    mem = f.runs.maybe("memory", **f.scope)
    m = next((x for x in mem.unified.migrations if x.device_id == d), None) if mem is not None else None
    if m is None:
        return None
    under = max(0, m.union_ns - dev.migration_ns)  # the migrations' time while kernels of d run
    busy = f.window_ns - dev.kernel_idle_ns
    if not under or 100.0 * under < MIGRATION_MIN_KERNEL_PCT * max(busy, 1):
        return None
    k = max((x for x in mem.unified.kernels_waiting if x.device_id == d and x.migration_overlap_ns),
            key=lambda x: (x.migration_overlap_ns, x.name), default=None)
    return (k, under) if k is not None else None


def paid_words(k) -> str:
    """ "`add` ran 113 ms while the driver migrated 536 MB of managed pages during it (2144 GPU page faults): 94.9 %
    of its time overlaps migrations (107.2 ms)" for a memory ``kernels_waiting`` row."""
    faults = f" ({count(k.faults, 'GPU page fault')})" if k.faults else ""
    return (f"{name(k.name)} ran {duration(k.kernel_ns)} while the driver migrated "
            f"{size(k.migration_overlap_bytes)} of managed pages during it{faults}: {percent(k.overlap_pct)} of its "
            f"time overlaps migrations ({duration(k.migration_overlap_ns)})")


def _under_kernels(f, d: int, dev) -> Item | None:
    """The kernel-paid finding of GPU ``d`` (module docstring), or None."""
    paid = kernel_paid(f, d, dev)
    if paid is None:
        return None
    k, under = paid
    sentence = (f"Unified-memory migrations slow GPU {d}'s kernels: {paid_words(k)}, time resident data would not "
                "spend.")
    figures = {"gpu": d, "kernel": k.name, "kernel_ns": k.kernel_ns, "kernel_launches": k.launches,
               "migration_overlap_ns": k.migration_overlap_ns, "migration_overlap_bytes": k.migration_overlap_bytes,
               "overlap_pct": k.overlap_pct, "faults": k.faults, "migrations_under_kernels_ns": under,
               "saving_basis": "migrations removed (the kernel time they overlap)"}
    return Item("um_migrations", d, loss_severity(share(under, f.window_ns)), under, figures,
                [f.ev("memory"), f.ev("gpu_gaps")],
                f"{name(k.name)} on GPU {d} pays for unified-memory migrations ({duration(k.migration_overlap_ns)})",
                sentence, advice.migrations(f), cause="kernel")
