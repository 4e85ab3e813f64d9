"""A plan's one-line verdict: is the step communication-bound, and the first thing to change.

Thresholds: exposed communication under 10 % of compute is compute-bound (nothing to change);
above 100 % it is communication-bound. The first thing to change is read from the largest
cost: model states that do not fit, the pipeline bubble, or the collective with the most
exposed time. A suggested switch of data-parallel flavour is priced first and made only when
the model says it is faster (and fits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from ringtree.plan.strategy import FLAVORS, Layout
from ringtree.units import format_bytes, format_percent, format_time

if TYPE_CHECKING:
    from ringtree.plan.record import Plan, TimedOp, Training

#: ``alternative(layout, training)``: the plan of a changed configuration (None when it
#: does not apply).
Alternative = Callable[["Layout", "Training"], "Plan | None"]

COMPUTE_BOUND_BELOW = 0.10
COMM_BOUND_ABOVE = 1.0
BETTER_BY = 0.05  # suggest another flavour only when it is this much faster


def _key(plan: Plan) -> float:
    """What a plan is judged by: step time, or exposed communication without compute."""
    step = plan.step_time_s
    return plan.exposed_s if step is None else step


def _best_flavor(plan: Plan, other: Alternative, fits_only: bool) -> Plan | None:
    """The fastest other data-parallel flavour that fits, if it is at least ``BETTER_BY``
    faster (any that fits, when ``plan`` itself does not fit)."""
    if plan.layout.dp == 1:
        return None
    best = None
    for flavor in FLAVORS:
        if flavor == plan.layout.flavor:
            continue
        alt = other(replace(plan.layout, flavor=flavor), plan.training)
        if alt is None or not alt.fits_memory:
            continue
        if not fits_only and _key(alt) > (1 - BETTER_BY) * _key(plan):
            continue
        if best is None or _key(alt) < _key(best):
            best = alt
    return best


def _fits_with(plan: Plan, other: Alternative) -> tuple[str, Plan] | None:
    """The fastest single change that makes ``plan`` fit: another ZeRO stage, sequence
    parallelism, recomputation, a micro-batch of 1, twice the tp or the pp."""
    lay, tr = plan.layout, plan.training
    tries: list[tuple[str, Layout, Training]] = []
    tries += [(f, replace(lay, flavor=f), tr) for f in FLAVORS if f != lay.flavor and lay.dp > 1]
    if lay.tp > 1 and not lay.sp:
        tries.append(("sp", replace(lay, sp=True), tr))
    for rc in ("selective", "full"):
        if rc != tr.recompute and not (rc == "selective" and tr.recompute == "full"):
            tries.append((f"--recompute {rc}", lay, replace(tr, recompute=rc)))
    if tr.micro_batch > 1:
        tries.append(("--micro-batch 1", lay, replace(tr, micro_batch=1)))
    if lay.dp % 2 == 0:
        tries.append((f"tp={2 * lay.tp}", replace(lay, tp=2 * lay.tp, dp=lay.dp // 2), tr))
        tries.append((f"pp={2 * lay.pp}", replace(lay, pp=2 * lay.pp, dp=lay.dp // 2), tr))
    best: tuple[str, Plan] | None = None
    for what, layout, training in tries:
        alt = other(layout, training)
        if alt is None or not alt.fits_memory:
            continue
        if best is None or _key(alt) < _key(best[1]):
            best = (what, alt)
    return best


def _step(plan: Plan) -> str:
    key = _key(plan)
    return (
        f"step {format_time(key, exact=False)}"
        if plan.step_time_s
        else "exposed " + (format_time(key, exact=False))
    )


def _fix(plan: Plan, top: TimedOp, other: Alternative) -> str:
    """What to change when ``top`` is the collective that shows the most."""
    layout, op, shape = plan.layout, top.op, top.shape
    latency_bound = top.time_s > 0 and top.latency_s > 0.5 * top.time_s
    if op.group == "tp":
        if not shape.intra:
            gpn = plan.placement.gpus_per_node
            return f"tp={layout.tp} spans {shape.nodes} nodes: keep tp within a node (<= {gpn})"
        return f"TP collectives are on the critical path: lower tp (now {layout.tp})"
    if op.group == "pp":
        return f"pipeline sends are exposed: fewer stages (now pp={layout.pp})"
    alt = _best_flavor(plan, other, fits_only=False)
    if alt is not None:
        was = format_time(_key(plan), exact=False)
        return f"use {alt.layout.flavor} ({_step(alt)} instead of {was}; it fits)"
    if layout.flavor == "zero3":
        why = "are latency-bound" if latency_bound else "outrun compute"
        return f"ZeRO-3's collectives over dp={layout.dp} {why}: shrink dp with tp/pp"
    if op.window is not None and op.calls_per_round == 1 and layout.flavor != "zero3":
        return f"one unbucketed {op.op} cannot overlap compute: bucket it (--bucket 25MiB)"
    if latency_bound and op.calls_per_round > 1:
        return f"{op.calls} calls of {op.op} are mostly latency: use larger buckets (--bucket)"
    if op.window is None:
        return f"raise the batch per GPU: {op.op} after the optimizer step is not hidden"
    link = plan.placement.intra if shape.intra else plan.placement.inter
    return f"{op.op} over {link.name} outruns compute: raise the batch per GPU or add tp/pp"


def _does_not_fit(plan: Plan, other: Alternative) -> str:
    need = format_bytes(plan.memory_bytes_per_gpu)
    have = format_bytes(plan.placement.gpu_memory_bytes)
    if plan.memory is None:  # model states only (a plan on links)
        alt = _best_flavor(plan, other, fits_only=True)
        fix = f"use {alt.layout.flavor} ({_step(alt)})" if alt else "raise tp x pp or add GPUs"
        return f"does not fit: model states need {need} per GPU, over {have}: {fix}"
    over = format_bytes(plan.memory_bytes_per_gpu - plan.placement.gpu_memory_bytes)
    parts = plan.memory.to_json()
    largest = max(("weights", "gradients", "optimizer", "activations"),
                  key=lambda k: parts[f"{k}_bytes"])
    found = _fits_with(plan, other)
    fix = (
        f"it fits with {found[0]} ({format_bytes(found[1].memory_bytes_per_gpu)}, "
        f"{_step(found[1])})"
        if found
        else "no single change makes it fit: add GPUs (or --search)"
    )
    return (
        f"does not fit: needs {need} per GPU, {over} over {have} (the largest part: "
        f"{largest} {format_bytes(parts[f'{largest}_bytes'])}); {fix}"
    )


def verdict(plan: Plan, other: Alternative) -> str:
    """The one-line verdict on ``plan``; ``other(layout, training)`` plans a changed
    configuration, so that a suggested change is one the model says fits or is faster."""
    if not plan.fits_memory:
        return _does_not_fit(plan, other)
    if plan.compute_s is None:
        return (
            f"communication takes {format_time(plan.comm_time_s, exact=False)} per step; give "
            "--compute or --tflops/--mfu to judge what compute hides"
        )
    overhead = plan.overhead or 0.0
    pct = format_percent(overhead, exact=False)
    if overhead < COMPUTE_BOUND_BELOW and plan.bubble_s < COMPUTE_BOUND_BELOW * plan.compute_s:
        return f"compute-bound: exposed communication adds {pct} to compute; nothing to change"
    state = "communication-bound" if overhead > COMM_BOUND_ABOVE else "not communication-bound"
    top = max(plan.collectives, key=lambda c: c.exposed_s, default=None)
    if top is None or plan.bubble_s > top.exposed_s:
        bubble = plan.bubble_s / plan.step_time_s if plan.step_time_s else 0.0
        fix = (
            f"the pipeline bubble is {format_percent(bubble, exact=False)} of the step: more "
            f"micro-batches per pipeline (now {plan.micro_batches}; raise --global-batch) or "
            "lower pp"
        )
    else:
        fix = _fix(plan, top, other)
    return f"{state}: exposed communication adds {pct} to compute; first change: {fix}"
