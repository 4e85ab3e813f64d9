"""Pipelined schedules described by streams: an edge that carries one chunk per step.

A :class:`Stream` ``src -> dst`` with offset ``o`` on block ``b`` carries chunk ``j`` of that
block at step ``o + j`` (j = 0..C-1). Trees pipelined over C chunks are a handful of streams
per rank: a rank's up-link to its parent, and one down-link per child. The offsets encode the
dependencies (a rank forwards chunk j only after it has received chunk j) and the schedule
rule that a rank receives at most one copy of a chunk per step (two children of one parent
get different offsets).

The cost model's closed forms read the same streams (:mod:`ringtree.cost.forms.pipeline`),
so a tree of thousands of ranks is priced without listing its transfers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, Transfer, make_steps


@dataclass(frozen=True, slots=True)
class Stream:
    """``src`` sends chunk j of block ``block`` to ``dst`` at step ``offset + j``."""

    src: int
    dst: int
    offset: int
    action: Action
    block: int = 0


def n_pipeline_steps(streams: Sequence[Stream], chunks_per_block: int) -> int:
    """Steps of the pipelined schedule: the steps where at least one stream is active."""
    busy: set[int] = set()
    for o in {s.offset for s in streams}:
        busy.update(range(o, o + chunks_per_block))
    return len(busy)


def pipelined_schedule(
    collective: Collective,
    algorithm: str,
    n_ranks: int,
    streams: Sequence[Stream],
    chunks_per_block: int,
    *,
    n_blocks: int = 1,
    root: int | None = None,
) -> Schedule:
    """The Schedule that runs ``streams`` over ``chunks_per_block`` chunks of each block.

    Steps are labelled ``reduce`` (only reductions), ``broadcast`` (only copies) or
    ``reduce+broadcast`` (both, when the two halves of a tree all-reduce overlap).
    """
    c = chunks_per_block
    horizon = max((s.offset for s in streams), default=-c) + c
    rows = []
    for t in range(horizon):
        ts = [
            Transfer(s.src, s.dst, s.block * c + (t - s.offset), s.action)
            for s in streams
            if 0 <= t - s.offset < c
        ]
        actions = {x.action for x in ts}
        phase = (
            "reduce+broadcast"
            if len(actions) == 2
            else ("reduce" if Action.REDUCE in actions else "broadcast")
        )
        rows.append((ts, phase))
    return Schedule(
        collective,
        algorithm,
        n_ranks,
        c * n_blocks,
        make_steps(rows),
        root=root,
        n_blocks=n_blocks,
    )
