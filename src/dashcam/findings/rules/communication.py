"""nccl_not_overlapped: NCCL communication runs with no compute beside it for at least
NOT_OVERLAPPED_EXPOSED_PCT of the window (nccl's verdict); severity by that exposed share; the saving is
the exposed time."""
from __future__ import annotations

from dashcam.findings import advice
from dashcam.findings.rules import Item, at_least, loss_severity
from dashcam.text.format import duration, percent


def find(f) -> list[Item]:
    out = []
    for d, x in f.rows("nccl").items():
        if x.verdict != "not_overlapped":
            continue
        figures = {"gpu": d, "exposed_comm_pct": x.exposed_comm_pct, "exposed_comm_ns": x.exposed_comm_ns,
                   "comm_pct": x.comm_pct, "overlap_pct": x.overlap_pct}
        hidden = (f"; {percent(x.overlap_pct)} of the communication overlaps compute" if x.overlap_pct
                  else "; none of it overlaps compute" if x.overlap_pct == 0 else "")
        sentence = (f"Communication not overlapped: GPU {d} spends {percent(x.exposed_comm_pct)} of the "
                    f"{duration(f.window_ns)} window in NCCL kernels with no compute beside them{hidden}.")
        out.append(Item("nccl_not_overlapped", d, at_least(loss_severity(x.exposed_comm_pct), "low"),
                        x.exposed_comm_ns, figures, [f.ev("nccl"), f.ev("overview")],
                        f"GPU {d}: NCCL not overlapped, {percent(x.exposed_comm_pct)} of the window exposed", sentence,
                        advice.communication(f), extra={"impact": x.exposed_comm_pct}))
    return out
