import re
import sqlite3

import pytest

from dashcam.agent import targets as targets_mod
from dashcam.agent.models import Targets
from dashcam.agent.targets import mask_quotes, parse_targets, profile_names, quoted_spans
from dashcam.profile import Profile
from dashcam.testing.builder import ExportBuilder

from .conftest import MS, SHARED_SQLITE

# (question, the Targets fields that differ from the defaults). No profile.
NO_PROFILE = [
    # GPU ids
    ("why is GPU 5 idle?", {"gpus": [5]}),
    ("why is gpu5 so slow between 2s and 3.5s", {"gpus": [5], "start_ms": 2000.0, "end_ms": 3500.0}),
    ("GPU 5 between 2 s and 3.5 s", {"gpus": [5], "start_ms": 2000.0, "end_ms": 3500.0}),
    ("what is GPU #5 doing?", {"gpus": [5]}),
    ("is device 5 busy?", {"gpus": [5]}),
    ("kernels on cuda:5", {"gpus": [5]}),
    ("what did GPUs 0 and 1 do in iteration 3?", {"gpus": [0, 1], "step": 3}),
    ("why are GPUs 0 and 3 idle?", {"gpus": [0, 3]}),
    ("GPU 0, 1 and 2 look slow", {"gpus": [0, 1, 2]}),
    ("GPU 0-3 are idle", {"gpus": [0, 1, 2, 3]}),
    ("gpus 4 to 6", {"gpus": [4, 5, 6]}),
    ("copies from GPU 0 to GPU 3", {"gpus": [0, 3]}),  # two GPUs, not a range
    ("GPU 2 vs 7", {"gpus": [2, 7]}),
    ("GPU3 and GPU1", {"gpus": [1, 3]}),
    ("GPU id 6 please", {"gpus": [6]}),
    ("top 5 kernels on gpu 1", {"gpus": [1]}),  # 5 is a count, not a GPU
    ("step 10 on device 2", {"gpus": [2], "step": 10}),
    ("why is rank 3 slow?", {"ranks": [3]}),  # a rank, not a GPU id
    ("ranks 0 and 2 vs rank 5", {"ranks": [0, 2, 5]}),
    # ordinals without a profile: the n-th is id n-1; "last" says nothing; number words are ids
    ("why is my second gpu idle?", {"gpus": [1]}),
    ("the 1st GPU vs the 3rd device", {"gpus": [0, 2]}),
    ("the last gpu", {}),
    ("why is GPU one idle", {"gpus": [1]}),
    ("gpu number two and device zero", {"gpus": [0, 2]}),
    ("is gpu one of the problems?", {}),  # "one of": not an id
    ("and the other one?", {"other_gpu": True}),
    ("what about the other GPU", {"other_gpu": True}),
    ("the third step", {"step": 2}),  # an ordinal step is a step (counted from one: index 2), not a GPU
    # CUDA API functions
    ("how long do cudaFree calls take?", {"api": "cudaFree"}),
    ("time in cuLaunchKernelEx", {"api": "cuLaunchKernelEx"}),
    ("how long do the cudaMemcpy* calls take", {"api": "cudaMemcpy*"}),
    ("would CUDA graphs help?", {}),
    ("we use CUDA 12 on 8 GPUs", {}),  # a version and a count
    ("GPU 1 and 2 s later", {"gpus": [1]}),  # "2 s" is a time, not a GPU
    ("GPU 5.5", {}),
    # sentence punctuation after a number does not hide it; a decimal part still does
    ("Compare GPU 0 and GPU 1.", {"gpus": [0, 1]}),  # eval case compare-equal-gpus
    ("why is GPU 1.", {"gpus": [1]}),
    ("why is GPU 1?", {"gpus": [1]}),
    ("GPU 1!", {"gpus": [1]}),
    ("GPU 1, then GPU 2; then GPU 4: idle", {"gpus": [1, 2, 4]}),
    ("(see GPU 3)", {"gpus": [3]}),
    ("GPU 2 vs. GPU 7.", {"gpus": [2, 7]}),
    ("devices 0, 1.", {"gpus": [0, 1]}),
    ("is cuda:1.", {"gpus": [1]}),
    ("GPU 1..3", {"gpus": [1, 2, 3]}),
    ("GPU 0.5?", {}),
    ("GPU 1.5 s", {}),
    ("GPU 1.x", {}),
    ("GPU 1 between 1.5 s and 2 s.", {"gpus": [1], "start_ms": 1500.0, "end_ms": 2000.0}),
    ("after 1.5 s.", {"start_ms": 1500.0}),
    # all / which
    ("compare the GPUs", {"all_gpus": True}),
    ("idle time on all GPUs", {"all_gpus": True}),
    ("what does every GPU do", {"all_gpus": True}),
    ("busy % of each of the 8 GPUs", {"all_gpus": True}),
    ("kernel time across GPUs", {"all_gpus": True}),
    ("kernel time per GPU", {"all_gpus": True}),
    ("are the GPUs balanced?", {"all_gpus": True}),
    ("why are GPUs slow", {}),  # plural but no comparison
    ("differences between GPUs 0 and 1", {"gpus": [0, 1]}),  # named ids are not "all"
    ("which GPU is the straggler?", {"which_gpu": True}),
    ("what device has the most idle time", {"which_gpu": True}),
    ("which of the GPUs waits most", {"which_gpu": True}),
    # windows
    ("after 1.2s", {"start_ms": 1200.0}),
    ("after 1200 ms", {"start_ms": 1200.0}),
    ("before 500 ms", {"end_ms": 500.0}),
    ("from 1s to 2s", {"start_ms": 1000.0, "end_ms": 2000.0}),
    ("between 100ms and 250ms", {"start_ms": 100.0, "end_ms": 250.0}),
    ("between 2 and 3.5 seconds", {"start_ms": 2000.0, "end_ms": 3500.0}),
    ("between 2s and 1500 ms", {"start_ms": 1500.0, "end_ms": 2000.0}),  # reversed pair swapped
    ("during 2-3.5 s", {"start_ms": 2000.0, "end_ms": 3500.0}),
    ("in the first 2 seconds", {"start_ms": 0.0, "end_ms": 2000.0}),
    ("after the first 2 s", {"start_ms": 2000.0}),
    ("since 250 us", {"start_ms": 0.25}),
    ("after 750 µs and before 3 msec", {"start_ms": 0.75, "end_ms": 3.0}),
    ("until 2500000 ns", {"end_ms": 2.5}),
    ("in the first 2 minutes", {"start_ms": 0.0, "end_ms": 120000.0}),
    ("what happened at 1.5 s?", {}),
    ("gaps longer than 5 ms", {}),
    ("idle for 2 s", {}),
    ("in the last 2 s", {}),  # needs the profile's length
    ("between 2 and 3", {}),  # no unit: not a time
    # steps
    ("iteration 3", {"step": 3}),
    ("the 3rd iteration", {"step": 2}),  # ordinals count from one, the steps' index from 0
    ("why is the first iteration slow?", {"step": 0}),
    ("iter 7 on GPU #4", {"gpus": [4], "step": 7}),
    ("step #12 after 1 s", {"step": 12, "start_ms": 1000.0}),
    ("the third step", {"step": 2}),
    ("the last 10 steps", {}),
    ("steps 3 and 4", {}),
    ("what happened in iteration 3.", {"step": 3}),
    ("what's going on in train_step 3?", {"step": 3}),  # the step label's own word
    ("step 4.5", {}),
    # names
    ("kernel `ampere_sgemm_128x64_tn`", {"kernel": "ampere_sgemm_128x64_tn"}),
    ("why is kernel sgemm_128x64 slow on GPU 2?", {"gpus": [2], "kernel": "sgemm_128x64"}),
    ("how long does the kernel named gemm take?", {"kernel": "gemm"}),
    ("kernel volta_hgemm", {"kernel": "volta_hgemm"}),
    ("which kernel dominates?", {}),
    ("kernels launched from the forward pass", {}),
    ("time in range 'forward'", {"nvtx": "forward"}),
    ("the \"backward\" region on GPU 1", {"gpus": [1], "nvtx": "backward"}),
    ("range forward", {"nvtx": "forward"}),
    ("kernels in range train_step", {"nvtx": "train_step"}),
    ("what's wrong with 'forward'?", {}),  # no profile, no context word: not named
    ("kernel 'gemm_5' in range 'fwd' on GPU 3", {"gpus": [3], "kernel": "gemm_5", "nvtx": "fwd"}),
    ("what does the ‘step 5’ NVTX range cost?", {"nvtx": "step 5"}),
]


