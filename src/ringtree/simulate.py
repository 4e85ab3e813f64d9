"""Run a Schedule in one process: symbolically (who has contributed to each chunk) and on
numpy arrays. The numeric simulator is the reference every other interpreter is tested against.

Both read where a rank's data starts and where its result must be from the schedule's layout
(``Schedule.input_chunks``, ``Schedule.output_chunks``), so one interpreter serves every
collective. The barrier carries no data: what it promises is
knowledge -- every rank has heard, through some chain of messages, from every other before it
leaves -- so it is checked on its one chunk as a set of ranks heard from, merged by every
message whatever its action.
"""

from __future__ import annotations

import numpy as np

from ringtree.collectives import Collective, ReduceOp, Splits, block_sizes
from ringtree.schedule import Action, Schedule, ScheduleError, Size

# A rank's knowledge of one chunk: a bit mask of the ranks whose input it contains.
Holdings = list[list[int]]


def initial_holdings(s: Schedule) -> Holdings:
    """Per rank and chunk, the contributor mask before the first step: for a reduction, every
    rank's own input (1 << r); for the collectives that move data, the chunks a rank brings,
    complete; for the barrier, each rank has heard from itself."""
    n, full = s.n_ranks, (1 << s.n_ranks) - 1
    if s.collective.reduces or s.collective is Collective.BARRIER:
        return [[1 << r] * s.n_chunks for r in range(n)]
    held = [[0] * s.n_chunks for _ in range(n)]
    for r in range(n):
        for c in s.input_chunks(r):
            held[r][c] = full
    return held


def track(s: Schedule) -> list[Holdings]:
    """Contributor masks after each step (``len == n_steps``).

    Raises ScheduleError when a reduce would count some rank's input twice, or when a rank
    forwards a chunk it holds nothing of.
    """
    held = initial_holdings(s)
    merge = s.collective is Collective.BARRIER  # knowledge: hearing twice is harmless
    history = []
    for i, step in enumerate(s.steps):
        sent = [(t, held[t.src][t.chunk]) for t in step.transfers]
        for t, mask in sent:
            if mask == 0:
                raise ScheduleError(
                    f"step {i + 1}: rank {t.src} sends chunk {t.chunk} before it holds any of it"
                )
            if merge:
                held[t.dst][t.chunk] |= mask
            elif t.action is Action.COPY:
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
    """Raise ScheduleError unless, at the end, every rank holds what the collective promises
    (its output chunks complete; for the barrier, word from every rank)."""
    held = track(s)[-1] if s.steps else initial_holdings(s)
    full = (1 << s.n_ranks) - 1
    c = s.collective
    for r in range(s.n_ranks):
        missing = [k for k in s.output_chunks(r) if held[r][k] != full]
        if missing:
            raise ScheduleError(
                f"{s.algorithm} {c.value}: rank {r} ends without complete chunks {missing[:8]}"
            )


def layout_size(s: Schedule, inputs: list[np.ndarray], splits: Splits | None = None) -> Size:
    """The payload that ``inputs`` (shaped as for :func:`ringtree.collectives.reference`) lay
    out: the buffer's element count, or the all-to-all's Splits (``splits``, else every rank's
    input cut like np.array_split)."""
    n, col = s.n_ranks, s.collective
    if col is Collective.ALL_TO_ALL:
        return splits or Splits.of([block_sizes(int(x.size), n) for x in inputs])
    return col.layout.count_of_inputs([int(x.size) for x in inputs], s.root or 0)


def simulate(
    s: Schedule,
    inputs: list[np.ndarray],
    op: ReduceOp = ReduceOp.SUM,
    splits: Splits | None = None,
) -> list[np.ndarray | None]:
    """Run ``s`` on per-rank numpy arrays; returns what each rank holds after the collective,
    in the shape of :func:`ringtree.collectives.reference` (None where unspecified).

    Every rank gets a buffer of the whole layout; a rank's input fills the chunks it brings
    and its result is the chunks it must end with, side by side. ``splits``: an all-to-all's
    block sizes (default: each input cut like np.array_split). Inputs are not modified.
    Cost: one copy of every transferred chunk.
    """
    n, col = s.n_ranks, s.collective
    if len(inputs) != n:
        raise ValueError(f"{len(inputs)} inputs for {n} ranks")
    bounds = s.chunk_bounds(layout_size(s, inputs, splits))
    buffers = []
    for r in range(n):
        x = np.asarray(inputs[r]).reshape(-1)
        if col is Collective.BARRIER:  # nothing is read: its token is empty
            x = x[:0]
        buf = np.zeros(bounds[-1], dtype=x.dtype)
        mine = s.input_chunks(r)
        want = sum(bounds[c + 1] - bounds[c] for c in mine)
        if x.size != want and mine:
            raise ValueError(f"{col.value}: rank {r} holds {x.size} elements, its input has {want}")
        at = 0
        for c in mine:
            size = bounds[c + 1] - bounds[c]
            buf[bounds[c] : bounds[c + 1]] = x[at : at + size]
            at += size
        buffers.append(buf)
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
    out: list[np.ndarray | None] = []
    for r in range(n):
        if not col.layout.holds_result(r, s.root or 0):
            out.append(None)
            continue
        parts = [buffers[r][bounds[c] : bounds[c + 1]] for c in s.output_chunks(r)]
        result = np.concatenate(parts) if parts else buffers[r][:0].copy()
        out.append(op.finish(result, n) if col.reduces else result)
    return out
