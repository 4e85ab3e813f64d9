"""A step's time split into compute, exposed communication and idle, per rank, as HTA splits
a rank's GPU time (hta/analyzers/breakdown_analysis.py ``get_temporal_breakdown``,
communication_analysis.py ``get_comm_comp_overlap``).

In a window of length T with C the union of compute intervals, K of communication, M of
memory copies (:class:`~ringtree.kineto.calls.RankTrace`'s ``busy``):

- compute = |C|;
- exposed communication = |K \\ C|: communication that no computation overlaps (HTA counts
  it, with memory copies, as "non-compute" time);
- memory = |M \\ (C u K)|: copies alone;
- idle = T - |C u K u M|: nothing runs;

so compute + exposed + memory + idle = T exactly. Overlap is HTA's: |K n C| / |K|, the share
of communication hidden behind computation. On CPU traces compute is the operators of the
threads that run the model (not inside a collective's call) and communication the calls and
gloo's work spans; GPU traces split the device's streams. A step's critical path is its
slowest rank: the step ends when that rank ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ringtree.kineto import intervals as iv
from ringtree.kineto.calls import RankTrace, Run


@dataclass(frozen=True)
class Split:
    """One rank's window (seconds)."""

    rank: int
    time_s: float
    compute_s: float
    exposed_comm_s: float
    memory_s: float
    idle_s: float
    comm_s: float

    @property
    def overlap(self) -> float | None:
        """HTA's overlap: communication hidden behind computation (None: none ran)."""
        return 1 - self.exposed_comm_s / self.comm_s if self.comm_s > 0 else None

    def record(self) -> dict[str, Any]:
        """Plain data."""
        return {"rank": self.rank, "time_s": self.time_s, "compute_s": self.compute_s,
                "exposed_comm_s": self.exposed_comm_s, "memory_s": self.memory_s,
                "idle_s": self.idle_s, "comm_s": self.comm_s, "overlap": self.overlap}


def split(r: RankTrace, start: float, end: float) -> Split:
    """``r``'s window ``[start, end)`` (us) split (module doc)."""
    c = iv.clip(r.busy["compute"], start, end)
    k = iv.clip(r.busy["comm"], start, end)
    m = iv.clip(r.busy["memory"], start, end)
    exposed = iv.total(iv.subtract(k, c))
    memory = iv.total(iv.subtract(m, iv.union(c, k)))
    busy = iv.total(iv.union(c, k, m))
    us = 1e-6
    return Split(r.rank, (end - start) * us, iv.total(c) * us, exposed * us, memory * us,
                 ((end - start) - busy) * us, iv.total(k) * us)


@dataclass(frozen=True)
class StepSplit:
    """Step ``step`` on every rank that recorded it; ``critical`` is the slowest."""

    step: int
    ranks: list[Split]

    @property
    def critical(self) -> Split:
        """The rank whose window is longest."""
        return max(self.ranks, key=lambda s: s.time_s)

    def record(self) -> dict[str, Any]:
        """The critical rank's split, and every rank's."""
        c = self.critical
        return {"step": self.step, **{k: v for k, v in c.record().items()},
                "ranks": [s.record() for s in self.ranks]}


def step_splits(run: Run) -> list[StepSplit]:
    """Every step any rank recorded, split on each rank that recorded it."""
    by_step: dict[int, list[Split]] = {}
    for r in run.ranks:
        for s in r.steps:
            by_step.setdefault(s.number, []).append(split(r, s.start, s.end))
    return [StepSplit(n, v) for n, v in sorted(by_step.items())]


def whole_splits(run: Run) -> list[Split]:
    """Each rank's whole trace split, from its first busy moment to its last (HTA's temporal
    breakdown spans the first kernel to the last)."""
    out = []
    for r in run.ranks:
        busy = iv.union(*r.busy.values())
        if busy.size:
            out.append(split(r, float(busy[0, 0]), float(busy[-1, 1])))
    return out
