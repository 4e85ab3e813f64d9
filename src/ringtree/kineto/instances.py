"""The same call on every rank of its group (:func:`instances`), its time and who was late.

The k-th call of a process group on each of its members is one collective: the members
queue their collectives in the same order. A collective's time runs from the moment its last
rank joins it to the moment its last rank is done. For the collectives that end at the same
moment everywhere (:data:`ENDS_TOGETHER`) that is the shortest of its ranks' spans: every
rank's span runs from its own start to the common end, so the rank that started last spans
only the transfer, and the others add the time they waited for it (what HTA's straggler view
shows as skew) -- this needs no clock shared by the ranks. A rooted one (broadcast, reduce,
gather, scatter) lets the root go as soon as its part is sent, so its time is the latest end
less the latest start, on the ranks' clocks aligned. Where the traces come from several hosts
their clocks differ; the ranks' offsets are estimated from the common end
(:func:`clock_offsets`: the median difference of end times over the collectives that end
together).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from ringtree.kineto.calls import Call, Run
from ringtree.kineto.names import P2P

#: collectives that end at the same moment on every rank (the last data arrives everywhere
#: at once): a root's broadcast, reduce, gather or scatter ends when its part is sent
ENDS_TOGETHER = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "barrier")


@dataclass
class Instance:
    """One collective: its calls, one per rank of the group that was read; ``offsets``: the
    ranks' clocks less the lowest rank's (us)."""

    calls: list[Call]
    offsets: dict[int, float] = field(default_factory=dict)

    @property
    def time_us(self) -> float:
        """The collective's time (module doc)."""
        if len(self.calls) == 1 or self.first.collective in ENDS_TOGETHER:
            return min(c.duration_us for c in self.calls)
        o = self.offsets
        return (max(c.span[1] - o.get(c.rank, 0.0) for c in self.calls)
                - max(c.span[0] - o.get(c.rank, 0.0) for c in self.calls))

    @property
    def first(self) -> Call:
        """A call of it (they agree on collective, size and group)."""
        return self.calls[0]


def instances(run: Run) -> tuple[list[Instance], int]:
    """Every collective matched over ranks (p2p calls stay one per rank), with the ranks'
    clock offsets; and how many positions disagreed across ranks (a call of another kind or
    size in the same place), which are kept apart, one instance per call."""
    per_group: dict[tuple[object, ...], dict[int, list[Call]]] = defaultdict(dict)
    out: list[Instance] = []
    for r in run.ranks:
        for c in r.calls:
            if c.collective in P2P or c.group_ranks is None:
                out.append(Instance([c]))
            else:
                per_group[(c.group, c.group_ranks)].setdefault(r.rank, []).append(c)
    mismatched = 0
    for lists in per_group.values():
        longest = max(len(v) for v in lists.values())
        for k in range(longest):
            calls = [v[k] for v in lists.values() if k < len(v)]
            if len({c.key() for c in calls}) == 1:
                out.append(Instance(calls))
            else:
                mismatched += 1
                out.extend(Instance([c]) for c in calls)
    out.sort(key=lambda i: i.first.span[0])
    offsets = clock_offsets(run, out)
    for inst in out:
        inst.offsets = offsets
    return out, mismatched


def clock_offsets(run: Run, found: list[Instance]) -> dict[int, float]:
    """Per rank, its clock minus the lowest rank's (us): 0 where all traces name one host,
    else the median difference of the end of the collectives that end together."""
    hosts = {r.host for r in run.ranks}
    if len(hosts) == 1 and "" not in hosts:
        return {r.rank: 0.0 for r in run.ranks}
    ref = run.ranks[0].rank
    diffs: dict[int, list[float]] = defaultdict(list)
    for inst in found:
        if inst.first.collective not in ENDS_TOGETHER:
            continue
        ends = {c.rank: c.span[1] for c in inst.calls}
        if ref in ends:
            for rank, end in ends.items():
                diffs[rank].append(end - ends[ref])
    return {r.rank: statistics.median(diffs[r.rank]) if diffs[r.rank] else 0.0
            for r in run.ranks}


@dataclass(frozen=True)
class Lateness:
    """How late one rank starts the collectives it shares with others: in how many it was
    the last to start, and its median and largest delay after the first (us)."""

    rank: int
    collectives: int
    last: int
    median_us: float
    max_us: float


def lateness(found: list[Instance], offsets: dict[int, float]) -> list[Lateness]:
    """Per rank, the delay of its starts after the group's first (clocks aligned), latest
    first."""
    delays: dict[int, list[float]] = defaultdict(list)
    last: dict[int, int] = defaultdict(int)
    for inst in found:
        if len(inst.calls) < 2:
            continue
        starts = {c.rank: c.span[0] - offsets.get(c.rank, 0.0) for c in inst.calls}
        first = min(starts.values())
        for rank, s in starts.items():
            delays[rank].append(s - first)
        last[max(starts, key=lambda r: starts[r])] += 1
    out = [Lateness(r, len(d), last[r], statistics.median(d), max(d)) for r, d in delays.items()]
    return sorted(out, key=lambda x: (-x.median_us, x.rank))
