"""Shared test helpers: random per-rank inputs and result comparison against the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import settings

from ringtree.collectives import Collective, ReduceOp

settings.register_profile("ci", deadline=None, max_examples=60)
settings.load_profile("ci")

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def make_inputs(
    collective: Collective, n: int, count: int, dtype: type, op: ReduceOp, seed: int
) -> list[np.ndarray]:
    """Per-rank inputs of the collective's layout of ``count`` elements; small values so
    PRODUCT stays finite and sums exact in floats."""
    rng = np.random.default_rng(seed)
    lo, hi = (1, 3) if op is ReduceOp.PRODUCT else (-50, 50)
    spans = [collective.layout.span(count, n, r) for r in range(n)]  # a block, or everything
    return [rng.integers(lo, hi, stop - start).astype(dtype) for start, stop in spans]


def assert_results_equal(got: list, want: list, dtype: type) -> None:
    """Exact for integers; for floats a tolerance (schedules reduce in other orders)."""
    assert len(got) == len(want)
    for r, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is None:
            continue
        assert g is not None, f"rank {r}: no result"
        assert g.shape == w.shape, f"rank {r}: shape {g.shape} != {w.shape}"
        if np.issubdtype(dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=f"rank {r}")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
