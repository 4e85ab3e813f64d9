"""Every registered algorithm: simulate == numpy reference and the symbolic contract check
(verify) for any N, root, chunk count, element count (divisible by N or not), dtype and op.
What sets a family apart is tested in its own file (test_ring.py, test_tree.py, ...)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import DTYPES, assert_results_equal, make_inputs
from ringtree.algorithms import BuildSpec, get_algorithm, registered
from ringtree.collectives import Collective, ReduceOp, Splits, reference
from ringtree.simulate import simulate, verify

ALGORITHMS = registered()


@st.composite
def calls(draw, algorithm):
    """(N, spec, count) for ``algorithm``: nodes x ranks per node for one on nodes, else
    N in 1..33; any root; the default chunk count or 1..8; count = k N + r, r < N."""
    if algorithm.needs_nodes:
        per_node = draw(st.integers(1, 6))
        n = draw(st.integers(1, 6)) * per_node
    else:
        per_node, n = None, draw(st.integers(1, 33))
    root = draw(st.integers(0, n - 1))
    chunks = draw(st.one_of(st.none(), st.integers(1, 8))) if algorithm.pipelined else None
    count = draw(st.integers(0, 300)) * n + draw(st.integers(0, n - 1))
    return n, BuildSpec(root=root, n_chunks=chunks, ranks_per_node=per_node), count


@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=lambda a: f"{a.collective.value}-{a.name}")
@settings(max_examples=30)  # per algorithm: more than each had in its family's test (12-30)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), op=st.sampled_from(list(ReduceOp)),
       seed=st.integers(0, 10**6))
def test_simulate_matches_reference(algorithm, data, dtype, op, seed):
    assume(op.takes(dtype))  # the bitwise ops reduce integers only
    n, spec, count = data.draw(calls(algorithm))
    col = algorithm.collective
    s = algorithm.build(n, spec)
    assert (s.collective, s.algorithm, s.n_ranks) == (col, algorithm.name, n)
    verify(s)
    xs = make_inputs(col, n, count, dtype, op, seed)
    assert_results_equal(simulate(s, xs, op), reference(col, xs, op, spec.root), dtype)


ALL_TO_ALL = [a for a in ALGORITHMS if a.collective is Collective.ALL_TO_ALL]


@pytest.mark.parametrize("algorithm", ALL_TO_ALL, ids=lambda a: a.name)
@settings(max_examples=40)
@given(data=st.data(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 10**6))
def test_all_to_all_with_uneven_splits_matches_the_reference(algorithm, data, dtype, seed):
    """Any N x N split sizes (empty blocks, ranks that send or receive nothing): every rank
    ends with its column of blocks, in source order."""
    if algorithm.needs_nodes:
        per_node = data.draw(st.integers(1, 4))
        n = data.draw(st.integers(1, 4)) * per_node
    else:
        per_node, n = None, data.draw(st.integers(1, 12))
    sizes = st.one_of(st.just(0), st.integers(0, 40))
    rows = data.draw(st.lists(st.lists(sizes, min_size=n, max_size=n), min_size=n, max_size=n))
    splits = Splits.of(rows)
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-50, 50, sum(row)).astype(dtype) for row in rows]
    s = algorithm.build(n, BuildSpec(ranks_per_node=per_node))
    verify(s)
    got = simulate(s, inputs, splits=splits)
    assert_results_equal(got, reference(Collective.ALL_TO_ALL, inputs, splits=splits), dtype)
    if algorithm.name == "pairwise":  # every block but its own leaves a rank, once
        for r in range(n):
            assert s.bytes_sent(r, splits, 2) == 2 * (sum(rows[r]) - rows[r][r])
            assert s.bytes_received(r, splits, 2) == 2 * (sum(row[r] for row in rows) - rows[r][r])


def test_the_registry_holds_every_collective_and_its_facts():
    assert {a.collective for a in ALGORITHMS} == set(Collective)
    assert get_algorithm("All-Reduce", " Ring ") is get_algorithm(Collective.ALL_REDUCE, "ring")
    for a in ALGORITHMS:
        assert a.source, a.key
        assert a.pipelined == (a.default_chunks is not None)
        if a.pipelined:  # the default chunk count is the one the builder uses
            assert a.build(8, BuildSpec()).n_chunks % a.default_chunks == 0
