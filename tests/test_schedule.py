import pytest

from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, ScheduleError, Step, Transfer


def sched(*transfers, n=3, chunks=3):
    return Schedule(Collective.ALL_REDUCE, "test", n, chunks, (Step(tuple(transfers)),))


def test_rank_out_of_range():
    with pytest.raises(ScheduleError, match="destination rank 5 does not exist"):
        sched(Transfer(0, 5, 0))


def test_chunk_out_of_range():
    with pytest.raises(ScheduleError, match="chunk 3 out of range"):
        sched(Transfer(0, 1, 3))


def test_two_writes_to_one_chunk_in_one_step():
    with pytest.raises(ScheduleError, match="two writes to chunk 1 of rank 2"):
        sched(Transfer(0, 2, 1, Action.REDUCE), Transfer(1, 2, 1, Action.REDUCE))


def test_self_send_and_bad_root():
    with pytest.raises(ScheduleError, match="sends to itself"):
        sched(Transfer(1, 1, 0))
    with pytest.raises(ScheduleError, match="root 4"):
        Schedule(Collective.BROADCAST, "t", 3, 1, (), root=4)


def test_chunk_bounds_nest_inside_blocks():
    s = Schedule(Collective.REDUCE_SCATTER, "t", 3, 6, (), n_blocks=3)
    # 10 elements: blocks 4,3,3; each split in two: 2,2 | 2,1 | 2,1
    assert s.chunk_sizes(10) == [2, 2, 2, 1, 2, 1]
    assert list(s.block_chunks(1)) == [2, 3]


def test_counting_uneven_chunks():
    s = Schedule(
        Collective.ALL_REDUCE, "t", 2, 2,
        (Step((Transfer(0, 1, 0), Transfer(1, 0, 1))), Step((Transfer(0, 1, 1),))),
    )
    # 5 elements of 4 bytes: chunks 3 and 2
    assert s.bytes_sent(0, 5, 4) == (3 + 2) * 4
    assert s.bytes_received(0, 5, 4) == 2 * 4
    assert s.step_bytes(5, 4) == [12, 8]


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_bytes_per_rank_and_chunk_bounds_agree_with_the_per_rank_counts(n):
    from ringtree.algorithms import BuildSpec, build, registered
    from ringtree.collectives import Splits, block_bounds

    for alg in registered():
        if not alg.accepts(n, BuildSpec()):  # checked in test_closed_forms
            continue
        s = build(alg.collective, alg.name, n)
        per_block = s.n_chunks // s.n_blocks
        for count in (0, 7, 1001):
            want = [s.bytes_sent(r, count, 2) for r in range(n)]
            assert s.bytes_sent_per_rank(count, 2) == want, (alg.key, count)
            # chunk bounds: each block cut np.array_split-wise into per_block chunks
            bounds, start = [0], 0
            for size in s.block_sizes(count):
                bounds += [start + o for o in block_bounds(size, per_block)[1:]]
                start += size
            assert s.chunk_bounds(count) == bounds, (alg.key, count)
    a2a = build(Collective.ALL_TO_ALL, "linear", 3)
    splits = Splits.seen_by(0, (1, 0, 4), (1, 2, 3))
    assert a2a.chunk_bounds(splits)[:4] == [0, 1, 1, 5]
