"""Recursive doubling/halving and Rabenseifner: steps and bytes for powers of two; folding the
extra ranks for other N. (simulate == numpy reference for every algorithm, any N:
test_algorithms.py.)"""

import math

import pytest

from ringtree.algorithms import build
from ringtree.algorithms.recursive import (
    rabenseifner_all_reduce,
    recursive_all_gather,
    recursive_all_reduce,
    recursive_reduce_scatter,
)
from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.simulate import complete_chunks, track

CASES = [
    (Collective.ALL_GATHER, "recursive"),
    (Collective.REDUCE_SCATTER, "recursive"),
    (Collective.ALL_REDUCE, "recursive"),
    (Collective.ALL_REDUCE, "rabenseifner"),
]


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