@pytest.mark.parametrize("question,expected", NO_PROFILE, ids=[q for q, _ in NO_PROFILE])
def test_targets_without_profile(question, expected):
    assert parse_targets(question) == Targets(**expected)


def _planted() -> ExportBuilder:
    """Window [0, 10 ms]; kernels: vectorized_elementwise_kernel (demangled at::native::...),
    ampere_sgemm_128x64_tn, ncclDevKernel_AllReduce_Sum_f32_RING_LL, saxpy; NVTX label groups:
    train_step <n>, forward, backward, aten::mm, data loading."""
    b = ExportBuilder()
    b.gpu(0)
    b.gpu(1)
    b.kernel(0, 0, 1 * MS, name="void at::native::vectorized_elementwise_kernel<4, float>(int)")
    b.kernel(0, 2 * MS, 3 * MS, name="ampere_sgemm_128x64_tn")
    b.kernel(1, 2 * MS, 10 * MS, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    b.kernel(1, 4 * MS, 5 * MS, name="saxpy")
    b.nvtx("train_step 1", 0, 5 * MS)
    b.nvtx("train_step 2", 5 * MS, 10 * MS)
    b.nvtx("forward", 0, 2 * MS)
    b.nvtx("backward", 2 * MS, 4 * MS, registered=True)
    b.nvtx("aten::mm, seq = 12, op_id = 990346", 0, 1 * MS)
    b.nvtx("data loading", 0, 1 * MS)
    return b


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("targets")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHCAM_CACHE_DIR", str(d / "cache"))
        yield Profile.open(_planted().write(d / "planted.sqlite"), progress=False)


WITH_PROFILE = [
    ("why is the gemm kernel slow?", {"kernel": "gemm"}),
    ("the saxpy kernel on GPU 1", {"gpus": [1], "kernel": "saxpy"}),
    ("is SAXPY slow?", {"kernel": "SAXPY"}),  # a word equal to a kernel short name
    ("is ncclDevKernel_AllReduce slow", {"kernel": "ncclDevKernel_AllReduce"}),
    ("what about 'sgemm'?", {"kernel": "sgemm"}),
    ("time of 'at::native::vectorized'", {"kernel": "at::native::vectorized"}),  # in the demangled name only
    ("kernel 'forward'", {"nvtx": "forward"}),  # no kernel contains it; a label group does
    ("how long does forward take?", {"nvtx": "forward"}),
    ("the backward region", {"nvtx": "backward"}),
    ("the 'forward' range between 1 ms and 2 ms", {"nvtx": "forward", "start_ms": 1.0, "end_ms": 2.0}),
    ("time in 'train_step 7'", {"nvtx": "train_step <n>"}),  # matched by its group form
    ("what about 'data loading'?", {"nvtx": "data loading"}),
    ("aten::mm time on GPU 0", {"gpus": [0], "nvtx": "aten::mm"}),
    ("kernels launched in train_step on GPU 0", {"gpus": [0], "nvtx": "train_step"}),
    ("the saxpy kernel in the forward range", {"kernel": "saxpy", "nvtx": "forward"}),
    ("kernel foo_bar", {"kernel": "foo_bar"}),  # absent from the profile but clearly a name
    ("the 'nothing_like_it' kernel", {"kernel": "nothing_like_it"}),
    ("the main kernel", {}),  # not a name of this profile
    ("which step is slowest?", {}),
    ("in the last 2 ms", {"start_ms": 8.0}),
    ("in the last 20 ms", {"start_ms": 0.0}),
    ("why is GPU 5 idle?", {"gpus": [5]}),  # existence is the planner's business
    # ordinals in the profile's order of GPUs (0 and 1); past the last: the id it would have
    ("why is my second gpu idle?", {"gpus": [1]}),
    ("the first gpu", {"gpus": [0]}),
    ("the last GPU", {"gpus": [1]}),
    ("my third gpu", {"gpus": [2]}),
    # a list of ordinals before the noun names each
    ("compare first and last gpu", {"gpus": [0, 1]}),
    ("the 1st vs the 2nd gpus", {"gpus": [0, 1]}),
    ("the second and third gpus", {"gpus": [1, 2]}),
]


@pytest.mark.parametrize("question,expected", WITH_PROFILE, ids=[q for q, _ in WITH_PROFILE])
def test_targets_with_planted_profile(planted, question, expected):
    assert parse_targets(question, planted) == Targets(**expected)


def test_profile_names_read_once(planted):
    targets_mod._CACHE.pop(planted, None)
    n = profile_names(planted)
    assert sorted(n.kernels) == ["ampere_sgemm_128x64_tn", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "saxpy",
                                 "vectorized_elementwise_kernel"]
    assert sorted(n.labels) == ["aten::mm", "backward", "data loading", "forward", "train_step <n>"]
    assert n.span_ms == 10.0
    assert profile_names(planted) is n


class _CountingProfile:
    """Stands in for a Profile: counts queries; one kind of name query fails."""

    def __init__(self):
        self.queries = 0
        self.full_window = (0, 5 * MS)

    def rows(self, sql, params=None):
        self.queries += 1
        if "nvtx_groups" in sql:
            raise RuntimeError("no such view")
        if "name_id" in sql and "short" not in sql:
            return [("void my_kernel<int>(int)",)]
        return [("my_kernel",), (None,)]


def test_names_cached_per_profile_and_query_errors_give_no_names():
    p = _CountingProfile()
    assert parse_targets("the my_kernel kernel in range forward", p) == Targets(kernel="my_kernel")
    assert parse_targets("why is my_kernel slow in the last 1 ms", p) == Targets(kernel="my_kernel", start_ms=4.0)
    assert p.queries == 4  # API names, short names, full names, label groups: once
    other = _CountingProfile()
    parse_targets("x", other)
    assert other.queries == 4


def test_quotes_and_apostrophes():
    q = "what's in GPU 0's 'fwd pass' and `k_1` and \"x\""
    assert [s[2] for s in quoted_spans(q)] == ["fwd pass", "k_1", "x"]
    masked = mask_quotes(q)
    assert len(masked) == len(q) and "fwd" not in masked and masked.startswith("what's in GPU 0's ")


def test_numbers_inside_quoted_names_are_not_targets():
    q = "kernel 'gemm on gpu 3 after 2 s, step 4'"
    assert parse_targets(q) == Targets(kernel="gemm on gpu 3 after 2 s, step 4")


def test_huge_gpu_range_keeps_only_its_ends():
    assert parse_targets("GPU 0-5000").gpus == [0, 5000]


@pytest.mark.skipif(not SHARED_SQLITE, reason="no shared profiles")
@pytest.mark.parametrize("path", SHARED_SQLITE, ids=[p.name for p in SHARED_SQLITE])
def test_real_profiles_kernel_names_are_found(path):
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName")]
    except sqlite3.OperationalError:
        names = []
    finally:
        con.close()
    p = Profile.open(path, progress=False)
    # dashcam's short names are the export's, a generic wrapper keeping its functor (measure/names.py):
    # `par_ranged2d_kernel<PdV_kernel>` is the export's `par_ranged2d_kernel`
    assert sorted({re.sub(r"<[^<>]*>$", "", n) for n in profile_names(p).kernels}) == sorted(set(names))
    for name in names[:3]:
        assert parse_targets(f"why is `{name}` slow on GPU 0?", p) == Targets(gpus=[0], kernel=name)
        assert parse_targets(f"why is the {name} kernel slow?", p).kernel == name


def test_two_ranges_named_leave_the_filter_off(tmp_path):
    """'forward vs backward' names two ranges: no single NVTX filter, so both get ranked."""
    from dashcam.profile import Profile
    from dashcam.testing.scenarios import SCENARIOS

    p = Profile.open(SCENARIOS["nvtx_steps"](tmp_path / "n.sqlite"), progress=False)
    assert parse_targets("How does forward compare with backward?", p).nvtx is None
    assert parse_targets("how long does backward take?", p).nvtx == "backward"


def test_my_kernel_is_a_name_even_when_the_profile_lacks_it(tmp_path):
    """'my saxpy kernel' names the user's kernel (the answer then says no kernel has it); 'my slowest kernel',
    'my attention kernel' describe one."""
    from dashcam.agent.planner import answer_offline
    from dashcam.profile import Profile
    from dashcam.testing.scenarios import demo

    p = Profile.open(demo(tmp_path / "demo.sqlite"), progress=False)
    assert parse_targets("why is my saxpy kernel slow?", p).kernel == "saxpy"
    assert parse_targets("why is the saxpy kernel slow?", p).kernel is None
    assert parse_targets("why is my slowest kernel slow?", p).kernel is None
    assert parse_targets("how does my attention kernel do?", p).kernel is None
    a = answer_offline("why is my saxpy kernel slow?", p).answer
    assert a.startswith("No kernel name contains `saxpy`; 360 kernels ran in the 117.59 ms window.")


def test_one_x_pass_is_the_range_x(tmp_path):
    """'how long does one forward pass take?': the `forward` ranges (nvtx_steps has them), as 'one forward' is."""
    from dashcam.testing.scenarios import nvtx_steps

    p = Profile.open(nvtx_steps(tmp_path / "steps.sqlite"), progress=False)
    assert parse_targets("how long does one forward pass take?", p).nvtx == "forward"
    assert parse_targets("how long does one forward take?", p).nvtx == "forward"
