"""Closed forms of recursive doubling/halving (:mod:`ringtree.algorithms.recursive`; Thakur,
Rabenseifner & Gropp 2005).

Notation: N ranks, p = 2^floor(log2 N), r = N - p extra ranks, S = count * itemsize. Blocks
are ``block_bounds`` pieces (N of them for reduce-scatter/all-gather, p for Rabenseifner), the
first ones one element larger when the count does not divide. In every doubling or halving step
each rank moves one aligned group of d virtual ranks' blocks; the first group holds the most
blocks and the largest ones, so it sets the step's time. Non-power-of-two N adds a fold step
and an unfold step (MPICH's handling).
"""

from __future__ import annotations

import numpy as np

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.recursive import Fold, fold_for
from ringtree.collectives import Collective
from ringtree.cost.forms.base import Estimate, closed_form
from ringtree.cost.terms import FLAT, Terms


class _Blocks:
    """Sizes of ``n_blocks`` blocks of ``count`` elements and prefix sums over them."""

    def __init__(self, count: int, n_blocks: int) -> None:
        self.count = count
        self.base, self.extra = divmod(count, n_blocks)

    def size(self, k: int) -> int:
        """Elements in block k."""
        return self.base + (1 if k < self.extra else 0)

    def prefix(self, k: np.ndarray | int) -> np.ndarray | int:
        """Elements in blocks 0..k-1."""
        return k * self.base + np.minimum(k, self.extra)


def _distances(f: Fold) -> list[int]:
    """1, 2, ..., p/2: the partner distances of recursive doubling."""
    return [1 << k for k in range(f.p.bit_length() - 1)]


def _group_totals(f: Fold, blocks: _Blocks, first: np.ndarray) -> np.ndarray:
    """Per virtual rank: elements it sends over a recursive doubling all-gather (the sum over
    d of its aligned group of d virtual ranks' blocks)."""
    i = np.arange(f.p)
    out = np.zeros(f.p, np.int64)
    for d in _distances(f):
        lo = i & ~(d - 1)
        out += blocks.prefix(first[lo + d]) - blocks.prefix(first[lo])
    return out


def _first_blocks(f: Fold) -> np.ndarray:
    """first_block(i) for i = 0..p (real blocks of virtual ranks)."""
    i = np.arange(f.p + 1)
    return np.where(i < f.extras, 2 * i, i + f.extras)


def _terms(steps: int, wire: int, reduced: int, itemsize: int) -> dict[str, Terms]:
    return {FLAT: Terms(steps, wire * itemsize, reduced * itemsize)}


@closed_form(Collective.ALL_GATHER, "recursive")
def recursive_all_gather(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """log2 N alpha + (N-1)/N S beta for N = 2^k (steps of S/N, 2S/N, ..., S/2); other N add
    a fold step (a block) and an unfold step (S minus a block)."""
    f = fold_for(n, "recursive all-gather", spec.fold)
    b = _Blocks(count, n)
    first = _first_blocks(f)
    ds = _distances(f)
    wire = sum(int(b.prefix(first[d])) for d in ds)
    sent = _group_totals(f, b, first)
    steps = len(ds)
    if f.extras:
        steps += 2
        wire += b.size(0) + count - b.size(2 * (f.extras - 1))
        unfold = count - (b.base + ((2 * np.arange(f.extras)) < b.extra))
        sent[: f.extras] += unfold
        sent = np.append(sent, b.size(0))  # an extra rank sends its block once
    return Estimate(_terms(steps, wire, 0, itemsize), int(sent.max()) * itemsize)


@closed_form(Collective.REDUCE_SCATTER, "recursive")
def recursive_reduce_scatter(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """log2 N alpha + (N-1)/N S (beta + gamma) for N = 2^k (steps of S/2, S/4, ..., S/N); other
    N add a fold step (S, reduced) and an unfold step (a block)."""
    f = fold_for(n, "recursive reduce-scatter", spec.fold)
    b = _Blocks(count, n)
    first = _first_blocks(f)
    ds = _distances(f)
    wire = sum(int(b.prefix(first[d])) for d in ds)
    reduced = wire
    steps = len(ds)
    if f.extras:
        steps += 2
        wire += count + b.size(0)
        reduced += count
        most = count  # the extra ranks send their whole buffer
    else:
        most = count - b.base  # every block but one's own, the smallest
    return Estimate(_terms(steps, wire, reduced, itemsize), most * itemsize)


@closed_form(Collective.ALL_REDUCE, "rabenseifner")
def rabenseifner_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """2 log2 N alpha + 2(N-1)/N S beta + (N-1)/N S gamma for N = 2^k (Rabenseifner 2004);
    other N add a fold step (S, reduced) and an unfold step (S)."""
    f = fold_for(n, "rabenseifner all-reduce", spec.fold)
    b = _Blocks(count, f.p)
    first = np.arange(f.p + 1)
    ds = _distances(f)
    group = sum(int(b.prefix(d)) for d in ds)
    wire, reduced, steps = 2 * group, group, 2 * len(ds)
    own = b.base + (np.arange(f.p) < b.extra)
    sent = count - own + _group_totals(f, b, first)
    if f.extras:
        steps += 2
        wire += 2 * count
        reduced += count
        sent[: f.extras] += count  # the partners unfold the result
        sent = np.append(sent, count)  # the extras fold their buffer
    return Estimate(_terms(steps, wire, reduced, itemsize), int(sent.max()) * itemsize)


@closed_form(Collective.ALL_REDUCE, "recursive")
def recursive_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """log2 N (alpha + S (beta + gamma)) for N = 2^k: every step exchanges the whole buffer;
    other N add a fold step (S, reduced) and an unfold step (S)."""
    f = fold_for(n, "recursive all-reduce", spec.fold)
    k = len(_distances(f))
    steps = k + (2 if f.extras else 0)
    rounds = k + (1 if f.extras else 0)  # steps that reduce S; a partner also sends S as often
    return Estimate(
        _terms(steps, steps * count, rounds * count, itemsize), rounds * count * itemsize
    )
