"""Hierarchical all-reduce: inter-node bytes are 1/g of a ring among the nodes; two links priced
separately. (simulate == numpy reference for every nodes x ranks-per-node shape:
test_algorithms.py.)"""

from dataclasses import replace

import pytest

from ringtree.algorithms import build
from ringtree.algorithms.hierarchical import hierarchical_all_reduce
from ringtree.algorithms.ring import ring_all_reduce
from ringtree.collectives import Collective
from ringtree.cost.terms import INTER, INTRA, Link, schedule_terms, total_time_s
from ringtree.errors import RingtreeError


def inter_bytes_sent(s, rank: int, count: int, item: int) -> int:
    g = s.ranks_per_node
    sizes = s.chunk_sizes(count)
    return sum(
        sizes[t.chunk] * item
        for _, t in s.transfers()
        if t.src == rank and t.src // g != t.dst // g
    )


def test_four_nodes_of_eight_send_one_eighth_between_nodes():
    nodes, g = 4, 8
    n, count, item = nodes * g, 2**20, 4
    size = count * item
    h = hierarchical_all_reduce(n, g)
    assert h.ranks_per_node == g
    # per rank, between nodes: 1/8 of what a ring all-reduce among the 4 nodes sends
    among_nodes = ring_all_reduce(nodes).bytes_sent(0, count, item)
    assert among_nodes == 2 * (nodes - 1) * size // nodes
    for r in range(n):
        assert inter_bytes_sent(h, r, count, item) * g == among_nodes
    # on the critical path, the inter-node link carries 2(M-1)/M S/g instead of the flat
    # 32-rank ring's 2(N-1)/N S (every ring step crosses a node boundary somewhere)
    flat = replace(ring_all_reduce(n), ranks_per_node=g)
    flat_inter = schedule_terms(flat, count, item)[INTER].wire_bytes
    hier = schedule_terms(h, count, item)
    assert flat_inter == 2 * (n - 1) * size / n
    assert hier[INTER].wire_bytes == 2 * (nodes - 1) * size / nodes / g
    assert hier[INTER].wire_bytes <= flat_inter / g
    assert hier[INTRA].steps == 2 * (g - 1) and hier[INTER].steps == 2 * (nodes - 1)


def test_two_links_priced_separately():
    nodes, g, count, item = 4, 8, 250_000_000, 4  # 1 GB
    h = schedule_terms(hierarchical_all_reduce(nodes * g, g), count, item)
    nvlink = Link("nvlink4", 900e9, alpha_s=2e-6)
    ib = Link("ib-hdr", 25e9, alpha_s=5e-6)
    t = total_time_s(h, {INTRA: nvlink, INTER: ib})
    assert t == pytest.approx(h[INTRA].time_s(nvlink) + h[INTER].time_s(ib))
    flat = replace(ring_all_reduce(nodes * g), ranks_per_node=g)
    t_flat = total_time_s(schedule_terms(flat, count, item), {INTRA: nvlink, INTER: ib})
    assert t < t_flat / 5


@pytest.mark.parametrize(("n", "g"), [(6, 4), (6, None), (8, 0), (7, 2)])
def test_bad_shapes(n, g):
    with pytest.raises(RingtreeError, match="ranks per node"):
        build(Collective.ALL_REDUCE, "hierarchical", n, ranks_per_node=g)
