"""Group placement against a plain enumeration of every rank's coordinates."""

from hypothesis import given
from hypothesis import strategies as st

from ringtree.plan.groups import DP, PP, TP, GroupShape, group_shape
from ringtree.plan.strategy import Layout


def brute_groups(layout: Layout, kind: str) -> list[list[int]]:
    """Megatron order, written out: rank = t + tp * (d + dp * p)."""
    groups: dict[tuple, list[int]] = {}
    for p in range(layout.pp):
        for d in range(layout.dp):
            for t in range(layout.tp):
                rank = t + layout.tp * (d + layout.dp * p)
                key = {TP: (d, p), DP: (t, p), PP: (t, d)}[kind]
                groups.setdefault(key, []).append(rank)
    return list(groups.values())


def brute_shape(layout: Layout, kind: str, gpn: int) -> GroupShape:
    worst = None
    for ranks in brute_groups(layout, kind):
        per_node: dict[int, list[int]] = {}
        for r in ranks:
            per_node.setdefault(r // gpn, []).append(r)
        counts = {len(v) for v in per_node.values()}
        nodes = len(per_node)
        even = len(counts) == 1
        shape = GroupShape(len(ranks), nodes, counts.pop() if even else None)
        if worst is None or (shape.nodes, shape.per_node is None) > (
            worst.nodes,
            worst.per_node is None,
        ):
            worst = shape
    assert worst is not None
    return worst


def test_examples_on_nodes_of_8():
    lay = Layout("ddp", dp=8, tp=8, pp=1)
    assert group_shape(lay, TP, 8) == GroupShape(8, 1, 8)  # TP inside a node
    assert group_shape(lay, DP, 8) == GroupShape(8, 8, 1)  # DP across: one rank per node
    lay = Layout("ddp", dp=64, tp=1, pp=1)
    assert group_shape(lay, DP, 8) == GroupShape(64, 8, 8)  # hierarchical shape
    lay = Layout("ddp", dp=16, tp=1, pp=4)
    assert group_shape(lay, PP, 8) == GroupShape(4, 4, 1)
    assert group_shape(Layout("ddp", 2, 3, 1), TP, 4) == GroupShape(3, 2, None)  # straddles


@given(
    tp=st.sampled_from([1, 2, 3, 4, 8]),
    dp=st.integers(1, 6),
    pp=st.integers(1, 4),
    gpn=st.sampled_from([1, 2, 4, 6, 8]),
    kind=st.sampled_from([TP, DP, PP]),
)
def test_matches_enumeration(tp, dp, pp, gpn, kind):
    layout = Layout("ddp", dp, tp, pp)
    got = group_shape(layout, kind, gpn)
    want = brute_shape(layout, kind, gpn)
    assert (got.size, got.nodes) == (want.size, want.nodes)
    if got.per_node is not None:  # said even: every node holds per_node contiguous members
        assert want.per_node == got.per_node
