"""The fleet: one report per rank (or per node), hundreds of them, analysed together — which rank or node
holds the others back, who idles, which GPU is slower at the same kernel, which capture failed.

Map (digest.py, on workers through execute.py: in-process, a Dask LocalCluster or an existing cluster): one
small digest per report, computed by the tools and the findings engine, cached per report (store.py).
Reduce (rules.py, report.py, on the client): the cross-rank rules, a verdict, a grounded paragraph and the
rank table. Sits between the reports and the agent: ``ask``, ``summary`` and ``chat`` take a fleet too.
"""
from dashcam.fleet.inputs import discover, is_fleet

__all__ = ["FleetReport", "analyse", "discover", "is_fleet", "to_csv", "to_json", "to_markdown", "to_text"]
_FROM_REPORT = ("FleetReport", "analyse", "to_csv", "to_json", "to_markdown", "to_text")


def __getattr__(name: str):
    """The report's names load on first use: `dashcam ask PROFILE` asks is_fleet on every run and must not pay
    for the findings engine, the tools and numpy before it knows it is a fleet (CLI start-up stays light)."""
    if name in _FROM_REPORT:
        from dashcam.fleet import report

        return getattr(report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
