"""The collectives, their reduce operations, and a numpy reference for each.

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
all-to-all      rank s holds x_s: N blocks, block d     rank d holds concat over s of block d of
                for rank d (sizes: :class:`Splits`)     x_s (block s from rank s)
gather          rank r holds x_r (size of block r)      root holds concat(x_0..x_{N-1}); others:
                                                        unspecified
scatter         root holds x (size S; others: nothing)  rank r holds block r of x
barrier         nothing                                 nothing; no rank leaves before every rank
                                                        has entered
==============  ======================================  =========================================

Example, N=2, SUM: all-reduce([1, 2], [10, 20]) -> both [11, 22];
reduce-scatter -> rank 0 [11], rank 1 [22]; all-gather([1], [2]) -> both [1, 2];
all-to-all([1, 2], [10, 20]) -> rank 0 [1, 10], rank 1 [2, 20] (the blocks transposed);
gather([1], [2]) to root 0 -> rank 0 [1, 2]; scatter([1, 2]) from root 0 -> [1] and [2].

Where each rank's buffers sit in that layout, how many elements each holds and which blocks
must be equal is :class:`Layout` (``Collective.ALL_GATHER.layout``), the one statement the
engine, the local runner, the engines' own calls, the bench and the tests read.

All-to-all's blocks need not be equal: ``Splits.rows[s][d]`` elements go from rank s to rank
d (torch's ``input_split_sizes`` of rank s are row s, its ``output_split_sizes`` column s).
Without splits every rank cuts its own input like np.array_split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ringtree.errors import RingtreeError, RingtreeTypeError


class Collective(str, Enum):
    """One of the collectives; the value is its canonical hyphenated name."""

    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"
    GATHER = "gather"
    SCATTER = "scatter"
    BARRIER = "barrier"

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
        """Broadcast, reduce, gather and scatter have a root rank; the others are symmetric."""
        return self in _ROOTED

    @property
    def reduces(self) -> bool:
        """Whether the collective combines data with a reduce operation."""
        return self in (Collective.REDUCE, Collective.ALL_REDUCE, Collective.REDUCE_SCATTER)

    @property
    def layout(self) -> Layout:
        """Where its data sits on each rank (:class:`Layout`)."""
        return LAYOUTS[self]


_ROOTED = (Collective.BROADCAST, Collective.REDUCE, Collective.GATHER, Collective.SCATTER)


class ReduceOp(str, Enum):
    """Reduce operations, named as in torch.distributed.

    AVG is SUM followed by a division by N at the end (floor division for integer dtypes).
    BAND, BOR, BXOR: bitwise and, or, exclusive or, of integer (and bool) dtypes only, as
    torch's gloo and MPI take them.
    """

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    AVG = "avg"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    @property
    def bitwise(self) -> bool:
        """BAND, BOR and BXOR: only for integer and bool dtypes."""
        return self in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR)

    def takes(self, dtype: np.dtype | type) -> bool:
        """Whether the op reduces numpy ``dtype`` (the bitwise ones: integers and bool)."""
        return not self.bitwise or np.dtype(dtype).kind in "iub"

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
            raise RingtreeTypeError(f"unknown reduce op {name!r}: expected one of {known}"
                                    ) from None

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
        if op is ReduceOp.BAND:  # every bit set
            return dt.type(True) if dt.kind == "b" else np.invert(dt.type(0))
        if op.bitwise:
            return dt.type(0)
        if np.issubdtype(dt, np.integer):
            info = np.iinfo(dt)
            return dt.type(info.max if op is ReduceOp.MIN else info.min)
        return dt.type(np.inf if op is ReduceOp.MIN else -np.inf)


_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
    ReduceOp.BAND: np.bitwise_and,
    ReduceOp.BOR: np.bitwise_or,
    ReduceOp.BXOR: np.bitwise_xor,
}


def block_bounds(count: int, n_blocks: int) -> list[int]:
    """Offsets of ``np.array_split(range(count), n_blocks)``: the first ``count % n`` blocks
    get one element more. Returns ``n_blocks + 1`` offsets, from 0 to ``count``."""
    base, extra = divmod(count, n_blocks)
    bounds = [0]
    for b in range(n_blocks):
        bounds.append(bounds[-1] + base + (1 if b < extra else 0))
    return bounds


def bus_factor(collective: Collective, n: int) -> float:
    """nccl-tests' busbw / algbw for N ranks: all-reduce 2(N-1)/N; all-gather, reduce-scatter,
    all-to-all, gather and scatter (N-1)/N; broadcast and reduce 1; the barrier 0, it moves
    no data (nccl-tests' PERFORMANCE.md, alltoall.cu, gather.cu, scatter.cu)."""
    if collective is Collective.ALL_REDUCE:
        return 2 * (n - 1) / n
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL,
                      Collective.GATHER, Collective.SCATTER):
        return (n - 1) / n
    return 0.0 if collective is Collective.BARRIER else 1.0


