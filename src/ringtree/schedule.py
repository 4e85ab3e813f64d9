"""An algorithm as data: a Schedule is a list of steps, each a set of simultaneous transfers.

Semantics of one step: every transfer reads its source chunk as it was *before* the step,
then writes it to the destination -- ``copy`` overwrites, ``reduce`` combines with the op.
So two transfers of one step never see each other's results, as on a real network where a
step's messages are in flight together.

Chunk layout: the buffer of ``count`` elements is split into ``n_blocks`` blocks
(``collectives.block_bounds``), and each block into ``n_chunks // n_blocks`` chunks the same
way. Collectives whose input or result is per block (reduce-scatter, all-gather, gather,
scatter) use ``n_blocks = N`` so that chunk boundaries never straddle rank r's block.

All-to-all moves N x N distinct blocks: block (s, d) = s N + d goes from rank s to rank d, so
its layout has ``n_blocks = N * N``, laid out row by row, and its payload is either a count
(every rank sends ``count`` elements, cut like np.array_split: block (s, d) has the size of
block d of ``count``) or a :class:`~ringtree.collectives.Splits` (block (s, d) has
``rows[s][d]`` elements). Every method below that takes a ``count`` takes such a Splits too.

Where chunks live: one index space (the layout above) serves every rank, and each rank's
buffers hold some of its chunks, side by side in layout order -- :meth:`Schedule.input_chunks`
(what a rank brings) and :meth:`Schedule.output_chunks` (what it must end with). Most
collectives use the whole layout on every rank; all-gather and gather bring block r,
reduce-scatter and scatter end with it; an all-to-all rank brings row r (blocks (r, d)) and
ends with column r (blocks (s, r)), which is why its output is not one range of the layout.

A Schedule does not know the element count: bytes are counted for a given count and item size,
so one schedule serves every payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from itertools import accumulate

from ringtree.collectives import Collective, Splits, block_bounds, block_sizes
from ringtree.errors import RingtreeError

#: A payload: an element count (the fixed layout rule) or, for all-to-all, its Splits.
Size = int | Splits


class ScheduleError(RingtreeError):
    """A schedule that is not well formed (bad rank, chunk, or conflicting writes)."""


class Action(str, Enum):
    """What the destination does with a received chunk."""

    COPY = "copy"
    REDUCE = "reduce"


@dataclass(frozen=True, slots=True)
class Transfer:
    """``src`` sends chunk ``chunk`` to ``dst``, which copies it or reduces it into its own."""

    src: int
    dst: int
    chunk: int
    action: Action = Action.COPY


@dataclass(frozen=True, slots=True)
class Step:
    """Transfers that happen at the same time; ``phase`` labels it (e.g. ``reduce-scatter``)."""

    transfers: tuple[Transfer, ...]
    phase: str = ""


@dataclass(frozen=True)
class Schedule:
    """A whole algorithm for one collective on ``n_ranks`` ranks.

    Built by the functions in :mod:`ringtree.algorithms`; read by the cost model, the
    simulator, the executor and the renderers. Validated on construction.
    """

    collective: Collective
    algorithm: str
    n_ranks: int
    n_chunks: int
    steps: tuple[Step, ...]
    root: int | None = None
    n_blocks: int = 1
    ranks_per_node: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    # -- composition ---------------------------------------------------------------------
    def then(self, other: Schedule, *, collective: Collective, algorithm: str) -> Schedule:
        """This schedule's steps followed by ``other``'s (same ranks and chunk layout)."""
        if (self.n_ranks, self.n_chunks, self.n_blocks) != (
            other.n_ranks,
            other.n_chunks,
            other.n_blocks,
        ):
            raise ScheduleError(
                f"cannot compose {self.algorithm} and {other.algorithm}: ranks/chunks/blocks "
                f"differ ({self.n_ranks}/{self.n_chunks}/{self.n_blocks} vs "
                f"{other.n_ranks}/{other.n_chunks}/{other.n_blocks})"
            )
        return Schedule(
            collective=collective,
            algorithm=algorithm,
            n_ranks=self.n_ranks,
            n_chunks=self.n_chunks,
            steps=self.steps + other.steps,
            root=self.root if self.root is not None else other.root,
            n_blocks=self.n_blocks,
            ranks_per_node=self.ranks_per_node or other.ranks_per_node,
        )

    # -- layout --------------------------------------------------------------------------
    @property
    def n_steps(self) -> int:
        """Number of steps: the latency term counts one alpha per step."""
        return len(self.steps)

    def block_sizes(self, count: Size) -> list[int]:
        """Elements in each block for a payload of ``count`` (module doc)."""
        if isinstance(count, Splits):
            if self.collective is not Collective.ALL_TO_ALL or count.n_ranks != self.n_ranks:
                raise ScheduleError(
                    f"splits of {count.n_ranks} ranks given to a {self.collective.value} "
                    f"schedule on {self.n_ranks}: only all-to-all takes splits, N x N"
                )
            return count.flat()
        if self.collective is Collective.ALL_TO_ALL:
            return block_sizes(count, self.n_ranks) * self.n_ranks
        return block_sizes(count, self.n_blocks)

    def chunk_bounds(self, count: Size) -> list[int]:
        """Element offsets of the ``n_chunks`` chunks in the layout of ``count``."""
        per_block = self.n_chunks // self.n_blocks
        if per_block == 1:  # a chunk per block (every all-to-all: N x N of them)
            return [0, *accumulate(self.block_sizes(count))]
        bounds = [0]
        for size in self.block_sizes(count):
            start = bounds[-1]
            inner = block_bounds(size, per_block)
            bounds.extend(start + off for off in inner[1:])
        return bounds

    def chunk_sizes(self, count: Size) -> list[int]:
        """Elements in each chunk for a payload of ``count``."""
        b = self.chunk_bounds(count)
        return [b[c + 1] - b[c] for c in range(self.n_chunks)]

    def block_chunks(self, block: int) -> range:
        """The chunks that make up block ``block`` (rank ``block``'s share for RS/AG)."""
        per_block = self.n_chunks // self.n_blocks
        return range(block * per_block, (block + 1) * per_block)

    def input_chunks(self, rank: int) -> list[int]:
        """The chunks ``rank`` brings, in the order its input buffer holds them: its block
        (all-gather, gather), its row (all-to-all), everything at the root and nothing
        elsewhere (broadcast, scatter), else the whole layout (the barrier: its token)."""
        c, n = self.collective, self.n_ranks
        if c in (Collective.ALL_GATHER, Collective.GATHER):
            return list(self.block_chunks(rank))
        if c is Collective.ALL_TO_ALL:
            return [k for d in range(n) for k in self.block_chunks(rank * n + d)]
        if c in (Collective.BROADCAST, Collective.SCATTER) and rank != self.root:
            return []
        return list(range(self.n_chunks))

    def output_chunks(self, rank: int) -> list[int]:
        """The chunks ``rank`` must hold at the end, in the order its output holds them: its
        block (reduce-scatter, scatter), its column (all-to-all), everything at the root and
        nothing elsewhere (reduce, gather), else the whole layout (the barrier: its token)."""
        c, n = self.collective, self.n_ranks
        if c in (Collective.REDUCE_SCATTER, Collective.SCATTER):
            return list(self.block_chunks(rank))
        if c is Collective.ALL_TO_ALL:
            return [k for s in range(n) for k in self.block_chunks(s * n + rank)]
        if c in (Collective.REDUCE, Collective.GATHER) and rank != self.root:
            return []
        return list(range(self.n_chunks))

    # -- counting ------------------------------------------------------------------------
    @cached_property
    def _sends(self) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
        """Per rank: the chunks it sends and the chunks it receives, over all steps."""
        sent: list[list[int]] = [[] for _ in range(self.n_ranks)]
        recv: list[list[int]] = [[] for _ in range(self.n_ranks)]
        for step in self.steps:
            for t in step.transfers:
                sent[t.src].append(t.chunk)
                recv[t.dst].append(t.chunk)
        return tuple(map(tuple, sent)), tuple(map(tuple, recv))

    def bytes_sent(self, rank: int, count: Size, itemsize: int) -> int:
        """Bytes that ``rank`` sends over the whole schedule, for ``count`` elements."""
        sizes = self.chunk_sizes(count)
        return sum(sizes[c] for c in self._sends[0][rank]) * itemsize

    def bytes_sent_per_rank(self, count: Size, itemsize: int) -> list[int]:
        """:meth:`bytes_sent` of every rank (the chunk sizes worked out once)."""
        sizes = self.chunk_sizes(count)
        return [sum(sizes[c] for c in chunks) * itemsize for chunks in self._sends[0]]

    def bytes_received(self, rank: int, count: Size, itemsize: int) -> int:
        """Bytes that ``rank`` receives over the whole schedule, for ``count`` elements."""
        sizes = self.chunk_sizes(count)
        return sum(sizes[c] for c in self._sends[1][rank]) * itemsize

    def step_bytes(self, count: Size, itemsize: int) -> list[int]:
        """Per step, the most bytes any rank sends or receives in it (the step's bandwidth
        term on full-duplex links: a step lasts alpha + step_bytes / bandwidth)."""
        sizes = self.chunk_sizes(count)
        out = []
        for step in self.steps:
            sent: dict[int, int] = {}
            recv: dict[int, int] = {}
            for t in step.transfers:
                sent[t.src] = sent.get(t.src, 0) + sizes[t.chunk]
                recv[t.dst] = recv.get(t.dst, 0) + sizes[t.chunk]
            out.append(max([0, *sent.values(), *recv.values()]) * itemsize)
        return out

    def transfers(self) -> Iterator[tuple[int, Transfer]]:
        """Every transfer with the index of its step."""
        for i, step in enumerate(self.steps):
            for t in step.transfers:
                yield i, t


def make_steps(rows: Iterable[tuple[Iterable[Transfer], str]]) -> tuple[Step, ...]:
    """Steps from ``(transfers, phase)`` pairs, dropping steps with no transfer."""
    steps = []
    for transfers, phase in rows:
        ts = tuple(transfers)
        if ts:
            steps.append(Step(ts, phase))
    return tuple(steps)


def _validate(s: Schedule) -> None:
    if s.n_ranks < 1:
        raise ScheduleError(f"n_ranks must be >= 1, got {s.n_ranks}")
    if s.n_chunks < 1 or s.n_blocks < 1 or s.n_chunks % s.n_blocks:
        raise ScheduleError(
            f"n_chunks ({s.n_chunks}) must be a positive multiple of n_blocks ({s.n_blocks})"
        )
    if s.collective.has_root and (s.root is None or not 0 <= s.root < s.n_ranks):
        raise ScheduleError(f"root {s.root} is not a rank of 0..{s.n_ranks - 1}")
    blocks = {Collective.ALL_TO_ALL: s.n_ranks**2, Collective.REDUCE_SCATTER: s.n_ranks,
              Collective.ALL_GATHER: s.n_ranks, Collective.GATHER: s.n_ranks,
              Collective.SCATTER: s.n_ranks}.get(s.collective)
    if blocks is not None and s.n_blocks != blocks:
        raise ScheduleError(
            f"a {s.collective.value} schedule on {s.n_ranks} ranks has {blocks} blocks, "
            f"not {s.n_blocks}"
        )
    for i, step in enumerate(s.steps):
        written: set[tuple[int, int]] = set()
        for t in step.transfers:
            for who, rank in (("source", t.src), ("destination", t.dst)):
                if not 0 <= rank < s.n_ranks:
                    raise ScheduleError(
                        f"step {i + 1}: {who} rank {rank} does not exist (ranks 0..{s.n_ranks - 1})"
                    )
            if t.src == t.dst:
                raise ScheduleError(f"step {i + 1}: rank {t.src} sends to itself")
            if not 0 <= t.chunk < s.n_chunks:
                raise ScheduleError(
                    f"step {i + 1}: chunk {t.chunk} out of range (chunks 0..{s.n_chunks - 1})"
                )
            key = (t.dst, t.chunk)
            if key in written:
                raise ScheduleError(
                    f"step {i + 1}: two writes to chunk {t.chunk} of rank {t.dst} in one step"
                )
            written.add(key)
