"""What answers rest on: tool runs recorded as evidence (``runs``: the one memo every surface uses,
returning the tools' typed result models) and the check that every number written comes from them
(``grounding``). Sits above the tools and below the findings engine, the reports and the agent."""
from dashcam.evidence.models import Evidence, ToolCall
from dashcam.evidence.runs import ToolRuns

__all__ = ["Evidence", "ToolCall", "ToolRuns"]
