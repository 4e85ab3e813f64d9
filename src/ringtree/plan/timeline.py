"""One training step of a plan laid out on a timeline, per pipeline stage: what the step's
picture (``plan --chrome``, ``--svg``) draws.

Each stage runs its forwards and backwards in the schedule's order
(:func:`ringtree.plan.pipeline.simulate`), each as long as the busiest stage's (the plan's
per-micro-batch compute plus what it waits for in TP, CP and EP communication, split into v
chunks), with the pipeline's sends between stages; the gaps before a stage's first forward and
after its last backward are the bubble. Beside each forward and backward, the communication
it waits for; under the last backward, the data-parallel buckets (overlapped as the plan's
overlap model says, the exposed rest after it); then the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.errors import RingtreeError
from ringtree.plan.exposure import FORWARD_SHARE, PER_MICRO_BATCH
from ringtree.plan.pipeline import B, F, simulate
from ringtree.plan.record import Plan

#: The most forward/backward chunks a picture draws (stages x micro-batches x v x 2).
MAX_SPANS = 2**17
COMPUTE, COMM, SEND, DATA = "compute", "comm", "send", "dp"
OPTIMIZER, BUBBLE = "optimizer", "bubble"


@dataclass(frozen=True)
class Event:
    """One span on the picture: ``stage`` (a process), ``track`` (compute, comm, dp),
    ``kind`` (its colour), a name, start and duration in seconds."""

    stage: int
    track: str
    kind: str
    name: str
    start_s: float
    dur_s: float


def _phase_waits(p: Plan) -> tuple[float, float, float]:
    """Per micro-batch: exposed communication in the forward, in the backward, one send."""
    fwd = bwd = send = 0.0
    for c in p.collectives:
        if c.op.group not in PER_MICRO_BATCH:
            continue
        per = c.exposed_s / max(c.op.rounds, 1)
        if c.op.group == "pp":
            send = c.call.time_s
        elif c.op.phase == "backward":
            bwd += per
        else:
            fwd += per
    return fwd, bwd, send


def step_events(p: Plan) -> list[Event]:
    """Every span of one step of ``p`` (module doc)."""
    lay, m = p.layout, p.micro_batches
    spans = lay.pp * m * lay.v * 2
    if spans > MAX_SPANS:
        raise RingtreeError(
            f"the step has {spans:,} forward/backward chunks to draw, more than {MAX_SPANS:,}: "
            "draw a smaller global batch"
        )
    if p.compute_s is None:
        raise RingtreeError("a picture of the step needs its compute: give --compute, "
                            "--tflops/--mfu or a cluster as built (--cluster PRESET)")
    if p.micro is not None:
        fwd_c, bwd_c = p.micro.forward, p.micro.backward
    else:
        fwd_c = FORWARD_SHARE * p.compute_s / m
        bwd_c = p.compute_s / m - fwd_c
    w_f, w_b, send = _phase_waits(p)
    v = lay.v
    f_s, b_s = (fwd_c + w_f) / v, (bwd_c + w_b) / v
    timeline = simulate(lay.pp, m, v, f_s, b_s, send if lay.pp > 1 else 0.0)
    events: list[Event] = []
    ends = [0.0] * lay.pp
    for sp in timeline:
        label = f"{sp.kind}{sp.micro_batch}" + (f".{sp.chunk}" if v > 1 else "")
        kind = "forward" if sp.kind == F else "backward"
        comp = (fwd_c if sp.kind == F else bwd_c) / v
        wait = (w_f if sp.kind == F else w_b) / v
        events.append(Event(sp.stage, COMPUTE, kind, label, sp.start_s, comp))
        if wait > 0:
            events.append(Event(sp.stage, COMM, COMM, f"{label} waits for TP/CP/EP",
                                sp.start_s + comp, wait))
        if lay.pp > 1 and send > 0:
            last = sp.kind == F and sp.stage == lay.pp - 1 and sp.chunk == v - 1
            first = sp.kind == B and sp.stage == 0 and sp.chunk == 0
            if not (last or first):
                events.append(Event(sp.stage, SEND, SEND, f"send {label}", sp.end_s, send))
        ends[sp.stage] = max(ends[sp.stage], sp.end_s)
    events += _bubbles(timeline, lay.pp)
    events += _data_parallel(p, timeline, ends, bwd_c / v)
    return events


def _bubbles(timeline: list, stages: int) -> list[Event]:
    """The idle gaps of each stage between its first and last span, and before the first."""
    out = []
    end = max(s.end_s for s in timeline)
    for i in range(stages):
        mine = sorted((s for s in timeline if s.stage == i), key=lambda s: s.start_s)
        t = 0.0
        for s in mine:
            if s.start_s - t > 1e-12:
                out.append(Event(i, COMPUTE, BUBBLE, "bubble", t, s.start_s - t))
            t = s.end_s
        if end - t > 1e-12:
            out.append(Event(i, COMPUTE, BUBBLE, "bubble", t, end - t))
    return out


def _data_parallel(p: Plan, timeline: list, ends: list[float], last_bwd: float) -> list[Event]:
    """DP buckets under each stage's last backward (one after another, each starting when its
        slice of the backward is done), ZeRO-3's gathers per micro-batch, then the optimizer step on
    every stage once all are done."""
    out: list[Event] = []
    dp_ops = [c for c in p.collectives if c.op.group not in PER_MICRO_BATCH]
    done_all = max(ends)  # the gradient norm is global: every stage steps together
    for i, end in enumerate(ends):
        start = end - last_bwd
        t = start
        for c in dp_ops:
            op, n = c.op, c.op.calls_per_round
            if op.rounds > 1:  # ZeRO-3 / ZeRO-2: drawn once, for the last micro-batch
                per = c.time_s / op.rounds
                out.append(Event(i, DATA, DATA, f"{op.op} (x{op.rounds})", max(t, start), per))
                t = max(t, start) + per
                continue
            call = c.call.time_s
            for k in range(n):
                ready = start + (k + 1) * last_bwd / n if op.window else end
                t = max(t, ready)
                out.append(Event(i, DATA, DATA, f"{op.op} {k + 1}/{n}", t, call))
                t += call
        done_all = max(done_all, t)
    if p.optimizer_s > 0:
        out += [Event(i, COMPUTE, OPTIMIZER, "optimizer step", done_all, p.optimizer_s)
                for i in range(len(ends))]
    return out
