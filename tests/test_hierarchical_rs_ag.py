"""Hierarchical reduce-scatter and all-gather: 1/g of the flat ring's bytes cross nodes.
(simulate == numpy reference for every shape: test_algorithms.py.)"""

import pytest

from ringtree.algorithms import build
from ringtree.algorithms.ring import ring_all_gather, ring_reduce_scatter
from ringtree.collectives import Collective
from ringtree.cost.terms import INTER, INTRA, schedule_terms
from ringtree.errors import RingtreeError

TWO = [Collective.REDUCE_SCATTER, Collective.ALL_GATHER]


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
