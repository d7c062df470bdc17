"""transfer_bound: copies keep a GPU busier than its kernels (memcpy's flag: memory busy above kernel busy
and at least TRANSFER_BOUND_MIN_PCT of the window), unless half that memory time or more is unified-memory
migrations (the um_migrations finding is about those). The saving is what the first copy remedy would save
(remedies.copies: pinning, overlapping, or at most the copy time no kernel hides), the remedy the one that saves
the most of those the program does not already apply."""
from __future__ import annotations

from dashcam.findings import remedies
from dashcam.findings.rules import Item, at_least, loss_severity
from dashcam.text.format import duration, percent


def find(f) -> list[Item]:
    out = []
    for d, x in f.rows("memcpy").items():
        g = f.device("gpu_gaps", d)
        if not x.transfer_bound or (g is not None and 2 * g.migration_ns >= x.copy_busy_ns):
            continue  # copies that are mostly unified-memory migrations: um_migrations says so
        sev = at_least(loss_severity(g.kernel_idle_pct) if g else "medium", "medium")
        figures = {"gpu": d, "copy_busy_pct": x.copy_busy_pct, "kernel_busy_pct": x.kernel_busy_pct,
                   "copy_kernel_overlap_pct": x.copy_kernel_overlap_pct, "copy_bytes": x.copy_bytes,
                   "copy_count": x.copy_count}
        overlap = (f"{percent(x.copy_kernel_overlap_pct)} of the copy time overlaps kernels"
                   if x.copy_kernel_overlap_pct else "no copy overlaps a kernel")
        sentence = (f"Transfer-bound: GPU {d} is copy-busy {percent(x.copy_busy_pct)} of the "
                    f"{duration(f.window_ns)} window, more than kernel-busy ({percent(x.kernel_busy_pct)}); {overlap}.")
        remedy, saving = remedies.copies(f, d)
        out.append(Item("transfer_bound", d, sev, saving if saving is not None else x.exposed_copy_ns, figures,
                        [f.ev("memcpy"), f.ev("overview")],
                        f"GPU {d} transfer-bound: copy-busy {percent(x.copy_busy_pct)} of the window, kernel-busy "
                        f"{percent(x.kernel_busy_pct)}", sentence, remedy, extra={"impact": x.copy_busy_pct}))
    return out
