"""Shared test helpers: random per-rank inputs and result comparison against the reference."""

from __future__ import annotations

import numpy as np
from hypothesis import settings

from ringtree.collectives import Collective, ReduceOp, block_bounds

settings.register_profile("ci", deadline=None, max_examples=60)
settings.load_profile("ci")

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def make_inputs(
    collective: Collective, n: int, count: int, dtype: type, op: ReduceOp, seed: int
) -> list[np.ndarray]:
    """Per-rank inputs; small values so PRODUCT stays finite and sums exact in floats."""
    rng = np.random.default_rng(seed)
    lo, hi = (1, 3) if op is ReduceOp.PRODUCT else (-50, 50)
    if collective in (Collective.ALL_GATHER, Collective.GATHER):
        b = block_bounds(count, n)
        return [rng.integers(lo, hi, b[r + 1] - b[r]).astype(dtype) for r in range(n)]
    return [rng.integers(lo, hi, count).astype(dtype) for _ in range(n)]


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
