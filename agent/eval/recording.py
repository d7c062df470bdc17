"""``--record``: the answered cases written out as replay cases (their YAML fields and the replies recorded)."""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from ..replay import script_item
from .cases import yaml_module
from .results import CaseResult


def write_recording(results: list[CaseResult], out_dir: Path, model: str) -> list[str]:
    """Each answered case as a replay case: its YAML fields, the replies recorded, and the check kinds
    that failed live as ``expect_fail`` (latency left out: a replay is not timed like the endpoint)."""
    yaml = yaml_module()
    out_dir.mkdir(parents=True, exist_ok=True)
    at = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    by_file: dict[Path, list[dict]] = {}
    for r in results:
        if r.status not in ("passed", "failed") or r.script is None:
            continue
        raw = {k: v for k, v in r.case._raw.items() if k not in ("script", "recorded", "expect_fail", "why")}
        failed = [k for k in r.failed_kinds if k != "latency"]
        raw["expect_fail"] = failed or False
        if failed:
            raw["why"] = f"recorded from {model}: failed {', '.join(failed)} live"
        raw["recorded"] = {"model": model, "at": at}
        if r.case.profile.path and not Path(r.case.profile.path).is_absolute():  # keep it pointing at the file
            raw["profile"] = {"path": str((r.case.file.parent / r.case.profile.path).resolve())}
        raw["script"] = [script_item(x) for x in r.script]
        by_file.setdefault(r.case.file, []).append(raw)
    written = []
    for src, items in by_file.items():
        dest = out_dir / src.name
        dest.write_text(yaml.safe_dump(items, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")
        written.append(str(dest))
    return written
