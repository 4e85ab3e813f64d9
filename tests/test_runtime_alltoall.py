"""All-to-all, gather, scatter and barrier in torch's shape, on in-process ranks: uneven
splits against the numpy reference, bytes at the transport against the schedule's, rows of
multi-dimensional tensors, the list forms, roots, the barrier's promise, and mismatches."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ringtree
from ringtree import MismatchError, RingtreeError
from ringtree.algorithms import build
from ringtree.collectives import Collective, Splits, reference
from ringtree.runtime import LocalTransport, run_local, run_ranks


@st.composite
def split_matrices(draw, max_n=6, max_block=30):
    n = draw(st.integers(1, max_n))
    size = st.one_of(st.just(0), st.integers(0, max_block))
    return Splits.of(draw(st.lists(st.lists(size, min_size=n, max_size=n), min_size=n,
                                   max_size=n)))


@settings(max_examples=40, deadline=None)
@given(split_matrices(), st.sampled_from([8, 64, 1 << 20]), st.integers(0, 2**31))
def test_uneven_splits_match_the_reference_and_the_schedules_bytes(splits, slice_bytes, seed):
    """Any split sizes -- empty blocks, ranks that send or receive nothing -- through the real
    executor; each rank's transport sends and receives exactly the pairwise schedule's bytes
    for the whole matrix."""
    n = splits.n_ranks
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-50, 50, sum(splits.sent(r))).astype(np.int64) for r in range(n)]

    def body(t: LocalTransport) -> tuple[np.ndarray, int, int]:
        r = t.rank
        out = np.empty(sum(splits.received(r)), dtype=np.int64)
        ringtree.all_to_all_single(
            out, inputs[r].copy(), list(splits.received(r)), list(splits.sent(r)), group=t,
            slice_bytes=slice_bytes,
        )
        return out, t.bytes_sent, t.bytes_received

    got = run_ranks(n, body)
    want = reference(Collective.ALL_TO_ALL, inputs, splits=splits)
    s = build(Collective.ALL_TO_ALL, "pairwise", n)
    for r, (out, sent, received) in enumerate(got):
        np.testing.assert_array_equal(out, want[r])
        assert sent == s.bytes_sent(r, splits, 8)
        assert received == s.bytes_received(r, splits, 8)


def test_split_sizes_count_rows_of_dim_0_as_torch_does():
    """Rank r sends r + 1 rows of 3 to every rank; rank d receives s + 1 rows from rank s."""

    def body(t: LocalTransport) -> torch.Tensor:
        n, r = t.size, t.rank
        x = torch.arange(n * (r + 1) * 3, dtype=torch.float32).reshape(-1, 3) + 100 * r
        out = torch.empty(sum(s + 1 for s in range(n)), 3)
        ringtree.all_to_all_single(out, x, [s + 1 for s in range(n)], [r + 1] * n, group=t)
        return out

    outs = run_ranks(3, body)
    for d, out in enumerate(outs):
        parts = []
        for s in range(3):
            x = torch.arange(3 * (s + 1) * 3, dtype=torch.float32).reshape(-1, 3) + 100 * s
            parts.append(x[d * (s + 1) : (d + 1) * (s + 1)])
        assert torch.equal(out, torch.cat(parts))


def test_even_all_to_all_single_on_tensors_transposes_the_blocks():
    def body(t: LocalTransport) -> torch.Tensor:
        x = torch.arange(4) + 4 * t.rank
        out = torch.empty(4, dtype=torch.int64)
        ringtree.all_to_all_single(out, x, group=t)
        return out

    outs = run_ranks(4, body)
    for d, out in enumerate(outs):  # torch's docstring example
        assert out.tolist() == [d, d + 4, d + 8, d + 12]


def test_all_to_all_lists_of_any_sizes():
    """Rank s sends rank d a tensor of s + d + 1 elements."""

    def body(t: LocalTransport) -> list[torch.Tensor]:
        n, s = t.size, t.rank
        ins = [torch.full((s + d + 1,), 10.0 * s + d) for d in range(n)]
        outs = [torch.empty(src + s + 1) for src in range(n)]
        work = ringtree.all_to_all(outs, ins, group=t, async_op=True)
        work.wait()
        return outs

    for d, outs in enumerate(run_ranks(3, body)):
        for s, o in enumerate(outs):
            assert torch.equal(o, torch.full((s + d + 1,), 10.0 * s + d))


@pytest.mark.parametrize("algorithm", ["auto", "pairwise", "bruck", "hierarchical"])
def test_even_blocks_run_every_algorithm(algorithm):
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-9, 9, 40).astype(np.float32) for _ in range(4)]
    got = run_local("all-to-all", inputs, algorithm=algorithm, ranks_per_node=2, slice_bytes=16)
    for g, w in zip(got, reference(Collective.ALL_TO_ALL, inputs), strict=True):
        np.testing.assert_array_equal(g, w)


def test_split_sizes_refuse_an_algorithm_that_forwards_blocks():
    """Bruck forwards blocks on 4 ranks (on 2 it sends them straight, and runs)."""

    def body(t: LocalTransport) -> None:
        n = t.size
        ringtree.all_to_all_single(np.empty(n), np.ones(n), [1] * n, [1] * n, group=t,
                                   algorithm="bruck", check=False)

    with pytest.raises(RingtreeError, match="bruck all-to-all forwards other ranks' blocks"):
        run_ranks(4, body)
    run_ranks(2, body)


def test_split_sizes_that_disagree_are_named_on_every_rank():
    """Rank 1 says it sends rank 2 three elements; rank 2 expects two from it."""

    def body(t: LocalTransport) -> str:
        n, r = 3, t.rank
        sent = [2, 2, 3] if r == 1 else [2, 2, 2]
        x = np.ones(sum(sent), dtype=np.float32)
        try:
            ringtree.all_to_all_single(np.empty(6, dtype=np.float32), x, [2] * n, sent, group=t)
        except MismatchError as e:
            return f"{e.ranks} {e}"
        return "no error"

    for msg in run_ranks(3, body):
        assert msg.startswith("[1, 2] ") and "rank 1 sends rank 2 3 elements" in msg
        assert "rank 2 expects 2" in msg


def test_new_split_sizes_are_checked_on_the_first_call_only_by_default():
    """Split sizes are data: the first call of a group checks them (two rounds), later calls
    with other sizes do not -- on every rank alike, whatever sizes repeat where."""

    def body(t: LocalTransport) -> list[int]:
        ctl, counts = t.control(), []
        for k in range(3):
            sent = [1 + (t.rank + k) % 2, 2]  # repeats on some ranks, not others
            out_sizes = [1 + (s + k) % 2 if t.rank == 0 else 2 for s in range(2)]
            ringtree.all_to_all_single(np.empty(sum(out_sizes)), np.ones(sum(sent)), out_sizes,
                                       sent, group=t)
            counts.append(ctl.messages_sent)
        return counts

    assert run_ranks(2, body) == [[2, 2, 2]] * 2


@pytest.mark.parametrize("algorithm", ["linear", "tree"])
def test_gather_and_scatter_lists_and_roots_as_torch(algorithm):
    def body(t: LocalTransport) -> tuple[list | None, torch.Tensor]:
        n, r = t.size, t.rank
        x = torch.full((2, 2), float(r))
        parts = [torch.empty(2, 2) for _ in range(n)] if r == 2 else None
        ringtree.gather(x, parts, dst=2, group=t, algorithm=algorithm)
        out = torch.empty(3)
        chunks = [torch.full((3,), 7.0 * k) for k in range(n)] if r == 1 else None
        ringtree.scatter(out, chunks, group_src=1, group=t, algorithm=algorithm)
        return parts, out

    for r, (parts, out) in enumerate(run_ranks(4, body)):
        if r == 2:
            assert [p[0, 0].item() for p in parts] == [0.0, 1.0, 2.0, 3.0]
        else:
            assert parts is None
        assert torch.equal(out, torch.full((3,), 7.0 * r))


def test_gather_and_scatter_default_to_rank_0_and_check_their_lists():
    def body(t: LocalTransport) -> np.ndarray:
        r = t.rank
        if r == 1:
            with pytest.raises(RingtreeError, match="gather_list is given on a rank that is not"):
                ringtree.gather(np.ones(2), [np.empty(2)] * 2, group=t)
        else:
            with pytest.raises(RingtreeError, match="gather_list must be given on the dest"):
                ringtree.gather(np.ones(2), None, group=t)
        out = np.empty(2)
        ringtree.scatter(out, [np.zeros(2), np.ones(2)] if r == 0 else None, group=t)
        return out

    outs = run_ranks(2, body)
    np.testing.assert_array_equal(outs[1], np.ones(2))


def test_no_rank_leaves_the_barrier_before_every_rank_has_entered():
    entered: dict[int, float] = {}
    left: dict[int, float] = {}
    lock = threading.Lock()

    def body(t: LocalTransport) -> None:
        if t.rank == 3:
            time.sleep(0.3)
        with lock:
            entered[t.rank] = time.monotonic()
        ringtree.barrier(group=t)
        with lock:
            left[t.rank] = time.monotonic()

    run_ranks(5, body)
    assert min(left.values()) >= max(entered.values())


def test_barrier_moves_no_bytes_in_ceil_log2_n_rounds():
    def body(t: LocalTransport) -> tuple[int, int]:
        ringtree.barrier(group=t, check=False)
        return t.bytes_sent, t.messages_sent

    assert run_ranks(5, body) == [(0, 3)] * 5  # ceil(log2 5) = 3 empty messages each