def block_sizes(count: int, n_blocks: int) -> list[int]:
    """Sizes of ``np.array_split(range(count), n_blocks)``'s blocks."""
    base, extra = divmod(count, n_blocks)
    return [base + (1 if b < extra else 0) for b in range(n_blocks)]


class Part(str, Enum):
    """What one buffer of rank r holds, in a layout of S elements over N ranks."""

    WHOLE = "whole"  #: all S elements
    BLOCK = "block"  #: block r of the S (np.array_split)
    COLUMN = "column"  #: block r of every rank's S, N blocks side by side (all-to-all)
    SAME = "same"  #: the input buffer itself (in place)
    NONE = "none"  #: nothing the collective reads or writes (the barrier's token)


@dataclass(frozen=True)
class Layout:
    """A collective's buffers on every rank, for a layout of ``count`` = S elements over N
    ranks (the module table; S is the whole buffer nccl-tests prints: the all-reduce buffer,
    the reduce-scatter input, the all-gather output, one rank's all-to-all input, the root's
    gather output or scatter input). The engine validates a call's buffers with it, and the
    local runner, the engines' own calls, the bench and the tests make their buffers from it.

    ``root_only``: the buffer (``"input"`` or ``"output"``) that only the root has (given
    elsewhere, it is not read). ``equal_blocks``: S must be a multiple of N (torch's gather
    and scatter take N tensors of one size). ``separate``: the output may not share memory
    with the input. ``rooted_result``: only the root's result is specified.
    """

    input: Part
    output: Part
    root_only: str | None = None
    equal_blocks: bool = False
    separate: bool = False
    rooted_result: bool = False

    @property
    def blocks(self) -> bool:
        """Whether a buffer is cut into N blocks (one per rank)."""
        return Part.BLOCK in (self.input, self.output) or self.output is Part.COLUMN

    @property
    def own_block_in_output(self) -> bool:
        """Whether the input is this rank's block of the output, which may be that very block
        (torch's in-place all-gather)."""
        return self.input is Part.BLOCK and self.output is Part.WHOLE and not self.root_only

    def count(self, elements: int, n: int) -> int:
        """The S a run of ``elements`` takes: rounded down to a multiple of N where blocks
        are equal, none for the barrier, else ``elements``."""
        if self.input is Part.NONE:
            return 0
        return elements - elements % n if self.equal_blocks else elements

    def elements(self, part: Part, count: int, n: int, rank: int) -> int:
        """How many elements ``part`` holds on ``rank`` (SAME: the input's)."""
        if part is Part.SAME:
            part = self.input
        if part is Part.WHOLE:
            return count
        if part is Part.NONE:
            return 0
        block = block_sizes(count, n)[rank]
        return block if part is Part.BLOCK else n * block

    def input_elems(self, count: int, n: int, rank: int, root: int = 0) -> int | None:
        """The size of ``rank``'s input (None: it has none, the scatter off its root)."""
        if self.root_only == "input" and rank != root:
            return None
        return self.elements(self.input, count, n, rank)

    def output_elems(self, count: int, n: int, rank: int, root: int = 0) -> int | None:
        """The size of ``rank``'s output buffer (None: in place, or none on this rank)."""
        if self.output is Part.SAME or (self.root_only == "output" and rank != root):
            return None
        return self.elements(self.output, count, n, rank)

    def span(self, count: int, n: int, rank: int) -> tuple[int, int]:
        """The elements of the layout ``rank``'s input holds: its block, or all of them."""
        if self.input is not Part.BLOCK:
            return 0, count
        b = block_bounds(count, n)
        return b[rank], b[rank + 1]

    def count_of(self, n_in: int, n_out: int, n: int) -> int:
        """The S that a rank's buffers of ``n_in`` and ``n_out`` elements say (the whole one,
        or N of an equal block)."""
        if self.equal_blocks:
            return n * (n_in if self.input is Part.BLOCK else n_out)
        return n_out if self.input is Part.BLOCK else n_in

    def count_of_inputs(self, sizes: Sequence[int], root: int = 0) -> int:
        """The S of every rank's input, as :func:`reference` takes them (``sizes[r]``; the
        barrier reads none)."""
        if self.input is Part.NONE:
            return 0
        if self.input is Part.BLOCK:
            return sum(sizes)
        return sizes[root] if self.root_only == "input" else sizes[0]

    def holds_result(self, rank: int, root: int = 0) -> bool:
        """Whether ``rank``'s result is specified (not a reduce's or a gather's non-root)."""
        return not self.rooted_result or rank == root


