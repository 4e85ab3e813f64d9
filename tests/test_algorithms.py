"""Every registered algorithm: simulate == numpy reference and the symbolic contract check
(verify) for any N, root, chunk count, element count (divisible by N or not), dtype and op.
What sets a family apart is tested in its own file (test_ring.py, test_tree.py, ...)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import DTYPES, assert_results_equal, make_inputs
from ringtree.algorithms import BuildSpec, get_algorithm, registered
from ringtree.collectives import Collective, ReduceOp, reference
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
       seed=st.integers(0, 10**6))  # fmt: skip
def test_simulate_matches_reference(algorithm, data, dtype, op, seed):
    n, spec, count = data.draw(calls(algorithm))
    col = algorithm.collective
    s = algorithm.build(n, spec)
    assert (s.collective, s.algorithm, s.n_ranks) == (col, algorithm.name, n)
    verify(s)
    xs = make_inputs(col, n, count, dtype, op, seed)
    assert_results_equal(simulate(s, xs, op), reference(col, xs, op, spec.root), dtype)


def test_the_registry_holds_every_collective_and_its_facts():
    assert {a.collective for a in ALGORITHMS} == set(Collective)
    assert get_algorithm("All-Reduce", " Ring ") is get_algorithm(Collective.ALL_REDUCE, "ring")
    for a in ALGORITHMS:
        assert a.source, a.key
        assert a.pipelined == (a.default_chunks is not None)
        if a.pipelined:  # the default chunk count is the one the builder uses
            assert a.build(8, BuildSpec()).n_chunks % a.default_chunks == 0
