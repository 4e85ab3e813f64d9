"""Where NCCL's choice changes with the size of a call: its switch points on a cluster.

NCCL picks, per call, the algorithm x protocol its tuner predicts fastest
(:func:`ringtree.cost.nccl.tuner.choose`); as the size grows it moves from LL to LL128 to
Simple, from tree to ring, to NVLS. :func:`switch_points` finds each size where the pick
changes, exactly to the element: it samples the range at ``per_octave`` sizes per doubling,
and on both sides of every power of two (where NCCL's tree correction steps), then bisects
every interval whose two ends pick differently. Cost: ``O(entries x
(octaves x per_octave + switches x log2 size))`` evaluations of NCCL's closed forms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ringtree.collectives import Collective
from ringtree.cost.nccl import constants as k
from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.timing import DEFAULT, Params, predict_on
from ringtree.cost.nccl.topology import Topology


@dataclass(frozen=True)
class Range:
    """NCCL runs ``choice`` (``Ring/LL128``) for every size from ``lo_bytes`` to ``hi_bytes``."""

    choice: str
    lo_bytes: int
    hi_bytes: int


@dataclass(frozen=True)
class Switches:
    """NCCL's picks over a size range, and ringtree's time for every pair NCCL allows.

    ranges: the picks in size order (each switch point is where one range ends and the next
    starts); sizes_bytes and times_s: ringtree's time of each enabled ``Algo/Proto`` at
    every sampled size, as if NCCL ran it (for a plot).
    """

    collective: Collective
    n_ranks: int
    nodes: int
    ranges: list[Range]
    sizes_bytes: list[int]
    times_s: dict[str, list[float]]

    def record(self) -> dict[str, Any]:
        """Plain data (``ringtree crossover --cluster --json``)."""
        return {
            "collective": self.collective.value, "n_ranks": self.n_ranks, "nodes": self.nodes,
            "model": "nccl",
            "ranges": [{"choice": r.choice, "from_bytes": r.lo_bytes, "to_bytes": r.hi_bytes}
                       for r in self.ranges],
            "switches": [{"size_bytes": b.lo_bytes, "from": a.choice, "to": b.choice}
                         for a, b in zip(self.ranges, self.ranges[1:], strict=False)],
        }


def _name(e: tuner.Entry) -> str:
    return f"{k.NCCL_NAMES[e.algorithm]}/{k.NCCL_NAMES[e.protocol]}"


def switch_points(
    collective: Collective, topo: Topology, settings: tuner.Settings, lo_bytes: int,
    hi_bytes: int, *, itemsize: int = 1, per_octave: int = 4, params: Params = DEFAULT,
) -> Switches:
    """NCCL's picks from ``lo_bytes`` to ``hi_bytes`` (multiples of ``itemsize``), each
    switch found to the element (module doc). RingtreeError when the environment leaves
    NCCL nothing to run."""
    entries = tuner.table(collective, topo, settings)
    lo = max(1, -(-lo_bytes // itemsize))
    hi = max(lo, hi_bytes // itemsize)

    def pick(count: int) -> str:
        return _name(tuner.choose(collective, count * itemsize, topo, settings, entries))

    steps = max(1, math.ceil(math.log2(hi / lo) * per_octave)) if hi > lo else 0
    # NCCL's tree correction changes at every power of two bytes (tuner.Entry.time_us), so a
    # pick can switch there and back between two samples (dgx-h100, 4 nodes: NVLSTree/Simple
    # from 7,903,820 B to 2^23 - 1 inside Tree/LL128's range): each edge is sampled both sides
    edges = ((2**b - 1) // itemsize + d for b in range((hi * itemsize).bit_length() + 1)
             for d in (0, 1))
    counts = sorted({lo, hi, *(round(lo * 2 ** (i / per_octave)) for i in range(steps + 1)),
                     *edges})
    counts = [c for c in counts if lo <= c <= hi]
    picks = [pick(c) for c in counts]
    ranges: list[Range] = []
    start = counts[0]
    for a, pa, b, pb in zip(counts, picks, counts[1:], picks[1:], strict=False):
        while pa != pb:  # the first count past a that picks otherwise, then on from there
            x, y = a, b
            while y - x > 1:
                mid = (x + y) // 2
                x, y = (mid, y) if pick(mid) == pa else (x, mid)
            ranges.append(Range(pa, start * itemsize, (y - 1) * itemsize))
            start, a, pa = y, y, pick(y)
    ranges.append(Range(picks[-1], start * itemsize, hi * itemsize))
    times: dict[str, list[float]] = {}
    for e in entries:
        times[_name(e)] = [
            predict_on(collective, c * itemsize, topo, settings, params, [e]).time_s for c in counts
        ]
    return Switches(collective, topo.n_ranks, topo.nodes, ranges,
                    [c * itemsize for c in counts], times)
