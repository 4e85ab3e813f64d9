import numpy as np
import pytest

from ringtree.collectives import Collective, ReduceOp, block_bounds, reference
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
