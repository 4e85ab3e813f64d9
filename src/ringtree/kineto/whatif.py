"""The same steps on another cluster or scale (:func:`what_if`): the trace's compute kept,
its collectives repriced.

Weak scaling (what is modelled): every rank keeps its work and its per-rank buffers. A group
that spans the whole run (data parallelism) spans the new scale's ranks (``nodes`` x the
cluster's GPUs per node); smaller groups (tensor, expert parallelism within a node) keep their
size. An all-reduce, broadcast, reduce or all-to-all keeps its buffer; an all-gather,
reduce-scatter, gather or scatter keeps each rank's part, so its whole buffer (what nccl-tests
and ringtree count) grows with the group.

A step's new time: each collective on the step's critical rank hides behind as much compute
as it did in the trace (h: its span's overlap with computation) and still waits as long for
its group's last rank (w: its span less the collective's own time); of ``w`` plus its new
time ``t'``, the rest is exposed. The step changes by the change in exposed time:
``new step = step + sum(max(0, w + t' - h) - max(0, span - h))``, which is the step itself
when ``t'`` is the measured time. Collectives the model does not price (point-to-point, no
size) keep theirs. Dependencies are not replayed: a collective that ends later delays the
step by its exposed part only.
"""

from __future__ import annotations

from typing import Any

from ringtree.kineto import intervals as iv
from ringtree.kineto.calls import Call, RankTrace, Run
from ringtree.kineto.instances import instances
from ringtree.kineto.pricing import Target, price
from ringtree.kineto.split import step_splits

#: collectives whose whole buffer is N per-rank parts (grows with N under weak scaling)
PARTS = ("all-gather", "reduce-scatter", "gather", "scatter")

ASSUMPTIONS = (
    "weak scaling: every rank keeps its compute and its per-rank buffers; a group spanning the "
    "whole run spans the new scale, smaller groups keep their size",
    "each collective hides behind as much compute as it did in the trace; the rest of its new "
    "time is exposed; dependencies are not replayed",
    "strong scaling (same global batch over more ranks) is not modelled: each rank's compute "
    "would shrink by the ratio of ranks; DDP's all-reduce keeps its size S (the whole "
    "gradient); ZeRO/FSDP's all-gather and reduce-scatter keep their whole buffer, so each "
    "rank's part shrinks",
)


def scaled(c: Call, world: int, new_world: int) -> tuple[int | None, int | None]:
    """``(size_bytes, group size)`` of ``c`` at the new scale (module doc)."""
    n, size = c.group_size, c.size_bytes
    if n is None or size is None or n != world or new_world == world:
        return size, n
    return (size // n * new_world if c.collective in PARTS else size), new_world


def _hidden_us(r: RankTrace, c: Call) -> float:
    """How much of ``c``'s span computation overlapped on its rank."""
    s, e = c.span
    return iv.total(iv.clip(r.busy["compute"], s, e))


def what_if(run: Run, target: Target, new_world: int | None) -> dict[str, Any]:
    """Every step's time and exposed communication repriced on ``target`` with
    ``new_world`` ranks in the run-wide groups (None: as many as the run)."""
    world = max((r.world_size or 0 for r in run.ranks), default=0) or len(run.ranks)
    new_world = new_world or world
    ranks = {r.rank: r for r in run.ranks}
    found, _ = instances(run)
    own = {id(c): inst.time_us * 1e-6 for inst in found for c in inst.calls}
    steps = []
    for st in step_splits(run):
        crit = st.critical
        r = ranks[crit.rank]
        window = next(s for s in r.steps if s.number == st.step)
        delta, unpriced = 0.0, 0
        for c in r.calls:
            if not window.start <= c.span[0] < window.end:
                continue
            size, n = scaled(c, world, new_world)
            p = price(c.collective, size, n, c.itemsize or 1, run.backend, target)
            if p is None:
                unpriced += 1
                continue
            span, hidden = c.duration_us * 1e-6, _hidden_us(r, c) * 1e-6
            wait = span - own.get(id(c), span)  # waiting for the group's last rank: kept
            delta += max(0.0, wait + p.time_s - hidden) - max(0.0, span - hidden)
        steps.append({"step": st.step, "rank": crit.rank, "time_s": crit.time_s,
                      "exposed_comm_s": crit.exposed_comm_s,
                      "what_if_time_s": crit.time_s + delta,
                      "what_if_exposed_comm_s": max(0.0, crit.exposed_comm_s + delta),
                      "unpriced_calls": unpriced})
    return {"target": target.name, "ranks": new_world, "from_ranks": world,
            "steps": steps, "assumptions": list(ASSUMPTIONS)}
