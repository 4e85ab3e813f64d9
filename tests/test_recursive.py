"""Recursive doubling/halving and Rabenseifner: simulate == numpy reference for any N (folding
the extra ranks when N is not a power of two); steps and bytes for powers of two."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DTYPES, assert_results_equal, make_inputs
from ringtree.algorithms import build
from ringtree.algorithms.recursive import (
    rabenseifner_all_reduce,
    recursive_all_gather,
    recursive_all_reduce,
    recursive_reduce_scatter,
)
from ringtree.collectives import Collective, ReduceOp, reference
from ringtree.errors import RingtreeError
from ringtree.simulate import complete_chunks, simulate, track, verify

CASES = [
    (Collective.ALL_GATHER, "recursive"),
    (Collective.REDUCE_SCATTER, "recursive"),
    (Collective.ALL_REDUCE, "recursive"),
    (Collective.ALL_REDUCE, "rabenseifner"),
]


@given(
    case=st.sampled_from(CASES),
    n=st.integers(1, 33),
    count=st.integers(0, 5000),
    dtype=st.sampled_from(DTYPES),
    op=st.sampled_from(list(ReduceOp)),
    seed=st.integers(0, 10**6),
)
def test_recursive_matches_reference(case, n, count, dtype, op, seed):
    collective, algorithm = case
    s = build(collective, algorithm, n)
    verify(s)
    xs = make_inputs(collective, n, count, dtype, op, seed)
    assert_results_equal(simulate(s, xs, op), reference(collective, xs, op), dtype)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 32])
def test_power_of_two_steps_and_bytes(n):
    k = int(math.log2(n))
    count, item = 64 * n, 4
    size = count * item
    for s in (recursive_all_gather(n), recursive_reduce_scatter(n)):
        assert s.n_steps == k
        for r in range(n):
            assert s.bytes_sent(r, count, item) == (n - 1) * size // n
            assert s.bytes_received(r, count, item) == (n - 1) * size // n
    # halving: S/2, S/4, ..., S/N per step; doubling: the reverse
    assert recursive_reduce_scatter(n).step_bytes(count, item) == [
        size >> j for j in range(1, k + 1)
    ]
    assert recursive_all_gather(n).step_bytes(count, item) == [size >> j for j in range(k, 0, -1)]
    rab = rabenseifner_all_reduce(n)
    assert rab.n_steps == 2 * k
    assert all(rab.bytes_sent(r, count, item) == 2 * (n - 1) * size // n for r in range(n))
    rd = recursive_all_reduce(n)
    assert rd.n_steps == k
    assert all(rd.bytes_sent(r, count, item) == k * size for r in range(n))


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 33])
def test_other_n_fold_and_unfold(n):
    p = 1 << (n.bit_length() - 1)
    k = int(math.log2(p))
    extras = n - p
    rab = rabenseifner_all_reduce(n)
    assert rab.n_steps == 2 * k + 2
    assert [rab.steps[0].phase, rab.steps[-1].phase] == ["fold", "unfold"]
    assert {(t.src, t.dst) for t in rab.steps[0].transfers} == {
        (2 * i, 2 * i + 1) for i in range(extras)
    }
    # the folded ranks sit out the power-of-two part
    middle = {r for st_ in rab.steps[1:-1] for t in st_.transfers for r in (t.src, t.dst)}
    assert middle.isdisjoint(range(0, 2 * extras, 2))
    for s in (recursive_all_gather(n), recursive_reduce_scatter(n), recursive_all_reduce(n)):
        assert s.n_steps == k + 2


@pytest.mark.parametrize("n", [2, 5, 8, 12])
def test_reduce_scatter_delivers_block_r_to_rank_r(n):
    s = recursive_reduce_scatter(n)
    done = complete_chunks(s, track(s)[-1])
    for r in range(n):
        assert r in done[r]


@pytest.mark.parametrize("name", ["recursive", "rabenseifner"])
def test_without_folding_only_powers_of_two(name):
    assert build(Collective.ALL_REDUCE, name, 8, fold=False).n_ranks == 8
    with pytest.raises(RingtreeError, match="power-of-two"):
        build(Collective.ALL_REDUCE, name, 6, fold=False)
