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
    )  # fmt: skip
    # 5 elements of 4 bytes: chunks 3 and 2
    assert s.bytes_sent(0, 5, 4) == (3 + 2) * 4
    assert s.bytes_received(0, 5, 4) == 2 * 4
    assert s.step_bytes(5, 4) == [12, 8]
