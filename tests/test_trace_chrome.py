"""Chrome trace export: predicted traces against the schedule's byte counts and the cost
model's time, measured events laid out on nested tracks."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.algorithms import BuildSpec, build, registered
from ringtree.collectives import Collective
from ringtree.cost.terms import Link, schedule_terms, total_time_s
from ringtree.errors import RingtreeError
from ringtree.events import TraceEvent
from ringtree.schedule import Action, Schedule, Step, Transfer
from ringtree.trace.chrome import schedule_chrome_trace, to_chrome_trace, write_chrome_trace
from ringtree.trace.predicted import predicted_events

LINK = Link("test", bandwidth_Bps=1e9, alpha_s=10e-6, gamma_s_per_byte=1e-10)


#: every algorithm that runs without nodes (the pictures take any of them)
FLAT_ALGORITHMS = [a for a in registered() if not a.needs_nodes]


def slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def thread_names(trace):
    return {
        e["tid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def assert_nested(trace):
    """On every track, slices nest or follow each other (the format's rule)."""
    by_tid = {}
    for e in slices(trace):
        by_tid.setdefault(e["tid"], []).append(
            (round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000))
        )
    for tid, spans in by_tid.items():
        stack = []
        for start, end in sorted(spans, key=lambda x: (x[0], x[0] - x[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"track {tid}: slice overlaps without nesting"
            stack.append(end)


def per_rank_bytes(trace, kind):
    out = {}
    for e in slices(trace):
        if e["cat"] == kind:
            out[e["tid"]] = out.get(e["tid"], 0) + e["args"]["bytes"]
    return out


@given(
    algorithm=st.sampled_from(FLAT_ALGORITHMS),
    n=st.integers(1, 12),
    count=st.integers(0, 3000),
    itemsize=st.sampled_from([1, 2, 4, 8]),
    root=st.integers(0, 11),
    chunks=st.integers(1, 6),
)
def test_predicted_trace_matches_schedule_bytes_and_model_time(
    algorithm, n, count, itemsize, root, chunks
):
    s = algorithm.build(n, BuildSpec(root=root % n, n_chunks=chunks))
    trace = json.loads(json.dumps(schedule_chrome_trace(s, count, itemsize, LINK)))
    xs = slices(trace)
    # one track per rank, each named
    assert thread_names(trace) == {r: f"rank {r}" for r in range(n)}
    assert {e["tid"] for e in xs} <= set(range(n))
    assert {e["pid"] for e in trace["traceEvents"]} == {0}
    # slices' bytes add up to the schedule's counts
    sent, recv = per_rank_bytes(trace, "send"), per_rank_bytes(trace, "recv")
    for r in range(n):
        assert sent.get(r, 0) == s.bytes_sent(r, count, itemsize)
        assert recv.get(r, 0) == s.bytes_received(r, count, itemsize)
    reductions = sum(t.action is Action.REDUCE for _, t in s.transfers())
    assert sum(e["cat"] == "reduce" for e in xs) == reductions
    assert len(xs) == 2 * sum(len(step.transfers) for step in s.steps) + reductions
    # every slice names its transfer; the timeline lasts what the cost model says
    for e in xs:
        assert set(e["args"]) == {"bytes", "chunk", "peer", "step", "phase"}
        assert 1 <= e["args"]["step"] <= s.n_steps
    end_us = max((e["ts"] + e["dur"] for e in xs), default=0.0)
    model_us = total_time_s(schedule_terms(s, count, itemsize), LINK) * 1e6 if s.steps else 0
    assert end_us == pytest.approx(model_us, abs=2e-3)
    assert_nested(trace)


def test_ring_all_reduce_timeline_by_hand():
    # 4 ranks, 1000 fp32 = 4000 B: 1000 B per chunk. A step: 10 us + 1000 B / 1 GB/s = 11 us,
    # plus 1000 B * 0.1 ns/B = 0.1 us of reduction in the 3 reduce-scatter steps.
    s = build("all-reduce", "ring", 4)
    xs = slices(schedule_chrome_trace(s, 1000, 4, LINK))
    assert max(e["ts"] + e["dur"] for e in xs) == pytest.approx(3 * 11.1 + 3 * 11.0)
    rank1 = sorted((e["ts"], e["dur"], e["name"]) for e in xs if e["tid"] == 1)
    assert rank1[:3] == [(0.0, 11.0, "recv c0 ← r0"), (0.0, 11.0, "send c1 → r2"),
                         (11.0, 0.1, "reduce c0")]
    step4 = [e for e in xs if e["args"]["step"] == 4]
    assert {e["ts"] for e in step4} == {33.3}  # times are whole nanoseconds
    assert {e["args"]["phase"] for e in step4} == {"all-gather"}


def test_messages_sharing_a_link_split_it_fairly():
    # rank 0 sends 8 B and 4 B at once on 4 B/s after 1 s of latency: the small message
    # ends when 4 + 4 B have gone (3 s), the big one after all 12 B (4 s).
    s = Schedule(
        Collective.BROADCAST, "custom", 3, 2,
        (Step((Transfer(0, 1, 0), Transfer(0, 2, 1))),), root=0,
    )
    ev = predicted_events(s, 3, 4, Link("slow", bandwidth_Bps=4.0, alpha_s=1.0))
    sends = {e.chunk: (e.bytes, e.t_start_s, e.t_end_s) for e in ev if e.kind == "send"}
    assert sends == {0: (8, 0.0, 4.0), 1: (4, 0.0, 3.0)}
    recvs = {e.rank: (e.bytes, e.t_end_s) for e in ev if e.kind == "recv"}
    assert recvs == {1: (8, 3.0), 2: (4, 2.0)}


def test_measured_events_start_at_zero_and_overlaps_get_a_second_lane():
    t = 1000.0  # a perf_counter reading: the trace starts at the earliest event
    events = [
        TraceEvent(0, "send", 1, 0, 1, 400, t + 0.0, t + 3e-6, "reduce-scatter"),
        TraceEvent(0, "recv", 1, 3, 1, 400, t + 1e-6, t + 4e-6, "reduce-scatter"),
        TraceEvent(0, "reduce", 1, 3, 1, 400, t + 4e-6, t + 4.5e-6, "reduce-scatter"),
        TraceEvent(1, "recv", 1, 0, 0, 400, t + 0.5e-6, t + 3.5e-6, "reduce-scatter"),
        TraceEvent(1, "send", 1, 3, 0, 400, t + 0.5e-6, t + 2e-6, "reduce-scatter"),
    ]
    trace = to_chrome_trace(events, run="measured: gloo", pid=1, metadata={"host": "h"})
    assert trace["otherData"] == {"host": "h"}
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    # rank 0's recv starts during its send and outlasts it: a second lane (tid 0 + 1 * 2)
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 0 (lane 1)"}
    got = {(e["tid"], e["name"]): (e["ts"], e["dur"]) for e in slices(trace)}
    assert got == {
        (0, "send c0 → r1"): (0.0, 3.0),
        (2, "recv c3 ← r1"): (1.0, 3.0),
        (0, "reduce c3"): (4.0, 0.5),
        (1, "recv c0 ← r0"): (0.5, 3.0),
        (1, "send c3 → r0"): (0.5, 1.5),
    }
    assert {e["pid"] for e in trace["traceEvents"]} == {1}
    process = [e for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert process[0]["args"] == {"name": "measured: gloo"}
    assert_nested(trace)


def test_an_explicit_t0_puts_runs_on_one_clock():
    t = 50.0
    events = [TraceEvent(0, "send", 1, 0, 1, 8, t + 2e-6, t + 3e-6)]
    shifted = slices(to_chrome_trace(events, t0_s=t))
    assert [(e["ts"], e["dur"]) for e in shifted] == [(2.0, 1.0)]
    assert [e["ts"] for e in slices(to_chrome_trace(events))] == [0.0]
    assert slices(to_chrome_trace([], t0_s=t, n_ranks=2)) == []


def test_write_chrome_trace_and_a_bad_path(tmp_path):
    path = tmp_path / "t.json"
    trace = schedule_chrome_trace(build("all-gather", "ring", 3), 30, 4, LINK)
    write_chrome_trace(str(path), trace)
    assert json.loads(path.read_text()) == trace
    with pytest.raises(RingtreeError, match="cannot write"):
        write_chrome_trace(str(tmp_path / "missing" / "t.json"), trace)
