"""One training step of a plan laid out on a timeline, per pipeline stage: what the step's
picture (``plan --chrome``, ``--svg``) draws. It lays out the plan's own figures, so that the
step it draws ends at the plan's step time (compute + exposed communication + bubble +
optimizer).

Each stage runs its forwards and backwards in the schedule's order
(:func:`ringtree.plan.pipeline.simulate`), each chunk as long as the plan counts it on the
busiest stage: its compute, then what it waits for where the plan stretches the pipeline by
it -- with the compute model, the TP, CP, EP and pipeline transfers; on one stage (no bubble to
stretch), also what each micro-batch's ZeRO-2/3 collectives leave exposed, and with a given
compute its TP, CP and EP waits. The gaps before a stage's first forward and after its last
backward are the bubble. The data-parallel collectives' hidden part is drawn under the compute
it hides behind; what the plan adds once per step, or outside the bubble (with a pipeline:
ZeRO-2/3's exposed part per micro-batch, and with a given compute every wait), is drawn after
the last backward, one after another; then the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.errors import RingtreeError
from ringtree.plan.exposure import FORWARD_SHARE, PER_MICRO_BATCH
from ringtree.plan.pipeline import B, F, Span, simulate
from ringtree.plan.record import Plan, TimedOp
from ringtree.plan.volumes import BACKWARD, FORWARD

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


@dataclass(frozen=True)
class _Round:
    """A data-parallel op's round as drawn: ``hidden_s`` behind ``window``'s compute (FORWARD
    or BACKWARD), then ``exposed_s``; ``per_chunk``: a round per micro-batch, split over its
    chunks (else one per step)."""

    name: str
    window: str
    hidden_s: float
    exposed_s: float
    per_chunk: bool


@dataclass
class _Layout:
    """What one forward and one backward chunk hold, what the step adds after the pipeline."""

    compute: dict[str, float]
    waits: dict[str, float]
    send_s: float
    rounds: list[_Round]
    tail: list[tuple[str, str, float]]  # (track, name, seconds)

    def chunk_s(self, kind: str, v: int, in_span: float) -> float:
        """A chunk's length: compute, waits and in-span exposure over v chunks, its send."""
        return (self.compute[kind] + self.waits[kind] + in_span) / v + self.send_s


def _compute(p: Plan) -> dict[str, float]:
    """One micro-batch's forward and backward compute on the busiest stage."""
    if p.micro is not None:
        return {F: p.micro.forward, B: p.micro.backward}
    assert p.compute_s is not None
    fwd = FORWARD_SHARE * p.compute_s / p.micro_batches
    return {F: fwd, B: p.compute_s / p.micro_batches - fwd}


def _layout(p: Plan) -> _Layout:
    """Where each of the plan's exposed seconds goes (module doc)."""
    lay, m = p.layout, p.micro_batches
    stretch = p.micro is not None or lay.pp == 1  # waits the plan puts through the bubble
    out = _Layout(_compute(p), {F: 0.0, B: 0.0}, 0.0, [], [])
    for c in p.collectives:
        rounds = max(c.op.rounds, 1)
        exposed = c.exposed_s / rounds
        if c.op.group in PER_MICRO_BATCH:
            if not stretch:
                out.tail.append((COMM, f"{c.op.op}: exposed (x{rounds})", c.exposed_s))
            elif c.op.group == "pp":
                out.send_s = exposed / c.op.calls_per_round
            else:
                out.waits[B if c.op.phase == BACKWARD else F] += exposed
            continue
        in_span = rounds == m and lay.pp == 1
        out.rounds.append(_round(c, rounds == m, in_span))
        if not in_span:
            out.tail.append((DATA, f"{c.op.op}: exposed" + (f" (x{rounds})" if rounds > 1
                                                             else ""), c.exposed_s))
    return out


def _round(c: TimedOp, per_chunk: bool, in_span: bool) -> _Round:
    rounds = max(c.op.rounds, 1)
    window = FORWARD if c.op.window == FORWARD else BACKWARD
    hidden = (c.time_s - c.exposed_s) / rounds
    return _Round(c.op.op, window, hidden, c.exposed_s / rounds if in_span else 0.0,
                  per_chunk)


