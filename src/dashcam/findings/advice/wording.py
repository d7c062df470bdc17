"""The words every remedy shares: the Python and compiler-directed families, the per-model wording pick
(``by_family``) and how each directive model keeps arrays resident."""
from __future__ import annotations

from dashcam.findings import remedies
from dashcam.findings.remedies import PYTHONIC, by_family  # noqa: F401 - the one wording pick, re-exported

# Compiler-directed models: no streams, pinned buffers or cudaMemcpyAsync in their source (their own words below).
DIRECTIVES = ("openacc", "openmp_offload", "stdpar")


# Keeping arrays on the GPU across the loop, in each compiler-directed model's terms (host_copies, transfers).
RESIDENT = {
    "openacc": "keep the arrays on the GPU across the loop with data regions (`!$acc data copyin(...)` / "
               "`#pragma acc data`) and `update` only what changes",
    "openmp_offload": "keep the arrays on the GPU across the loop with data regions (`#pragma omp target data "
                      "map(to: ...)` or `target enter data`) and `target update` only what changes",
    "stdpar": remedies.STDPAR,
}
