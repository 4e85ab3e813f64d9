"""The executor on in-process ranks (threads): every algorithm against the numpy reference,
transport byte counts against the schedule's, and fault handling without processes."""

from __future__ import annotations

import threading
import time
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import DTYPES, assert_results_equal, make_inputs
from ringtree.algorithms import algorithms_for, get_algorithm
from ringtree.collectives import Collective, ReduceOp, reference
from ringtree.procs.native import call_buffers, make_input
from ringtree.runtime import LocalTransport, PeerError, api, calls, program, run_local, run_ranks
from ringtree.simulate import simulate

PAIRS = [(c, a) for c in Collective for a in algorithms_for(c)]


def rpn_for(col: Collective, alg: str, n: int) -> int | None:
    return get_algorithm(col, alg).ranks_per_node_for(n)


@given(
    st.sampled_from(PAIRS), st.integers(1, 6), st.integers(0, 300), st.sampled_from(list(ReduceOp)),
    st.sampled_from(DTYPES), st.integers(0, 5), st.sampled_from([8, 64, 1 << 20]),
    st.integers(0, 2**31),
)
def test_every_algorithm_matches_the_reference(pair, n, count, op, dtype, root, sb, seed):
    assume(op.takes(dtype))  # the bitwise ops reduce integers only
    col, alg = pair
    root %= n
    count = col.layout.count(count, n)
    inputs = make_inputs(col, n, count, dtype, op, seed)
    got = run_local(col, inputs, algorithm=alg, op=op, root=root, slice_bytes=sb,
                    ranks_per_node=rpn_for(col, alg, n))
    assert_results_equal(got, reference(col, inputs, op, root), dtype)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(PAIRS), st.integers(2, 6), st.integers(0, 300), st.sampled_from(list(ReduceOp)),
    st.sampled_from([8, 64, 1 << 20]), st.integers(0, 5), st.integers(0, 2**31),
)
def test_landing_in_place_over_sent_data_matches_the_reference(pair, n, count, op, sb, root,
                                                               seed):
    """Every landing over data sent in an earlier step goes in place (after that send), as
    messages of 1 MiB and up do, on the rendezvous transport: same results, no deadlock."""
    col, alg = pair
    count = col.layout.count(count, n)
    dtype = "int64" if op.bitwise else "float64"
    inputs = make_inputs(col, n, count, dtype, op, seed)
    with patch.object(program, "IN_PLACE_MIN_BYTES", 0):
        got = run_local(col, inputs, algorithm=alg, op=op, root=root % n, slice_bytes=sb,
                        ranks_per_node=rpn_for(col, alg, n))
    assert_results_equal(got, reference(col, inputs, op, root % n), dtype)


@pytest.mark.parametrize(("col", "alg"), PAIRS)
def test_executor_agrees_with_the_simulator_bit_for_bit(col, alg):
    """Same schedule, same reduction order: the real executor and the reference interpreter
    give identical floats (they differ from numpy's rank-order sum by rounding only)."""
    n, count = 5, col.layout.count(997, 5)
    rng = np.random.default_rng(1)
    inputs = make_inputs(col, n, count, np.float32, ReduceOp.SUM, 7)
    inputs = [x + rng.random(x.size).astype(np.float32) for x in inputs]
    from ringtree.algorithms import build

    s = build(col, alg, n, root=2, ranks_per_node=rpn_for(col, alg, n))
    want = simulate(s, inputs, ReduceOp.SUM)
    got = run_local(col, inputs, algorithm=alg, root=2, slice_bytes=256,
                    ranks_per_node=rpn_for(col, alg, n), n_chunks=s.n_chunks)
    for g, w in zip(got, want, strict=True):
        if w is not None and g is not None:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(("col", "alg"), PAIRS)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_transport_bytes_equal_schedule_bytes(col, alg, n):
    count, itemsize = col.layout.count(1001, n), 8

    def body(t: LocalTransport) -> tuple[int, int]:
        x = make_input(col, count, "float64", ReduceOp.SUM, t.rank, n)
        x, out = call_buffers(col, x, count, n, t.rank, n - 1)
        api.collective(col, x, out, "sum", n - 1, t, algorithm=alg, timeout=10, check=False,
                       ranks_per_node=rpn_for(col, alg, n), slice_bytes=512)
        return t.bytes_sent, t.bytes_received

    counted = run_ranks(n, body)
    s = calls.schedule(col, alg, n, n - 1, None, rpn_for(col, alg, n))
    for r, (sent, received) in enumerate(counted):
        assert sent == s.bytes_sent(r, count, itemsize)
        assert received == s.bytes_received(r, count, itemsize)


