"""Local gloo worlds: results come back in rank order; a rank that raises, dies or hangs is a
one-line RankFailed naming it, and no process outlives the call."""

import os
import time
from pathlib import Path

import pytest

from ringtree.lab.world import RankFailed, run_world

HERE = str(Path(__file__).parent)


@pytest.fixture(autouse=True)
def importable_by_ranks(monkeypatch):
    """The ranks are fresh interpreters: let them import this module's functions."""
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _children() -> list[int]:
    """Processes whose parent is this one (Linux /proc)."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def sum_of_ranks(rank, n, scale):
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    return rank, n, scale * t.item()


def fails_on_rank_1(rank, n):
    import torch
    import torch.distributed as dist

    if rank == 1:
        raise ValueError("boom on rank 1")
    dist.all_reduce(torch.zeros(1))  # rank 0 waits for a peer that is gone


def dies_on_rank_1(rank, n):
    import torch
    import torch.distributed as dist

    if rank == 1:
        os._exit(9)
    dist.all_reduce(torch.zeros(1))


def sleeps(rank, n):
    time.sleep(60)


def test_results_in_rank_order():
    assert run_world(sum_of_ranks, 2, (10,), timeout_s=60) == [(0, 2, 10.0), (1, 2, 10.0)]
    assert _children() == []


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (fails_on_rank_1, r"^rank 1 failed: ValueError: boom on rank 1( \(then: rank 0\))?$"),
        (dies_on_rank_1, r"^rank 1 died \(exit status 9"),
    ],
)
def test_a_failing_rank_is_named_and_nothing_is_left(fn, message):
    start = time.monotonic()
    with pytest.raises(RankFailed, match=message) as e:
        run_world(fn, 2, timeout_s=60)
    assert e.value.rank == 1
    assert "\n" not in str(e.value)
    assert time.monotonic() - start < 30  # noticed at once, not at the 60 s timeout
    assert _children() == []


def test_a_hanging_world_times_out():
    with pytest.raises(RankFailed, match="did not finish within 2 s"):
        run_world(sleeps, 2, timeout_s=2)
    assert _children() == []
