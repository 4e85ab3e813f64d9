"""Closed forms of pipelined trees, from their streams (:mod:`ringtree.algorithms.pipeline`).

A pipelined tree is a set of streams: stream (o, b) carries chunk j of block b at step o + j.
So in step t a rank moves, in each direction, the chunks t - o of its streams, and the busiest
rank of the step sets its time. The terms are computed from the ranks' stream offsets alone, a
few kinds of rank per tree (grouped by their offsets), never from the N-rank schedule:

    steps       = |union over streams of [o, o + C)|
    wire_bytes  = sum_t max over ranks and directions of sum_{(o, b) of the rank} chunk_b[t - o]
    reduce_bytes likewise over the reductions a rank receives

Used by the binomial trees (:mod:`ringtree.cost.forms.tree`) and the double binary tree
(:mod:`ringtree.cost.forms.dbtree`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from ringtree.algorithms.pipeline import Stream
from ringtree.collectives import block_bounds
from ringtree.cost.forms.base import Estimate
from ringtree.cost.terms import FLAT, Terms
from ringtree.schedule import Action

Lane = tuple[int, int]  # (block, offset)
Pattern = tuple[tuple[Lane, int], ...]  # lanes with how many streams of the rank use each


class RankKinds:
    """The distinct per-rank stream patterns of a pipelined schedule, dominated ones dropped.

    ``sent``/``recv``/``reduced``: patterns of the streams a rank sends on, receives on, and
    receives reductions on. Built once per (algorithm, N); :meth:`terms` then costs
    O(patterns x lanes x steps) for any payload and chunk count.
    """

    def __init__(self, streams: Sequence[Stream], n_ranks: int) -> None:
        sent: dict[int, dict[Lane, int]] = {}
        recv: dict[int, dict[Lane, int]] = {}
        red: dict[int, dict[Lane, int]] = {}
        for s in streams:  # plain dicts, only for ranks with streams: N in the thousands
            lane = (s.block, s.offset)
            d = sent.setdefault(s.src, {})
            d[lane] = d.get(lane, 0) + 1
            d = recv.setdefault(s.dst, {})
            d[lane] = d.get(lane, 0) + 1
            if s.action is Action.REDUCE:
                d = red.setdefault(s.dst, {})
                d[lane] = d.get(lane, 0) + 1
        self.sent = _maximal(list(sent.values()))
        self.recv = _maximal(list(recv.values()))
        self.reduced = _maximal(list(red.values()))
        self.offsets = sorted({s.offset for s in streams})
        self.last_offset = self.offsets[-1] if self.offsets else 0

    def n_steps(self, chunks: int) -> int:
        """Steps where some stream is active: |union of [o, o + C)| over the offsets (what
        :func:`ringtree.algorithms.pipeline.n_pipeline_steps` counts, from the offsets)."""
        steps, end = 0, None
        for o in self.offsets:  # sorted: merge the intervals
            start = o if end is None else max(o, end)
            steps += max(0, o + chunks - start)
            end = o + chunks if end is None else max(end, o + chunks)
        return steps

    def terms(self, count: int, itemsize: int, chunks: int, n_blocks: int) -> Estimate:
        """Flat terms and the most bytes one rank sends, for ``count`` elements."""
        outer = block_bounds(count, n_blocks)
        sizes = [
            np.diff(block_bounds(outer[b + 1] - outer[b], chunks)).astype(np.int64)
            for b in range(n_blocks)
        ]
        horizon = self.last_offset + chunks
        wire = np.maximum(
            _peak(self.sent, sizes, chunks, horizon), _peak(self.recv, sizes, chunks, horizon)
        )
        reduced = _peak(self.reduced, sizes, chunks, horizon)
        totals = [int(x.sum()) for x in sizes]
        most = max((sum(k * totals[b] for (b, _), k in p) for p in self.sent), default=0)
        steps = self.n_steps(chunks)
        cost = {FLAT: Terms(steps, int(wire.sum()) * itemsize, int(reduced.sum()) * itemsize)}
        return Estimate(cost, most * itemsize)


def _peak(
    patterns: list[Pattern], sizes: list[np.ndarray], chunks: int, horizon: int
) -> np.ndarray:
    """Per step, the most elements that any rank's pattern moves."""
    lanes = sorted({lane for p in patterns for lane, _ in p})
    if not lanes:
        return np.zeros(horizon, np.int64)
    index = {lane: i for i, lane in enumerate(lanes)}
    per_lane = np.zeros((len(lanes), horizon), np.int64)
    for i, (b, o) in enumerate(lanes):
        per_lane[i, o : o + chunks] = sizes[b]
    weights = np.zeros((len(patterns), len(lanes)), np.int64)
    for r, p in enumerate(patterns):
        for lane, k in p:
            weights[r, index[lane]] = k
    return (weights @ per_lane).max(axis=0)


def _maximal(counters: list[dict[Lane, int]]) -> list[Pattern]:
    """Distinct non-empty patterns, without those another pattern dominates lane by lane."""
    pats = [dict(p) for p in {tuple(sorted(c.items())) for c in counters if c}]
    keep = []
    for p in pats:
        if not any(q != p and all(q.get(lane, 0) >= k for lane, k in p.items()) for q in pats):
            keep.append(tuple(sorted(p.items())))
    return keep


@lru_cache(maxsize=256)
def rank_kinds(streams_of: Callable[[int], Sequence[Stream]], n_ranks: int) -> RankKinds:
    """RankKinds of the streams ``streams_of(n_ranks)`` (the cost does not depend on the
    root), built once per (tree, N)."""
    return RankKinds(streams_of(n_ranks), n_ranks)
