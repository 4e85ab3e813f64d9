"""Recursive doubling and halving: all-gather, reduce-scatter, all-reduce in log2 N steps.

On a power-of-two N = p, at each step every rank exchanges with the rank whose number differs
in one bit:

- recursive doubling all-gather: at step k (distance 2^k) each rank sends every block it has
  (2^k blocks) to its partner; after log2 p steps everyone has all;
- recursive halving reduce-scatter: at step k (distance p/2^(k+1)) each rank keeps the half of
  its current blocks on its own side and sends the other half to its partner, who reduces it;
  rank r ends with block r reduced;
- Rabenseifner's all-reduce: recursive halving reduce-scatter, then recursive doubling
  all-gather, on p blocks;
- recursive doubling all-reduce: log2 p exchanges of the whole buffer (no splitting: the fewest
  steps, for tiny payloads).

Other N (as MPICH does): with p the largest power of two below N and r = N - p extra ranks,
ranks 2i and 2i+1 (i < r) pair up. Ranks 2i first *fold* their data into 2i+1 (one step), the
p remaining ranks (virtual rank i is 2i+1 for i < r, else i + r) run the power-of-two
algorithm, and 2i+1 finally *unfolds* the result back to 2i (one step). With ``fold=False``
such N is refused.

Costs (S bytes, power-of-two N; non-power-of-two adds two steps moving up to S each):

==========================  ===========  ====================  =================================
schedule                    steps        bytes sent per rank   alpha-beta time
==========================  ===========  ====================  =================================
all-gather (doubling)       log2 N       (N-1)/N S             log2 N alpha + (N-1)/N S beta
reduce-scatter (halving)    log2 N       (N-1)/N S             log2 N alpha + (N-1)/N S (beta+gamma)
all-reduce (Rabenseifner)   2 log2 N     2(N-1)/N S            2 log2 N alpha + 2(N-1)/N S beta
                                                               + (N-1)/N S gamma
all-reduce (doubling)       log2 N       log2 N * S            log2 N (alpha + S (beta + gamma))
==========================  ===========  ====================  =================================

(Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations in
MPICH"; Rabenseifner 2004, "Optimization of collective reduction operations".)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ringtree.algorithms.registry import Algorithm, register
from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Transfer, make_steps


@dataclass(frozen=True)
class Fold:
    """How N ranks map onto p = 2^floor(log2 N) virtual ranks.

    ``extras`` = N - p; virtual rank i is real rank ``real(i)``; real rank 2i (i < extras)
    folds into 2i+1. ``first_block(i)``: blocks [first_block(i), first_block(i+1)) are the
    real blocks of virtual rank i (two for i < extras, else one).
    """

    n_ranks: int
    p: int
    extras: int

    def real(self, i: int) -> int:
        """The real rank that plays virtual rank ``i``."""
        return 2 * i + 1 if i < self.extras else i + self.extras

    def first_block(self, i: int) -> int:
        """First real block owned by virtual rank ``i`` (``i == p`` gives N)."""
        return 2 * i if i < self.extras else i + self.extras


def fold_for(n_ranks: int, algorithm: str, fold: bool = True) -> Fold:
    """The Fold for ``n_ranks``; RingtreeError when N is not a power of two and not ``fold``."""
    p = 1 << (n_ranks.bit_length() - 1)
    if p != n_ranks and not fold:
        raise RingtreeError(
            f"{algorithm} without folding needs a power-of-two number of ranks, got {n_ranks}: "
            f"use {p} or {2 * p} ranks, or allow folding (extra ranks fold into partners first)"
        )
    return Fold(n_ranks, p, n_ranks - p)


Rows = list[tuple[list[Transfer], str]]
BlockRange = Callable[[int], int]  # virtual rank -> first chunk it owns


def _fold_step(f: Fold, chunks_for: Callable[[int], Sequence[int]], action: Action) -> Rows:
    """Extra ranks 2i send the chunks ``chunks_for(i)`` to their partners 2i+1."""
    ts = [Transfer(2 * i, 2 * i + 1, c, action) for i in range(f.extras) for c in chunks_for(i)]
    return [(ts, "fold")]


def _unfold_step(f: Fold, chunks_for: Callable[[int], Sequence[int]]) -> Rows:
    """Partners 2i+1 send the extra rank 2i its result (the chunks ``chunks_for(i)``)."""
    ts = [
        Transfer(2 * i + 1, 2 * i, c, Action.COPY) for i in range(f.extras) for c in chunks_for(i)
    ]
    return [(ts, "unfold")]


def _halving(f: Fold, first: BlockRange) -> Rows:
    """Recursive halving reduce-scatter among virtual ranks: virtual i ends owning chunks
    [first(i), first(i+1)) reduced over everyone."""
    rows: Rows = []
    d = f.p // 2
    while d:
        ts = []
        for i in range(f.p):
            j = i ^ d
            lo = j & ~(d - 1)  # the partner's half: virtual ranks [lo, lo + d)
            ts += [
                Transfer(f.real(i), f.real(j), c, Action.REDUCE)
                for c in range(first(lo), first(lo + d))
            ]
        rows.append((ts, "reduce-scatter"))
        d //= 2
    return rows


def _doubling(f: Fold, first: BlockRange) -> Rows:
    """Recursive doubling all-gather among virtual ranks, virtual i starting with chunks
    [first(i), first(i+1))."""
    rows: Rows = []
    d = 1
    while d < f.p:
        ts = []
        for i in range(f.p):
            lo = i & ~(d - 1)  # my group: virtual ranks [lo, lo + d)
            ts += [
                Transfer(f.real(i), f.real(i ^ d), c, Action.COPY)
                for c in range(first(lo), first(lo + d))
            ]
        rows.append((ts, "all-gather"))
        d *= 2
    return rows


def recursive_all_gather(n_ranks: int, *, fold: bool = True) -> Schedule:
    """Recursive doubling all-gather: rank r starts with block r, ends with all N blocks.

    log2 p steps (+2 when N is not a power of two); (N-1)/N S bytes per rank for N = p.
    """
    f = fold_for(n_ranks, "recursive all-gather", fold)
    n = n_ranks
    rows = _fold_step(f, lambda i: [2 * i], Action.COPY)
    rows += _doubling(f, f.first_block)
    rows += _unfold_step(f, lambda i: [c for c in range(n) if c != 2 * i])
    return Schedule(Collective.ALL_GATHER, "recursive", n, n, make_steps(rows), n_blocks=n)


def recursive_reduce_scatter(n_ranks: int, *, fold: bool = True) -> Schedule:
    """Recursive halving reduce-scatter: rank r ends with block r of op over all buffers.

    log2 p steps (+2 when N is not a power of two); (N-1)/N S bytes per rank for N = p.
    """
    f = fold_for(n_ranks, "recursive reduce-scatter", fold)
    n = n_ranks
    rows = _fold_step(f, lambda i: range(n), Action.REDUCE)
    rows += _halving(f, f.first_block)
    rows += _unfold_step(f, lambda i: range(2 * i, 2 * i + 1))
    return Schedule(Collective.REDUCE_SCATTER, "recursive", n, n, make_steps(rows), n_blocks=n)


def rabenseifner_all_reduce(n_ranks: int, *, fold: bool = True) -> Schedule:
    """Rabenseifner's all-reduce: recursive halving reduce-scatter + recursive doubling
    all-gather over p blocks; every rank ends with op over all buffers.

    2 log2 p steps (+2 when N is not a power of two); 2(N-1)/N S bytes per rank for N = p.
    """
    f = fold_for(n_ranks, "rabenseifner all-reduce", fold)
    p = f.p
    rows = _fold_step(f, lambda i: range(p), Action.REDUCE)
    rows += _halving(f, lambda i: i)
    rows += _doubling(f, lambda i: i)
    rows += _unfold_step(f, lambda i: range(p))
    return Schedule(Collective.ALL_REDUCE, "rabenseifner", n_ranks, p, make_steps(rows), n_blocks=p)


def recursive_all_reduce(n_ranks: int, *, fold: bool = True) -> Schedule:
    """Recursive doubling all-reduce: log2 p exchanges of the whole buffer, each rank reducing
    what its partner sends; every rank ends with op over all buffers.

    log2 p steps (+2 when N is not a power of two); log2 p * S bytes per rank.
    """
    f = fold_for(n_ranks, "recursive all-reduce", fold)
    rows = _fold_step(f, lambda i: range(1), Action.REDUCE)
    d = 1
    while d < f.p:
        ts = [Transfer(f.real(i), f.real(i ^ d), 0, Action.REDUCE) for i in range(f.p)]
        rows.append((ts, "exchange"))
        d *= 2
    rows += _unfold_step(f, lambda i: range(1))
    return Schedule(Collective.ALL_REDUCE, "recursive", n_ranks, 1, make_steps(rows))


# -- registry entries (sources: the module docstring) --------------------------------------
_MPICH = "Thakur, Rabenseifner & Gropp 2005"
_C = Collective
register(
    Algorithm(_C.ALL_GATHER, "recursive", lambda n, s: recursive_all_gather(n, fold=s.fold),
              power_of_two=True, source=_MPICH + " (recursive doubling)"),
    Algorithm(_C.REDUCE_SCATTER, "recursive", lambda n, s: recursive_reduce_scatter(n, fold=s.fold),
              power_of_two=True, source=_MPICH + " (recursive halving)"),
    Algorithm(_C.ALL_REDUCE, "recursive", lambda n, s: recursive_all_reduce(n, fold=s.fold),
              power_of_two=True, source=_MPICH + " (recursive doubling)"),
    Algorithm(_C.ALL_REDUCE, "rabenseifner", lambda n, s: rabenseifner_all_reduce(n, fold=s.fold),
              power_of_two=True, source="Rabenseifner 2004"),
)
