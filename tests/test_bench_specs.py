"""The per-collective specs: bus bandwidth factors and algbw against hand-computed figures,
element counts, inputs and expected results against the numpy reference, and the
launcher-side reduction of every rank's times into a row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ringtree.collectives import Collective, ReduceOp, reference
from ringtree.measure.specs import SPECS, algbw_Bps, spec_for
from ringtree.measure.sweep import Sweep
from ringtree.measure.sweep_run import gather, spread
from ringtree.procs.native import make_input
from ringtree.procs.native_calls import NATIVE_CALLS

# 1 MB in 1 ms is 1 GB/s of algbw; busbw by hand: all-reduce 2(N-1)/N; RS, AG, all-to-all,
# gather, scatter (N-1)/N (nccl-tests' alltoall.cc, gather.cc, scatter.cc); the barrier none;
# else 1
HAND = {
    (Collective.ALL_REDUCE, 4): 1.5,
    (Collective.ALL_REDUCE, 2): 1.0,
    (Collective.ALL_REDUCE, 8): 1.75,
    (Collective.REDUCE_SCATTER, 4): 0.75,
    (Collective.REDUCE_SCATTER, 5): 0.8,
    (Collective.ALL_GATHER, 4): 0.75,
    (Collective.ALL_GATHER, 2): 0.5,
    (Collective.BROADCAST, 4): 1.0,
    (Collective.BROADCAST, 7): 1.0,
    (Collective.REDUCE, 4): 1.0,
    (Collective.REDUCE, 3): 1.0,
    (Collective.ALL_TO_ALL, 8): 0.875,
    (Collective.ALL_TO_ALL, 2): 0.5,
    (Collective.GATHER, 4): 0.75,
    (Collective.SCATTER, 5): 0.8,
    (Collective.BARRIER, 4): 0.0,
}


@pytest.mark.parametrize(("col", "n"), list(HAND))
def test_busbw_and_algbw_match_hand_computed_figures(col, n):
    assert algbw_Bps(10**6, 1e-3) == pytest.approx(1e9)
    assert spec_for(col).busbw_Bps(10**6, 1e-3, n) == pytest.approx(HAND[(col, n)] * 1e9)
    # 64 MiB in 50 ms: algbw 1.342 GB/s
    assert spec_for(col).busbw_Bps(64 << 20, 0.05, n) == pytest.approx(
        (64 << 20) / 0.05 * HAND[(col, n)]
    )


def test_every_collective_has_a_spec():
    assert set(SPECS) == set(Collective) == set(NATIVE_CALLS)


@pytest.mark.parametrize("col", list(Collective))
def test_counts_round_to_equal_blocks_only_where_the_engines_need_them(col):
    count = spec_for(col).count(4003 * 4, 4, 4)
    blocks = (Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.ALL_TO_ALL,
              Collective.GATHER, Collective.SCATTER)
    if col is Collective.BARRIER:  # it moves nothing
        assert count == 0 and spec_for(col).count(10, 4, 1) == 0
        return
    assert count == (4000 if col in blocks else 4003)
    assert spec_for(col).count(10, 4, 1) == 2  # whole elements only


# every reduce op for the reducing collectives; the others take no op (SUM stands in)
COL_OPS = [(c, op) for c in Collective for op in (ReduceOp if c.reduces else [ReduceOp.SUM])]


@pytest.mark.parametrize(("col", "op"), COL_OPS)
@pytest.mark.parametrize(("n", "root"), [(3, 2), (4, 1), (1, 0)])
def test_expected_results_equal_the_numpy_reference(col, op, n, root):
    spec = spec_for(col)
    count = spec.count(4 * 26, 4, n)
    dtype = "int32" if op.bitwise else "float32"
    inputs = [spec.input_values(count, dtype, op, r, n) for r in range(n)]
    want = reference(col, inputs, op, root)
    for r in range(n):
        got = spec.expected(count, dtype, op, root, r, n)
        if want[r] is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want[r])


def test_inputs_are_small_integers_so_any_summation_order_is_exact():
    x = make_input(Collective.ALL_REDUCE, 1000, "float32", ReduceOp.SUM, 3, 4)
    assert x.min() >= -5 and x.max() <= 5 and np.array_equal(x, np.round(x))
    p = make_input(Collective.ALL_REDUCE, 1000, "float32", ReduceOp.PRODUCT, 3, 4)
    assert set(np.unique(p)) <= {1.0, 2.0}


def test_gather_takes_the_slowest_rank_per_call_then_the_median():
    sweep = Sweep(n_ranks=2, sizes=(4000,), algorithms=("ring",))
    todo = [{"collective": "all-reduce", "size_bytes": 4000, "algorithms": [["ring", None]]}]
    rank0 = [{"count": 1000, "algorithms": [{"times_s": [1e-3, 5e-3, 2e-3], "wrong": 0}]}]
    rank1 = [{"count": 1000, "algorithms": [{"times_s": [3e-3, 1e-3, 2e-3], "wrong": 2}]}]
    (row,) = gather(sweep, todo, [rank0, rank1])
    # per call max: 3, 5, 2 ms -> median 3 ms
    assert row.times_us == pytest.approx((3000, 5000, 2000))
    assert row.time_us == pytest.approx(3000)
    assert row.algbw_GBps == pytest.approx(4000 / 3e-3 / 1e9)
    assert row.busbw_GBps == pytest.approx(row.algbw_GBps * 1.0)  # 2(N-1)/N = 1 at N=2
    assert row.wrong == 2 and row.iters == 3 and row.redop == "sum" and row.root is None
    json.dumps(row.record())


def test_spread_is_the_10_90_percentile_range_over_the_median():
    assert spread([1.0] * 10) == 0.0
    assert spread([1.0]) == 0.0
    assert spread(list(range(1, 12))) == pytest.approx((10 - 2) / 6)


def test_pipelined_algorithms_take_the_tuned_chunk_count_or_the_fixed_one():
    from ringtree.measure.sweep import Sweep, cells

    sizes = (4096, 16 << 20)
    tuned_cells = cells(Sweep(n_ranks=4, sizes=sizes))
    fixed_cells = cells(Sweep(n_ranks=4, sizes=sizes, chunks=1))
    tuned = {(c["size_bytes"], a): k for c in tuned_cells for a, k in c["algorithms"]}
    fixed = {(c["size_bytes"], a): k for c in fixed_cells for a, k in c["algorithms"]}
    assert tuned.keys() == fixed.keys()
    assert tuned[(16 << 20, "tree")] > 1  # the loopback preset pipelines a 16 MiB tree
    for (size, alg), k in fixed.items():
        assert k == (1 if alg in ("tree", "dbtree") else None), (size, alg, k)
