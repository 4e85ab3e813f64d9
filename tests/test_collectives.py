import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.collectives import Collective, Part, ReduceOp, block_bounds, reference
from ringtree.errors import RingtreeError


def test_reference_per_rank_example():
    xs = [np.array([1, 2]), np.array([10, 20])]
    assert [r.tolist() for r in reference(Collective.ALL_REDUCE, xs)] == [[11, 22], [11, 22]]
    assert [r.tolist() for r in reference(Collective.REDUCE_SCATTER, xs)] == [[11], [22]]
    got = reference(Collective.REDUCE, xs, ReduceOp.MAX, root=1)
    assert got[0] is None and got[1].tolist() == [10, 20]
    assert [r.tolist() for r in reference(Collective.BROADCAST, xs, root=1)] == [[10, 20]] * 2
    ag = reference(Collective.ALL_GATHER, [np.array([1]), np.array([2, 3])])
    assert [r.tolist() for r in ag] == [[1, 2, 3]] * 2


def test_avg_divides_at_the_end():
    xs = [np.array([1.0, 3.0]), np.array([2.0, 6.0])]
    assert reference(Collective.ALL_REDUCE, xs, ReduceOp.AVG)[0].tolist() == [1.5, 4.5]
    ints = [np.array([1, 3]), np.array([2, 6])]
    assert reference(Collective.ALL_REDUCE, ints, ReduceOp.AVG)[0].tolist() == [1, 4]


@pytest.mark.parametrize(("op", "dtype"), [(op, dt) for op in ReduceOp
                                           for dt in (np.float32, np.int64, np.int8)
                                           if op.takes(dt)])
def test_identity_is_neutral(op, dtype):
    x = np.array([-3, 0, 7], dtype=dtype)
    acc = np.full(3, op.identity(dtype), dtype=dtype)
    op.apply(acc, x)
    np.testing.assert_array_equal(acc, x)


def test_block_bounds_matches_array_split():
    for count in range(0, 30):
        for n in range(1, 9):
            sizes = [len(a) for a in np.array_split(np.arange(count), n)]
            b = block_bounds(count, n)
            assert [b[i + 1] - b[i] for i in range(n)] == sizes


@pytest.mark.parametrize("name", ["all_reduce", "ALL-REDUCE", "allreduce", "all-reduce"])
def test_collective_names(name):
    assert Collective.parse(name) is Collective.ALL_REDUCE


def test_unknown_names_are_one_line_errors():
    with pytest.raises(RingtreeError, match="unknown collective 'gather-all'"):
        Collective.parse("gather-all")
    with pytest.raises(RingtreeError, match="unknown reduce op"):
        ReduceOp.parse("xor")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(Collective)), st.integers(1, 9), st.integers(0, 200),
       st.integers(0, 8))
def test_the_layout_sizes_every_rank_s_buffers_as_the_reference_shapes_them(col, n, elements,
                                                                           root):
    """Inputs made from the layout's spans, run through the numpy reference: each rank's
    result has the layout's output size (its input's, in place), the layout's count is what
    the inputs and any rank's buffers say, and only the layout's holders get a result."""
    lay, root = col.layout, root % n
    count = lay.count(elements, n)
    if lay.equal_blocks:
        assert count % n == 0 and elements - count < n
    inputs = [np.arange(*lay.span(count, n, r)) for r in range(n)]
    assert lay.count_of_inputs([x.size for x in inputs], root) == count
    results = reference(col, inputs, root=root)
    for r, got in enumerate(results):
        want_in, want_out = lay.input_elems(count, n, r, root), lay.output_elems(count, n, r, root)
        assert want_in is None or inputs[r].size == want_in
        # what the rank passes to a call: none is an empty buffer; in place, the input
        n_in = want_in or 0
        n_out = n_in if lay.output is Part.SAME else want_out or 0
        if col is not Collective.BARRIER:  # its token says nothing of the count
            assert lay.count_of(n_in, n_out, n) == count
        assert (got is not None) == lay.holds_result(r, root)
        if got is not None and col is not Collective.BARRIER:
            assert got.size == n_out


def test_the_layouts_rules_by_hand():
    """The module table's rules, spelled out for N=4, S=10."""
    rs, ag, a2a = (Collective.REDUCE_SCATTER.layout, Collective.ALL_GATHER.layout,
                   Collective.ALL_TO_ALL.layout)
    assert [rs.output_elems(10, 4, r) for r in range(4)] == [3, 3, 2, 2]
    assert [ag.input_elems(10, 4, r) for r in range(4)] == [3, 3, 2, 2]
    assert [a2a.output_elems(10, 4, r) for r in range(4)] == [12, 12, 8, 8]
    assert ag.span(10, 4, 2) == (6, 8) and ag.own_block_in_output
    gather, scatter = Collective.GATHER.layout, Collective.SCATTER.layout
    assert gather.count(10, 4) == scatter.count(10, 4) == 8  # equal blocks, as torch's
    assert [gather.output_elems(8, 4, r, root=1) for r in range(4)] == [None, 8, None, None]
    assert [scatter.input_elems(8, 4, r, root=1) for r in range(4)] == [None, 8, None, None]
    assert Collective.BARRIER.layout.count(10, 4) == 0
    separate = {c for c in Collective if c.layout.separate}
    assert separate == {Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL}
    assert all(c.layout.output_elems(10, 4, 0) is None
               for c in (Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE))
