"""Run a Schedule in one process: symbolically (who has contributed to each chunk) and on
numpy arrays. The numeric simulator is the reference every other interpreter is tested against.
"""

from __future__ import annotations

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_bounds
from ringtree.schedule import Action, Schedule, ScheduleError

# A rank's knowledge of one chunk: a bit mask of the ranks whose input it contains.
Holdings = list[list[int]]


def initial_holdings(s: Schedule) -> Holdings:
    """Per rank and chunk, the contributor mask before the first step."""
    n, full = s.n_ranks, (1 << s.n_ranks) - 1
    if s.collective is Collective.BROADCAST:
        return [[full if r == s.root else 0] * s.n_chunks for r in range(n)]
    if s.collective is Collective.ALL_GATHER:
        held = [[0] * s.n_chunks for _ in range(n)]
        for r in range(n):
            for c in s.block_chunks(r):
                held[r][c] = full
        return held
    return [[1 << r] * s.n_chunks for r in range(n)]


def track(s: Schedule) -> list[Holdings]:
    """Contributor masks after each step (``len == n_steps``).

    Raises ScheduleError when a reduce would count some rank's input twice, or when a rank
    forwards a chunk it holds nothing of.
    """
    held = initial_holdings(s)
    history = []
    for i, step in enumerate(s.steps):
        sent = [(t, held[t.src][t.chunk]) for t in step.transfers]
        for t, mask in sent:
            if mask == 0:
                raise ScheduleError(
                    f"step {i + 1}: rank {t.src} sends chunk {t.chunk} before it holds any of it"
                )
            if t.action is Action.COPY:
                held[t.dst][t.chunk] = mask
            else:
                if held[t.dst][t.chunk] & mask:
                    raise ScheduleError(
                        f"step {i + 1}: rank {t.dst} would count an input twice in chunk {t.chunk}"
                    )
                held[t.dst][t.chunk] |= mask
        history.append([row[:] for row in held])
    return history


def complete_chunks(s: Schedule, held: Holdings) -> list[list[int]]:
    """Per rank, the chunks it holds complete (fully reduced, or fully gathered)."""
    full = (1 << s.n_ranks) - 1
    return [[c for c, m in enumerate(row) if m == full] for row in held]


def verify(s: Schedule) -> None:
    """Raise ScheduleError unless, at the end, every rank holds what the collective promises."""
    held = track(s)[-1] if s.steps else initial_holdings(s)
    full = (1 << s.n_ranks) - 1
    c = s.collective
    for r in range(s.n_ranks):
        if c is Collective.REDUCE and r != s.root:
            continue
        wanted = s.block_chunks(r) if c is Collective.REDUCE_SCATTER else range(s.n_chunks)
        missing = [k for k in wanted if held[r][k] != full]
        if missing:
            raise ScheduleError(
                f"{s.algorithm} {c.value}: rank {r} ends without complete chunks {missing[:8]}"
            )


def simulate(
    s: Schedule, inputs: list[np.ndarray], op: ReduceOp = ReduceOp.SUM
) -> list[np.ndarray | None]:
    """Run ``s`` on per-rank numpy arrays; returns what each rank holds after the collective,
    in the shape of :func:`ringtree.collectives.reference` (None where unspecified).

    Inputs are not modified. Cost: one copy of every transferred chunk.
    """
    n, col = s.n_ranks, s.collective
    if len(inputs) != n:
        raise ValueError(f"{len(inputs)} inputs for {n} ranks")
    if col is Collective.ALL_GATHER:
        count = sum(int(x.size) for x in inputs)
        expect = block_bounds(count, n)
        buffers = []
        for r in range(n):
            if inputs[r].size != expect[r + 1] - expect[r]:
                raise ValueError(
                    f"all-gather: rank {r} holds {inputs[r].size} elements, block {r} of "
                    f"{count} has {expect[r + 1] - expect[r]}"
                )
            buf = np.zeros(count, dtype=inputs[r].dtype)
            buf[expect[r] : expect[r + 1]] = inputs[r]
            buffers.append(buf)
    else:
        buffers = [np.array(x, copy=True).reshape(-1) for x in inputs]
        count = buffers[0].size
    bounds = s.chunk_bounds(count)
    for step in s.steps:
        payloads = [
            buffers[t.src][bounds[t.chunk] : bounds[t.chunk + 1]].copy() for t in step.transfers
        ]
        for t, data in zip(step.transfers, payloads, strict=True):
            view = buffers[t.dst][bounds[t.chunk] : bounds[t.chunk + 1]]
            if t.action is Action.COPY:
                view[...] = data
            else:
                op.apply(view, data)
    if col is Collective.BROADCAST:
        return buffers
    if col is Collective.ALL_GATHER:
        return buffers
    if col is Collective.REDUCE:
        return [op.finish(buffers[r], n) if r == s.root else None for r in range(n)]
    if col is Collective.ALL_REDUCE:
        return [op.finish(b, n) for b in buffers]
    outer = block_bounds(count, n)
    return [op.finish(buffers[r][outer[r] : outer[r + 1]], n) for r in range(n)]
