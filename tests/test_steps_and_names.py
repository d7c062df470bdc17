"""Steps found where they are (NVTX layers, library internals, GPU work, steady kernel loops) and kernel names
that keep a wrapper template's instantiations apart. Figures: src/dashcam/testing/steps_programs.py."""
from __future__ import annotations

import pytest

from dashcam.measure.names import kernel_short_name, short_kernel_name, wrapper_argument
from dashcam.profile import Profile
from dashcam.testing.scenarios import build as build_scenario
from dashcam.tools import get_tool

from .conftest import MS, US, shared_or_skip


@pytest.fixture
def planted(tmp_path):
    return lambda name: Profile.open(build_scenario(name, tmp_path / f"{name}.sqlite"), progress=False)


def run(profile, tool, **params):
    return get_tool(tool)(profile, params)


def test_layers_inside_each_inference_are_not_steps(planted):
    r = run(planted("trt_layers"), "iterations")
    assert (r.method, r.label, r.step_count, r.median_ns) == ("nvtx", "inference", 5, 2 * MS)
    assert [s.start_ns for s in r.steps] == [1 * MS + k * 10 * MS for k in range(5)]


def test_layers_of_one_inference_are_no_steps(planted):
    r = run(planted("trt_one_inference"), "iterations")
    assert (r.method, r.step_count) == ("none", 0)


def test_library_internal_nvtx_never_defines_steps(planted):
    r = run(planted("library_nvtx"), "iterations")
    assert (r.method, r.step_count) == ("none", 0)
    # chosen by name, the ranges are still there to use
    forced = run(planted("library_nvtx"), "iterations", label="isResharding")
    assert (forced.method, forced.step_count, forced.median_ns) == ("nvtx", 4, 1 * MS)


def test_one_generic_name_with_different_kernels_is_no_repetition(planted):
    r = run(planted("for_each_calls"), "iterations")
    assert (r.method, r.step_count) == ("none", 0)


def test_a_steady_loop_of_one_kernel_is_one_step_a_launch(planted):
    r = run(planted("steady_loop"), "iterations", limit=100)
    assert (r.method, r.kernel_name, r.launches_per_step, r.step_count) == ("kernel_pattern", "stencil_kernel", 1, 50)
    assert (r.period_ns, r.median_ns) == (200 * US, 200 * US)
    assert {s.duration_ns for s in r.steps} == {200 * US}
    assert (r.steps[0].start_ns, r.steps[-1].start_ns) == (1 * MS, 1 * MS + 49 * 200 * US)


def test_wrapper_instantiations_keep_their_names(planted):
    r = run(planted("wrapper_templates"), "top_kernels")
    assert [(k.name, k.pct) for k in r.kernels] == [("par_ranged2d_kernel<PdV_kernel>", 50.0),
                                                     ("par_ranged2d_kernel<accelerate_kernel>", 30.0),
                                                     ("par_ranged2d_kernel<viscosity_kernel>", 20.0)]
    top = r.families[0]
    assert (top.family, top.pct, top.top_kernel, top.top_kernel_pct, top.instantiations) == (
        "par_ranged2d_kernel<PdV_kernel>", 50.0, "par_ranged2d_kernel<PdV_kernel>", 50.0, 1)


