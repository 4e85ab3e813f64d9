"""A schedule's picture in words: its title, and what each panel shows (the state before the
first step, a step, the end) for every collective."""

from __future__ import annotations

from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule


def schedule_title(s: Schedule) -> str:
    """``ring all-reduce on 4 ranks, 4 chunks: 6 steps`` (and the root, if any)."""
    root = "" if s.root is None else f", root {s.root}"
    chunks = f"{s.n_chunks} chunk{'s' if s.n_chunks > 1 else ''}"
    ranks = f"{s.n_ranks} rank{'s' if s.n_ranks > 1 else ''}"
    return f"{s.algorithm} {s.collective.value} on {ranks}, {chunks}{root}: " + (
        f"{s.n_steps} step{'s' if s.n_steps != 1 else ''}"
    )


_START = {
    Collective.ALL_GATHER: "each rank holds only its own block",
    Collective.GATHER: "each rank holds only its own block",
    Collective.ALL_TO_ALL: "each rank holds its N blocks, block (s, d) = chunk s N + d for rank d",
    Collective.BARRIER: "each rank has heard only from itself",
}
_END = {
    Collective.REDUCE_SCATTER: "done: each rank r holds block r of the result",
    Collective.SCATTER: "done: each rank r holds block r",
    Collective.ALL_TO_ALL: "done: each rank d holds the blocks (s, d) sent to it",
    Collective.BARRIER: "done: every rank has heard from every rank",
}


def caption(s: Schedule, k: int) -> str:
    """What panel ``k`` shows, in words (0: the start)."""
    c = s.collective
    if k == 0:
        if c in (Collective.BROADCAST, Collective.SCATTER):
            return f"only rank {s.root} holds the data"
        return _START.get(c, "each rank holds only its own input")
    if k == s.n_steps:
        if c in (Collective.REDUCE, Collective.GATHER):
            return f"done: rank {s.root} holds the result"
        return _END.get(c, "done: every rank holds the whole result")
    actions = [t.action for t in s.steps[k - 1].transfers]
    reduces, copies = actions.count(Action.REDUCE), actions.count(Action.COPY)
    moved = f"{len(actions)} chunk{'s' if len(actions) > 1 else ''} sent"
    if not copies:
        return f"{moved}, each reduced into the receiver's"
    if not reduces:
        return f"{moved}, each stored by the receiver"
    return f"{moved}: {reduces} reduced, {copies} stored"