def step_events(p: Plan) -> list[Event]:
    """Every span of one step of ``p`` (module doc); the last ends at ``p.step_time_s``."""
    lay, m, v = p.layout, p.micro_batches, p.layout.v
    spans = lay.pp * m * v * 2
    if spans > MAX_SPANS:
        raise RingtreeError(
            f"the step has {spans:,} forward/backward chunks to draw, more than {MAX_SPANS:,}: "
            "draw a smaller global batch"
        )
    if p.compute_s is None:
        raise RingtreeError("a picture of the step needs its compute: give --compute, "
                            "--tflops/--mfu or a cluster as built (--cluster PRESET)")
    parts = _layout(p)
    in_span = {kind: sum(r.exposed_s for r in parts.rounds if r.per_chunk
                         and r.window == (FORWARD if kind == F else BACKWARD))
               for kind in (F, B)}
    timeline = simulate(lay.pp, m, v, parts.chunk_s(F, v, in_span[F]),
                        parts.chunk_s(B, v, in_span[B]))
    events: list[Event] = []
    for sp in timeline:
        events += _chunk(sp, parts, v, lay.pp)
    ends = [max(s.end_s for s in timeline if s.stage == i) for i in range(lay.pp)]
    events += _bubbles(timeline, lay.pp)
    events += _once_per_step(p, parts, timeline, ends)
    return events


def _chunk(sp: Span, parts: _Layout, v: int, stages: int) -> list[Event]:
    """One forward or backward chunk: its compute, what it waits for, the data-parallel
    rounds it hides (and their exposed part when it is in the chunk), its send."""
    label = f"{sp.kind}{sp.micro_batch}" + (f".{sp.chunk}" if v > 1 else "")
    window = FORWARD if sp.kind == F else BACKWARD
    comp = parts.compute[sp.kind] / v
    out = [Event(sp.stage, COMPUTE, window, label, sp.start_s, comp)]
    t = sp.start_s + comp
    wait = parts.waits[sp.kind] / v
    if wait > 0:
        out.append(Event(sp.stage, COMM, COMM, f"{label} waits for TP/CP/EP", t, wait))
        t += wait
    mine = [r for r in parts.rounds if r.per_chunk and r.window == window]
    out += _hidden(sp.stage, mine, sp.start_s + comp, v, f" ({label})")
    for r in mine:
        if r.exposed_s > 0:
            out.append(Event(sp.stage, DATA, DATA, f"{r.name}: exposed ({label})", t,
                             r.exposed_s / v))
            t += r.exposed_s / v
    if stages > 1 and parts.send_s > 0:
        out.append(Event(sp.stage, SEND, SEND, f"send {label}", t, parts.send_s))
    return out


def _hidden(stage: int, rounds: list[_Round], until: float, v: int, label: str) -> list[Event]:
    """The hidden parts of ``rounds`` (over ``v`` chunks), one stream ending at ``until``, the
    compute they hide behind."""
    out = []
    for r in reversed(rounds):
        if r.hidden_s > 0:
            until -= r.hidden_s / v
            out.append(Event(stage, DATA, DATA, f"{r.name}{label}", until, r.hidden_s / v))
    return out


def _bubbles(timeline: list[Span], stages: int) -> list[Event]:
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


def _once_per_step(p: Plan, parts: _Layout, timeline: list[Span],
                   ends: list[float]) -> list[Event]:
    """Per stage: the hidden part of the rounds that run once per step (under the last
    backward, or the first forward), then the exposed seconds the plan adds after the
    pipeline, one after another; then the optimizer step on every stage once all are done."""
    out: list[Event] = []
    done_all = max(ends)  # the gradient norm is global: every stage steps together
    for i, end in enumerate(ends):
        mine = [s for s in timeline if s.stage == i]
        first_f = min((s for s in mine if s.kind == F), key=lambda s: s.start_s)
        once = [r for r in parts.rounds if not r.per_chunk]
        out += _hidden(i, [r for r in once if r.window == BACKWARD], end, 1, "")
        fwd_end = first_f.start_s + parts.compute[F] / p.layout.v
        out += _hidden(i, [r for r in once if r.window == FORWARD], fwd_end, 1, "")
        t = end
        for track, name, seconds in parts.tail:
            if seconds > 0:
                out.append(Event(i, track, DATA if track == DATA else COMM, name, t, seconds))
                t += seconds
        done_all = max(done_all, t)
    if p.optimizer_s > 0:
        out += [Event(i, COMPUTE, OPTIMIZER, "optimizer step", done_all, p.optimizer_s)
                for i in range(len(ends))]
    return out
