"""The executor's trace events against the schedule: per rank and (step, chunk, peer), the
send, recv and reduce events carry exactly the transfers the schedule gives that rank, their
bytes add up to the chunk's size and to the transport's counts, and a slice is reduced only
after it arrived. Pipelined and grouped (NCCL-style) transports, every algorithm."""

from collections import defaultdict

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from conftest import make_inputs
from ringtree.algorithms import algorithms_for, get_algorithm
from ringtree.collectives import Collective, ReduceOp
from ringtree.events import Recorder
from ringtree.procs.native import call_buffers
from ringtree.runtime import LocalTransport, api, calls, run_ranks
from ringtree.schedule import Action

PAIRS = [(c, a) for c in Collective for a in algorithms_for(c)]


class Grouped(LocalTransport):
    grouped = True


def rpn_for(col, alg, n):
    return get_algorithm(col, alg).ranks_per_node_for(n)


def traced_call(col, alg, n, count, slice_bytes, grouped):
    """Run the collective on n threads with a Recorder per rank; (events, counters) per rank."""
    inputs = make_inputs(col, n, count, np.float32, ReduceOp.SUM, 0)

    def body(t):
        g = Grouped(t.world, t.rank) if grouped else t
        x, out = call_buffers(col, inputs[t.rank].copy(), count, n, t.rank, n - 1)
        rec = Recorder(rank=t.rank)
        api.collective(col, x, out, "sum", n - 1, g, algorithm=alg, timeout=10, check=False,
                       ranks_per_node=rpn_for(col, alg, n), slice_bytes=slice_bytes,
                       recorder=rec)
        return rec.events, g.bytes_sent, g.bytes_received

    return run_ranks(n, body)


@given(
    st.sampled_from(PAIRS), st.integers(1, 5), st.integers(0, 200), st.sampled_from([8, 64, 4096]),
    st.booleans(),
)
def test_events_are_the_schedules_transfers(pair, n, count, slice_bytes, grouped):
    col, alg = pair
    count = col.layout.count(count, n)
    got = traced_call(col, alg, n, count, slice_bytes, grouped)
    s = calls.schedule(col, alg, n, n - 1, None, rpn_for(col, alg, n))
    sizes = s.chunk_sizes(count)
    for rank, (events, sent, received) in enumerate(got):
        want: dict[tuple, int] = defaultdict(int)
        for k, step in enumerate(s.steps, start=1):
            for t in step.transfers:
                b = int(sizes[t.chunk]) * 4
                if t.src == rank and b:
                    want[("send", k, t.chunk, t.dst)] += b
                if t.dst == rank and b:
                    want[("recv", k, t.chunk, t.src)] += b
                    if t.action is Action.REDUCE:
                        want[("reduce", k, t.chunk, t.src)] += b
        have: dict[tuple, int] = defaultdict(int)
        for e in events:
            assert e.rank == rank and e.t_start_s <= e.t_end_s
            assert e.phase == s.steps[e.step - 1].phase
            have[(e.kind, e.step, e.chunk, e.peer)] += e.bytes
        assert {k: v for k, v in have.items() if v} == dict(want)
        assert sum(e.bytes for e in events if e.kind == "send") == sent
        assert sum(e.bytes for e in events if e.kind == "recv") == received


def test_a_slice_is_reduced_after_it_arrived():
    """Ring all-reduce of 1000 floats on 3 ranks in 64-byte messages: every reduce event
    starts after a recv event of the same step and chunk ended."""
    for events, _, _ in traced_call(Collective.ALL_REDUCE, "ring", 3, 1000, 64, False):
        recvs = defaultdict(list)
        for e in events:
            if e.kind == "recv":
                recvs[(e.step, e.chunk)].append(e.t_end_s)
        reduces = [e for e in events if e.kind == "reduce"]
        assert len(reduces) == sum(len(v) for v in recvs.values()) // 2  # RS half of the steps
        for e in reduces:
            assert min(recvs[(e.step, e.chunk)]) <= e.t_start_s


def test_no_recorder_no_events_and_same_result():
    """Recording changes nothing in the result."""
    x = np.arange(10, dtype=np.float32)

    def body(t):
        a, b = x.copy(), x.copy()
        rec = Recorder(rank=t.rank)
        for buf, r in ((a, None), (b, rec)):
            api.all_reduce(buf, "sum", t, algorithm="ring", timeout=10, check=False,
                           recorder=r)
        return a, b, len(rec.events)

    for a, b, n_events in run_ranks(2, body):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, 2 * x)
        assert n_events == 2 + 2 + 1  # 2 sends, 2 recvs, 1 reduce at N=2
