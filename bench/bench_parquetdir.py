"""Would exporting a report to `parquetdir` and building the cache from it be faster than from SQLite? (not in CI)

For one report, REPEATS times each:
- `nsys export --type sqlite` vs `nsys export --type parquetdir` (wall time);
- dashcam's cache build from the SQLite export (``build_cache``), split into its table step (reading the
  tables in chunks and writing them as Parquet) and its derive step (``_derive``: the same for either input);
- what the table step would cost from the parquetdir: DuckDB copying the same tables and columns from its
  Parquet files into Parquet files (a lower bound: it does none of the per-chunk work of the build).
Medians and ratios at the end; docs/performance.md has the numbers and the choice.

Run: python bench/bench_parquetdir.py REPORT.nsys-rep [--nsys PATH] [--repeats 3]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def export(nsys: str, kind: str, rep: Path, out: Path) -> float:
    t = time.perf_counter()
    subprocess.run([nsys, "export", "--type", kind, "--force-overwrite", "true", "--output", str(out), str(rep)],
                   check=True, capture_output=True)
    return time.perf_counter() - t


def cache_from_sqlite(sqlite: Path, work: Path) -> tuple[float, float]:
    """(whole build, its derive step) in seconds."""
    import dashcam.profile.cache.build as build
    from dashcam.profile.source import check_sqlite_file

    derive: list[float] = []
    original = build._derive

    def timed(*a, **k):
        t0 = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            derive.append(time.perf_counter() - t0)

    build._derive = timed
    try:
        out = work / "cache"
        out.mkdir()
        t = time.perf_counter()
        build.build_cache(sqlite, check_sqlite_file(sqlite), out, progress=False)
        total = time.perf_counter() - t
    finally:
        build._derive = original
        shutil.rmtree(work / "cache", ignore_errors=True)
    return total, derive[-1]


def copy_from_parquetdir(pdir: Path, work: Path) -> float:
    import duckdb

    from dashcam.profile.schema import BIG_TABLES, SMALL_TABLES

    out = work / "pq"
    out.mkdir()
    con = duckdb.connect(":memory:", config={"threads": 2})
    t = time.perf_counter()
    for src, (short, wanted) in {**BIG_TABLES, **SMALL_TABLES}.items():
        f = pdir / f"{src}.parquet"
        if not f.exists():
            continue
        have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{f}')").fetchall()}
        cols = ", ".join(f'"{c}"' for c in wanted if c in have)
        con.execute(f"COPY (SELECT {cols} FROM read_parquet('{f}')) TO '{out}/{short}.parquet' (FORMAT parquet)")
    took = time.perf_counter() - t
    con.close()
    shutil.rmtree(out)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("report", type=Path)
    ap.add_argument("--nsys", default=shutil.which("nsys") or "nsys")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    runs: dict[str, list[float]] = {k: [] for k in ("export_sqlite", "export_parquetdir", "build", "derive",
                                                    "table_step", "parquet_copy")}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(a.repeats):
            runs["export_sqlite"].append(export(a.nsys, "sqlite", a.report, work / "x.sqlite"))
            runs["export_parquetdir"].append(export(a.nsys, "parquetdir", a.report, work / "x_pq"))
            total, derive = cache_from_sqlite(work / "x.sqlite", work)
            runs["build"].append(total)
            runs["derive"].append(derive)
            runs["table_step"].append(total - derive)
            runs["parquet_copy"].append(copy_from_parquetdir(work / "x_pq", work))
            print(i + 1, {k: round(v[-1], 3) for k, v in runs.items()}, flush=True)
    m = {k: statistics.median(v) for k, v in runs.items()}
    sqlite_path = m["export_sqlite"] + m["build"]
    parquet_path = m["export_parquetdir"] + m["derive"] + m["parquet_copy"]
    print("medians:", {k: round(v, 3) for k, v in m.items()})
    print(f"export parquetdir/sqlite {m['export_parquetdir'] / m['export_sqlite']:.2f}; table step "
          f"{m['parquet_copy'] / m['table_step']:.2f}; cache {(m['derive'] + m['parquet_copy']) / m['build']:.2f}; "
          f"whole path {parquet_path:.2f} s vs {sqlite_path:.2f} s = {parquet_path / sqlite_path:.2f}")


if __name__ == "__main__":
    main()