@pytest.mark.parametrize("full, short", [
    ("void clover::par_ranged2d_kernel<PdV_kernel(bool, int)::[lambda(int, int) (instance 2)]>(clover::Range2d, T1)",
     "par_ranged2d_kernel<PdV_kernel>"),
    ("void clover::par_reduce_kernel<calc_dt_kernel(int &)::[lambda(int, int, double &) (instance 1)], double>(int)",
     "par_reduce_kernel<calc_dt_kernel>"),
    ("void for_each_kernel<__nv_dl_wrapper_t<__nv_dl_tag<void (*)(int), &saxpy_step, 1u>, float *>>(int, T1)",
     "for_each_kernel<saxpy_step>"),
    ("void Kokkos::Impl::cuda_parallel_launch_local_memory<Kokkos::Impl::ParallelFor<MyFunctor, "
     "Kokkos::RangePolicy<>, Kokkos::Cuda>>()", "cuda_parallel_launch_local_memory<MyFunctor>"),
    ("void thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__parallel_for::ParallelForAgent<"
     "thrust::cuda_cub::__fill::functor<thrust::device_ptr<float>, float>, unsigned long>, unsigned long>(T2, T3)",
     "_kernel_agent<__fill::functor>"),
    ("void cub::CUB_200200_800_NS::detail::for_each::static_kernel<cub::CUB_200200_800_NS::detail::for_each::"
     "policy_hub_t::policy_350_t, long, thrust::cuda_cub::__fill::functor<thrust::device_ptr<int>, int>>(T2, T3)",
     "static_kernel<__fill::functor>"),
    ("void for_each_kernel<const AddOne &>(int)", "for_each_kernel<AddOne>"),
    # not wrappers, or no argument that tells instantiations apart: the base name as before
    ("void at::native::elementwise_kernel<128, 4, lambda>(int, T3)", "elementwise_kernel"),
    ("void foo::kernel<int, 3>(int)", "kernel"),
    ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
])
def test_short_names_keep_the_wrapper_argument(full, short):
    assert short_kernel_name(full) == short
    assert kernel_short_name(short.split("<")[0], full) == short
    assert (wrapper_argument(full) is None) == ("<" not in short)


def test_the_real_cloverleaf_wrapper_shows_its_physics_kernels(opened):
    """The shared CloverLeaf capture: par_ranged2d_kernel was 90.7 % of kernel time under one name; its largest
    instantiation, PdV_kernel's second lambda, is 6.591 % (19.405 ms of 294.405 ms), calc_dt_kernel's 6.335 %."""
    r = run(opened(shared_or_skip("hpcgroup__pipit__perlmutter-cloverleaf-cuda.sqlite")), "top_kernels")
    assert [(k.name, k.pct) for k in r.kernels[:2]] == [("par_ranged2d_kernel<PdV_kernel>", 6.591),
                                                         ("par_reduce_kernel<calc_dt_kernel>", 6.335)]
    assert all(not f.family.startswith("par_ranged2d_kernel") or "<" in f.family for f in r.families)


def test_rows_of_one_short_name_show_what_tells_them_apart():
    """top_kernels' table: rows sharing a short name get the part of the full name that differs (names.
    kernel_label): the whole name when it fits in 80 characters, else its tail when the part from 20 characters
    before the first that differs fits: the last 80 - len("k") - 2 = 77 characters."""
    from types import SimpleNamespace

    from dashcam.tools.top_kernels import kernel_labels

    short = [SimpleNamespace(name="k", full_name=f"void k<{c}>(int)") for c in "AB"]
    assert [t.plain for t in kernel_labels(short)] == ["k\nvoid k<A>(int)", "k\nvoid k<B>(int)"]
    pad = "x" * 80
    long = [SimpleNamespace(name="k", full_name=f"void k<{pad}{c}>(int)") for c in "AB"]
    assert [t.plain for t in kernel_labels(long)] == [f"k\n…{r.full_name[-77:]}" for r in long]


def test_a_step_asked_as_slower_that_is_not_says_so(planted):
    """demo: six train_step ranges of 20 ms each: step 3 is no slower than a typical step."""
    from dashcam.agent.planner import answer_offline

    a = answer_offline("why is train_step 3 slower?", planted("demo"))
    assert ("Step 3 (the fourth of 6, from NVTX ranges `train_step <n>`) took 20 ms; the median step takes 20 ms, and "
            "GPU 1 was kernel-busy 40.0 % of it. So step 3 is no slower than a typical step.") in a.answer
    assert a.grounded, a.ungrounded_numbers