def test_a_silent_peer_times_out_on_every_waiting_rank_naming_peer_and_step():
    """Rank 3 never calls (it stays silent until the others are done): every other rank
    raises within the timeout, naming whom it waited for and at which step -- no hang."""
    errors: dict[int, tuple[str, float]] = {}
    done = threading.Event()

    def body(t: LocalTransport) -> None:
        if t.rank == 3:
            done.wait(30)  # silent, alive, until the others have their error
            return
        start = time.monotonic()
        try:
            api.all_reduce(np.ones(40), algorithm="ring", group=t, timeout=0.4, check=False)
        except PeerError as e:
            errors[t.rank] = (str(e), time.monotonic() - start)
        if len(errors) == 3:
            done.set()

    run_ranks(4, body)
    assert sorted(errors) == [0, 1, 2]
    assert "rank 3" in errors[0][0]  # rank 0 receives from rank 3 in the ring
    for msg, took in errors.values():
        assert "step" in msg and "0.4 s timeout" in msg
        assert took < 0.4 + 1.0  # the timeout, plus the time to notice on a busy machine


def test_a_dying_peer_fails_the_others_fast():
    """Rank 1 raises mid-collective; the others fail within a fraction of the timeout."""

    class Boom(Exception):
        pass

    def body(t: LocalTransport) -> None:
        if t.rank == 1:
            orig = t._send

            def send(buf, peer, tag):  # noqa: ANN001, ANN202
                if t.messages_sent > 1:
                    raise Boom("rank 1 crashed")
                return orig(buf, peer, tag)

            t._send = send  # type: ignore[method-assign]
        api.all_reduce(np.ones(4000), algorithm="ring", group=t, timeout=30)

    start = time.monotonic()
    with pytest.raises((Boom, PeerError)):
        run_ranks(4, body)
    assert time.monotonic() - start < 5


def test_run_local_leaves_inputs_untouched():
    inputs = [np.arange(10.0) + r for r in range(3)]
    copies = [x.copy() for x in inputs]
    run_local("reduce-scatter", inputs, algorithm="ring")
    for x, c in zip(inputs, copies, strict=True):
        np.testing.assert_array_equal(x, c)


@pytest.mark.parametrize(("col", "alg"), PAIRS)
def test_grouped_engines_run_step_by_step_with_the_same_results(col, alg):
    """NCCL-style transports post a step's operations together (no pipelining); the
    results and byte counts are the same as the pipelined executor's."""

    class Grouped(LocalTransport):
        grouped = True

    n, count = 4, col.layout.count(333, 4)
    inputs = make_inputs(col, n, count, np.int64, ReduceOp.SUM, 3)
    rpn = rpn_for(col, alg, n)

    def body(t: LocalTransport) -> tuple[np.ndarray | None, int]:
        g = Grouped(t.world, t.rank)
        x, out = call_buffers(col, inputs[t.rank].copy(), count, n, t.rank, 1)
        api.collective(col, x, out, "sum", 1, g, algorithm=alg, timeout=10, check=False,
                       ranks_per_node=rpn, slice_bytes=64)
        return (x if out is None else out), g.bytes_sent

    got = run_ranks(n, body)
    want = reference(col, inputs, ReduceOp.SUM, 1)
    s = calls.schedule(col, alg, n, 1, None, rpn)
    for r, ((g, sent), w) in enumerate(zip(got, want, strict=True)):
        assert sent == s.bytes_sent(r, count, 8)
        if w is not None:
            np.testing.assert_array_equal(g if col is not Collective.BARRIER else g[:0], w)
