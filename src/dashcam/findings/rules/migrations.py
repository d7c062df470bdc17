"""um_migrations: unified-memory page migrations keep a GPU waiting.

Migrations are memcpy rows with copyKind 11-13 (the driver moving managed pages on a fault), not
explicit copies. A finding per GPU whose migrations inside its gaps (gpu_gaps ``migration_ns``) fill
at least MIGRATION_MIN_IDLE_PCT of its idle time, with that GPU's migration count and bytes (memcpy);
severity by that time's share of the window; the saving is that time.
"""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, loss_severity, share
from dashcam.findings.thresholds import MIGRATION_MIN_IDLE_PCT
from dashcam.text.format import count, duration, size


def find(f) -> list[Item]:
    out = []
    for d, dev in f.rows("gpu_gaps").items():
        mc = f.device("memcpy", d)
        if not dev.migration_ns or 100.0 * dev.migration_ns / max(dev.idle_ns, 1) < MIGRATION_MIN_IDLE_PCT:
            continue
        figures = {"gpu": d, "migration_ns": dev.migration_ns, "idle_ns": dev.idle_ns,
                   "migration_count": mc.migration_count, "migration_bytes": mc.migration_bytes}
        sentence = (f"Unified-memory page migrations keep GPU {d} waiting: they fill {duration(dev.migration_ns)} of "
                    f"its {duration(dev.idle_ns)} idle time ({count(mc.migration_count, 'migration')} moved "
                    f"{size(mc.migration_bytes)} on demand).")
        out.append(Item("um_migrations", d, loss_severity(share(dev.migration_ns, f.window_ns)),
                        dev.migration_ns, figures, [f.ev("gpu_gaps"), f.ev("memcpy")],
                        f"GPU {d} waits on unified-memory migrations ({duration(dev.migration_ns)})", sentence,
                        advice.migrations(f)))
    return out
