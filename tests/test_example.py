"""The example the repo ships: in sync with its generator, and its planted story holds."""
import sqlite3
from pathlib import Path

from dashcam.profile import Profile
from dashcam.testing.scenarios import demo
from dashcam.tools import get_tool

from .conftest import MS

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "demo.sqlite"


def dump(path: Path) -> dict[str, list]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY 1")]
    return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}


def test_committed_example_matches_its_generator(tmp_path):
    assert dump(EXAMPLE) == dump(demo(tmp_path / "demo.sqlite"))


def test_example_story(tmp_path):
    p = Profile.open(demo(tmp_path / "demo.sqlite"), progress=False)
    r = get_tool("gpu_gaps")(p)
    g0, g1 = r.devices
    assert g0.dominant_cause == "cpu_work"
    assert g1.dominant_cause == "cuda_api"
    assert "cudaMemcpy" in g1.largest_gaps[0].cuda_api_calls
    o = get_tool("overview")(p)
    assert [d.kernel_busy_ns for d in o.devices] == [6 * 40 * 400_000, 6 * 20 * 400_000]
    assert o.devices[1].kernel_busy_ns == 48 * MS
