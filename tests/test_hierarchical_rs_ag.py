"""Hierarchical reduce-scatter and all-gather: simulate == numpy reference for every shape;
1/g of the flat ring's bytes cross nodes."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import DTYPES, assert_results_equal, make_inputs
from ringtree.algorithms import build
from ringtree.algorithms.ring import ring_all_gather, ring_reduce_scatter
from ringtree.collectives import Collective, ReduceOp, reference
from ringtree.cost.model import INTER, INTRA, schedule_terms
from ringtree.errors import RingtreeError
from ringtree.simulate import simulate, verify

TWO = [Collective.REDUCE_SCATTER, Collective.ALL_GATHER]


@given(
    collective=st.sampled_from(TWO),
    nodes=st.integers(1, 6),
    per_node=st.integers(1, 6),
    count=st.integers(0, 3000),
    dtype=st.sampled_from(DTYPES),
    op=st.sampled_from(list(ReduceOp)),
    seed=st.integers(0, 10**6),
)
def test_matches_reference(collective, nodes, per_node, count, dtype, op, seed):
    n = nodes * per_node
    s = build(collective, "hierarchical", n, ranks_per_node=per_node)
    verify(s)
    xs = make_inputs(collective, n, count, dtype, op, seed)
    assert_results_equal(simulate(s, xs, op), reference(collective, xs, op), dtype)


@pytest.mark.parametrize("collective", TWO)
def test_four_nodes_of_eight_send_one_eighth_between_nodes(collective):
    nodes, g, count, item = 4, 8, 2**20, 4
    n, size = nodes * g, 2**20 * 4
    s = build(collective, "hierarchical", n, ranks_per_node=g)
    terms = schedule_terms(s, count, item)
    assert terms[INTER].steps == nodes - 1 and terms[INTRA].steps == g - 1
    assert terms[INTER].wire_bytes == (nodes - 1) * size / n  # (M-1)/M * S/g
    assert terms[INTRA].wire_bytes == (g - 1) * size / g
    flat = ring_reduce_scatter(n) if collective is Collective.REDUCE_SCATTER else ring_all_gather(n)
    assert schedule_terms(flat, count, item)["flat"].wire_bytes == (n - 1) * size / n
    for r in range(n):  # every rank sends what the flat ring's ranks send, S - S/N
        assert s.bytes_sent(r, count, item) == flat.bytes_sent(r, count, item)


@pytest.mark.parametrize("collective", TWO)
def test_bad_shape(collective):
    with pytest.raises(RingtreeError, match="ranks per node"):
        build(collective, "hierarchical", 6, ranks_per_node=4)
