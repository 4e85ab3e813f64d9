"""Closed forms of the pipelined trees: binomial broadcast/reduce/all-reduce and the double
binary tree.

A pipelined tree is a set of streams (:mod:`ringtree.algorithms.pipeline`): stream (o, b) carries
chunk j of block b at step o + j. So in step t a rank moves, in each direction, the chunks
t - o of its streams, and the busiest rank of the step sets its time. The terms are computed
from the ranks' stream offsets alone, a few kinds of rank per tree (grouped by their offsets),
never from the N-rank schedule:

    steps       = |union over streams of [o, o + C)|
    wire_bytes  = sum_t max over ranks and directions of sum_{(o, b) of the rank} chunk_b[t - o]
    reduce_bytes likewise over the reductions a rank receives

Approximate figures (S bytes, L = ceil(log2 N), C chunks, D = depth of the binary trees):
binomial all-reduce (2L + C - 1) alpha + L S (1 + L/C) beta (C >> L); double binary tree about
(3D + C) alpha + 2 S (1 + O(D/C)) beta (Sanders, Speck & Traeff 2009; NCCL's tree model).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ringtree.algorithms import DEFAULT_PIPELINE_CHUNKS, BuildSpec
from ringtree.algorithms.dbtree import dbtree_streams
from ringtree.algorithms.pipeline import Stream
from ringtree.algorithms.tree import (
    binomial_broadcast_streams,
    binomial_reduce_streams,
    tree_all_reduce_streams,
)
from ringtree.collectives import Collective, block_bounds
from ringtree.cost.closed_forms import Estimate, closed_form
from ringtree.cost.model import FLAT, Terms
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
def _kinds(algorithm: str, n_ranks: int) -> RankKinds:
    """RankKinds of a tree algorithm on N ranks (cost does not depend on the root)."""
    streams = {
        "broadcast": binomial_broadcast_streams,
        "reduce": binomial_reduce_streams,
        "all-reduce": tree_all_reduce_streams,
        "dbtree": dbtree_streams,
    }[algorithm](n_ranks)
    return RankKinds(streams, n_ranks)


@closed_form(Collective.BROADCAST, "tree")
def tree_broadcast(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial broadcast: ceil(log2 N) steps of S unpipelined, L (alpha + S beta); the root
    sends L*S. Pipelined over C chunks: L+C-1 steps, the root still sends every chunk L times
    (Thakur, Rabenseifner & Gropp 2005)."""
    return _kinds("broadcast", n).terms(count, itemsize, spec.n_chunks or 1, 1)


@closed_form(Collective.REDUCE, "tree")
def tree_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial reduce: ceil(log2 N) steps, L (alpha + S (beta + gamma)) unpipelined; every
    non-root rank sends S (Thakur, Rabenseifner & Gropp 2005)."""
    return _kinds("reduce", n).terms(count, itemsize, spec.n_chunks or 1, 1)


@closed_form(Collective.ALL_REDUCE, "tree")
def tree_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Binomial reduce + broadcast pipelined over C chunks, the halves overlapped at the root:
    2L + C - 1 steps, about (2L + C - 1) alpha + L S (1 + L/C) beta (C >> L); C = 1 gives
    2L (alpha + S beta), the textbook reduce-then-broadcast (Thakur et al. 2005)."""
    return _kinds("all-reduce", n).terms(
        count, itemsize, spec.n_chunks or DEFAULT_PIPELINE_CHUNKS, 1
    )


@closed_form(Collective.ALL_REDUCE, "dbtree")
def dbtree_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Double binary tree, C chunks per half: about (3D + C) alpha + 2S (1 + O(D/C)) beta with
    D ~ log2 N; every rank sends at most 2S (Sanders, Speck & Traeff 2009; NCCL 2.4)."""
    return _kinds("dbtree", n).terms(count, itemsize, spec.n_chunks or DEFAULT_PIPELINE_CHUNKS, 2)
