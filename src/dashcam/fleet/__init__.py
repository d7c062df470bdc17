"""The fleet: one report per rank (or per node), hundreds of them, analysed together — which rank or node
holds the others back, who idles, which GPU is slower at the same kernel, which capture failed.

Map (digest.py, on workers through execute.py: in-process, a Dask LocalCluster or an existing cluster): one
small digest per report, computed by the tools and the findings engine, cached per report (store.py).
Reduce (rules.py, report.py, on the client): the cross-rank rules, a verdict, a grounded paragraph and the
rank table. Sits between the reports and the agent: ``ask``, ``summary`` and ``chat`` take a fleet too.
"""
from dashcam.fleet.inputs import discover, is_fleet
from dashcam.fleet.report import FleetReport, analyse, to_json, to_markdown, to_text

__all__ = ["FleetReport", "analyse", "discover", "is_fleet", "to_json", "to_markdown", "to_text"]
