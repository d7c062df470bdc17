"""The fleet's default workers (src/dashcam/fleet/workers.py): in this process for few or small reports, one
worker per core when the estimated digest time reaches DASK_MIN_WORK_S; the planted sizes sit on either side."""
from __future__ import annotations

from dashcam.fleet.workers import DASK_MIN_WORK_S, estimated_digest_s, estimated_work_s, workers_for

MB = 1_000_000


def count_at_threshold(size: int) -> int:
    """The fewest reports of ``size`` bytes whose estimated digest time reaches the threshold."""
    n = 1
    while estimated_work_s([size] * n) < DASK_MIN_WORK_S:
        n += 1
    return n


def test_a_real_job_of_small_reports_runs_in_process():
    assert workers_for([4 * MB] * 3, cores=2) == 1
    assert workers_for([4 * MB] * 9, cores=2) == 1  # the 3-9-rank jobs of 4 MB reports
    assert workers_for([57_344, 2_686_976, 2_011_136], cores=16) == 1


def test_the_16_rank_bench_takes_one_worker_per_core():
    assert workers_for([120_700_000] * 16, cores=2) == 2
    assert workers_for([120_700_000] * 16, cores=8) == 8
    assert workers_for([120_700_000] * 16, cores=64) == 16  # at most one per report


def test_the_threshold_on_either_side():
    for size in (4 * MB, 50 * MB, 120 * MB):
        n = count_at_threshold(size)
        assert workers_for([size] * (n - 1), cores=4) == 1
        assert workers_for([size] * n, cores=4) == min(4, n)
    assert [count_at_threshold(s) for s in (4 * MB, 50 * MB, 120 * MB)] == [44, 20, 12]  # workers.py's docstring


def test_one_report_or_one_core_runs_in_process():
    assert workers_for([10_000 * MB], cores=8) == 1
    assert workers_for([120 * MB] * 64, cores=1) == 1
    assert workers_for([], cores=8) == 1


def test_the_estimate_grows_with_the_size_and_adds_up():
    assert estimated_digest_s(0) < estimated_digest_s(4 * MB) < estimated_digest_s(120 * MB)
    assert abs(estimated_work_s([4 * MB, 120 * MB]) - estimated_digest_s(4 * MB) - estimated_digest_s(120 * MB)) < 1e-9