#: Every collective's layout (the module table).
LAYOUTS: dict[Collective, Layout] = {
    Collective.ALL_REDUCE: Layout(Part.WHOLE, Part.SAME),
    Collective.BROADCAST: Layout(Part.WHOLE, Part.SAME),
    Collective.REDUCE: Layout(Part.WHOLE, Part.SAME, rooted_result=True),
    Collective.REDUCE_SCATTER: Layout(Part.WHOLE, Part.BLOCK, separate=True),
    Collective.ALL_GATHER: Layout(Part.BLOCK, Part.WHOLE),
    Collective.ALL_TO_ALL: Layout(Part.WHOLE, Part.COLUMN, separate=True),
    Collective.GATHER: Layout(Part.BLOCK, Part.WHOLE, "output", equal_blocks=True,
                              rooted_result=True),
    Collective.SCATTER: Layout(Part.WHOLE, Part.BLOCK, "input", equal_blocks=True),
    Collective.BARRIER: Layout(Part.NONE, Part.SAME),
}


@dataclass(frozen=True)
class Splits:
    """The block sizes of an all-to-all: ``rows[s][d]`` elements go from rank s to rank d.

    Rank s's input is row s (its blocks for d = 0..N-1, side by side), rank d's output is
    column d (the blocks from s = 0..N-1). Example, N=2: ``Splits(((1, 3), (2, 0)))``: rank 0
    sends 1 element to itself and 3 to rank 1; rank 1 sends 2 to rank 0 and none to itself;
    rank 0 ends with 1 + 2 elements, rank 1 with 3 + 0.
    """

    rows: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.rows)
        if n < 1 or any(len(row) != n for row in self.rows):
            raise RingtreeError(
                f"all-to-all splits must be N rows of N sizes, got rows of "
                f"{[len(row) for row in self.rows]} for N={n}"
            )
        bad = [v for row in self.rows for v in row if not isinstance(v, int | np.integer) or v < 0]
        if bad:
            raise RingtreeError(
                f"all-to-all split sizes must be whole numbers >= 0, got {bad[0]!r}"
            )

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]]) -> Splits:
        """Splits from any nested sequence of sizes (RingtreeError unless N x N, >= 0)."""
        return cls(tuple(tuple(int(v) for v in row) for row in rows))

    @classmethod
    def seen_by(cls, rank: int, sent: Sequence[int], received: Sequence[int]) -> Splits:
        """What ``rank`` knows of a call: its row (``sent``) and its column (``received``);
        every other pair's size is taken as 0. Enough for algorithms that send every block
        straight to its destination (a rank moves only its own blocks)."""
        n = len(sent)
        rows = [[0] * n for _ in range(n)]
        rows[rank] = [int(v) for v in sent]
        for s, v in enumerate(received):
            rows[s][rank] = int(v)
        return cls.of(rows)

    @property
    def n_ranks(self) -> int:
        """N."""
        return len(self.rows)

    def sent(self, rank: int) -> tuple[int, ...]:
        """Row ``rank``: what it sends each rank (its input's blocks)."""
        return self.rows[rank]

    def received(self, rank: int) -> tuple[int, ...]:
        """Column ``rank``: what it receives from each rank (its output's blocks)."""
        return tuple(row[rank] for row in self.rows)

    def flat(self) -> list[int]:
        """Every block's size, row by row (block (s, d) at index s N + d)."""
        return [v for row in self.rows for v in row]


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
    splits: Splits | None = None,
) -> list[np.ndarray | None]:
    """What every rank holds after ``collective`` (None where the result is unspecified).

    ``inputs[r]`` is rank r's input as in the module table (for all-gather and gather, block r
    only; for scatter, only the root's counts; for barrier, nothing is read). ``splits``: the
    all-to-all's block sizes (default: every rank's input cut like np.array_split).
    """
    n = len(inputs)
    if collective is Collective.BROADCAST:
        return [np.array(inputs[root], copy=True) for _ in range(n)]
    if collective is Collective.ALL_GATHER:
        full = np.concatenate(inputs)
        return [full.copy() for _ in range(n)]
    if collective is Collective.GATHER:
        return [np.concatenate(inputs) if r == root else None for r in range(n)]
    if collective is Collective.SCATTER:
        b = block_bounds(inputs[root].size, n)
        return [np.array(inputs[root][b[r] : b[r + 1]], copy=True) for r in range(n)]
    if collective is Collective.BARRIER:
        return [np.empty(0, dtype=x.dtype) for x in inputs]
    if collective is Collective.ALL_TO_ALL:
        sp = splits or Splits.of([block_sizes(x.size, n) for x in inputs])
        parts = []
        for s, x in enumerate(inputs):
            cut = np.cumsum([0, *sp.sent(s)])
            if cut[-1] != x.size:
                raise ValueError(
                    f"all-to-all: rank {s} holds {x.size} elements, splits say {cut[-1]}"
                )
            parts.append([x[cut[d] : cut[d + 1]] for d in range(n)])
        return [np.concatenate([parts[s][d] for s in range(n)]) for d in range(n)]
    reduced = reduce_all(inputs, op)
    if collective is Collective.REDUCE:
        return [reduced if r == root else None for r in range(n)]
    if collective is Collective.ALL_REDUCE:
        return [reduced.copy() for _ in range(n)]
    bounds = block_bounds(reduced.size, n)
    return [reduced[bounds[r] : bounds[r + 1]].copy() for r in range(n)]
