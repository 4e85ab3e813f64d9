"""The five collectives, their reduce operations, and a numpy reference for each.

Per-rank contract (N ranks, rank r holds ``inputs[r]``; S = element count of the full buffer;
blocks are ``np.array_split(range(S), N)``, so block r has ``S // N`` or ``S // N + 1`` elements):

==============  ======================================  =========================================
collective      before                                  after
==============  ======================================  =========================================
broadcast       root holds x (others: anything)         every rank holds x
reduce          rank r holds x_r (size S)               root holds op(x_0..x_{N-1}); others: unspecified
all-reduce      rank r holds x_r (size S)               every rank holds op(x_0..x_{N-1})
reduce-scatter  rank r holds x_r (size S)               rank r holds block r of op(x_0..x_{N-1})
all-gather      rank r holds x_r (size of block r)      every rank holds concat(x_0..x_{N-1})
==============  ======================================  =========================================

Example, N=2, SUM: all-reduce([1, 2], [10, 20]) -> both [11, 22];
reduce-scatter -> rank 0 [11], rank 1 [22]; all-gather([1], [2]) -> both [1, 2].
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from ringtree.errors import RingtreeError


class Collective(str, Enum):
    """One of the five collectives; the value is its canonical hyphenated name."""

    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"

    @classmethod
    def parse(cls, name: str | Collective) -> Collective:
        """Accept ``all-reduce``, ``all_reduce``, ``allreduce`` (any case)."""
        if isinstance(name, Collective):
            return name
        key = name.strip().lower().replace("_", "-")
        for c in cls:
            if key in (c.value, c.value.replace("-", "")):
                return c
        known = ", ".join(c.value for c in cls)
        raise RingtreeError(f"unknown collective {name!r}: expected one of {known}")

    @property
    def has_root(self) -> bool:
        """Broadcast and reduce have a root rank; the others are symmetric."""
        return self in (Collective.BROADCAST, Collective.REDUCE)

    @property
    def reduces(self) -> bool:
        """Whether the collective combines data with a reduce operation."""
        return self in (Collective.REDUCE, Collective.ALL_REDUCE, Collective.REDUCE_SCATTER)


class ReduceOp(str, Enum):
    """Reduce operations, named as in torch.distributed.

    AVG is SUM followed by a division by N at the end (floor division for integer dtypes).
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"

    @classmethod
    def parse(cls, name: str | ReduceOp) -> ReduceOp:
        """Accept ``sum``, ``SUM``, ``prod``, ``product`` ...; anything else is a RingtreeError."""
        if isinstance(name, ReduceOp):
            return name
        key = name.strip().lower()
        key = {"prod": "product", "mean": "avg"}.get(key, key)
        try:
            return cls(key)
        except ValueError:
            known = ", ".join(o.value for o in cls)
            raise RingtreeError(f"unknown reduce op {name!r}: expected one of {known}") from None

    @property
    def combine(self) -> ReduceOp:
        """The pairwise operation applied along the way (AVG combines as SUM)."""
        return ReduceOp.SUM if self is ReduceOp.AVG else self

    def apply(self, acc: np.ndarray, incoming: np.ndarray) -> None:
        """``acc = acc (op) incoming``, in place (AVG: sum; divide with :meth:`finish`)."""
        ufunc = _UFUNCS[self.combine]
        ufunc(acc, incoming, out=acc)

    def finish(self, reduced: np.ndarray, n_ranks: int) -> np.ndarray:
        """Turn a combined result into the op's result: divides by N for AVG, else unchanged."""
        if self is not ReduceOp.AVG:
            return reduced
        if np.issubdtype(reduced.dtype, np.integer):
            return reduced // n_ranks
        return reduced / reduced.dtype.type(n_ranks)

    def identity(self, dtype: np.dtype | type) -> np.generic:
        """The element e with ``e (op) x == x``: 0, 1, +inf (or the dtype's max), -inf (or min)."""
        dt = np.dtype(dtype)
        op = self.combine
        if op is ReduceOp.SUM:
            return dt.type(0)
        if op is ReduceOp.PRODUCT:
            return dt.type(1)
        if np.issubdtype(dt, np.integer):
            info = np.iinfo(dt)
            return dt.type(info.max if op is ReduceOp.MIN else info.min)
        return dt.type(np.inf if op is ReduceOp.MIN else -np.inf)


_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
}


def block_bounds(count: int, n_blocks: int) -> list[int]:
    """Offsets of ``np.array_split(range(count), n_blocks)``: the first ``count % n`` blocks
    get one element more. Returns ``n_blocks + 1`` offsets, from 0 to ``count``."""
    base, extra = divmod(count, n_blocks)
    bounds = [0]
    for b in range(n_blocks):
        bounds.append(bounds[-1] + base + (1 if b < extra else 0))
    return bounds


def reduce_all(inputs: list[np.ndarray], op: ReduceOp) -> np.ndarray:
    """op over all ranks' arrays, in rank order: the reference reduction."""
    acc = np.array(inputs[0], copy=True)
    for x in inputs[1:]:
        op.apply(acc, x)
    return op.finish(acc, len(inputs))


def reference(
    collective: Collective,
    inputs: list[np.ndarray],
    op: ReduceOp = ReduceOp.SUM,
    root: int = 0,
) -> list[np.ndarray | None]:
    """What every rank holds after ``collective`` (None where the result is unspecified).

    ``inputs[r]`` is rank r's input as in the module table (for all-gather, block r only).
    """
    n = len(inputs)
    if collective is Collective.BROADCAST:
        return [np.array(inputs[root], copy=True) for _ in range(n)]
    if collective is Collective.ALL_GATHER:
        full = np.concatenate(inputs)
        return [full.copy() for _ in range(n)]
    reduced = reduce_all(inputs, op)
    if collective is Collective.REDUCE:
        return [reduced if r == root else None for r in range(n)]
    if collective is Collective.ALL_REDUCE:
        return [reduced.copy() for _ in range(n)]
    bounds = block_bounds(reduced.size, n)
    return [reduced[bounds[r] : bounds[r + 1]].copy() for r in range(n)]
