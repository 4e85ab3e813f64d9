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

from ringtree.plan.strategy import FLAVORS
from ringtree.plan.volumes import model_state_bytes
from ringtree.units import format_bytes, format_percent, format_time

if TYPE_CHECKING:
    from ringtree.plan.record import Plan, TimedOp

COMPUTE_BOUND_BELOW = 0.10
COMM_BOUND_ABOVE = 1.0
BETTER_BY = 0.05  # suggest another flavour only when it is this much faster


def _key(plan: Plan) -> float:
    """What a plan is judged by: step time, or exposed communication without compute."""
    step = plan.step_time_s
    return plan.exposed_s if step is None else step


def _best_flavor(plan: Plan, other: Callable[[str], Plan], fits_only: bool) -> Plan | None:
    """The fastest other data-parallel flavour whose model states fit, if it is at least
    ``BETTER_BY`` faster (any that fits, when ``plan`` itself does not fit). Flavours that
    cannot fit are not priced."""
    if plan.layout.dp == 1:
        return None
    best = None
    for flavor in FLAVORS:
        layout = replace(plan.layout, flavor=flavor)
        need = model_state_bytes(plan.model, layout, plan.training.itemsize)
        if flavor == plan.layout.flavor or need > plan.cluster.gpu_memory_bytes:
            continue
        alt = other(flavor)
        if not fits_only and _key(alt) > (1 - BETTER_BY) * _key(plan):
            continue
        if best is None or _key(alt) < _key(best):
            best = alt
    return best


def _step(plan: Plan) -> str:
    key = _key(plan)
    return (
        f"step {format_time(key, exact=False)}"
        if plan.step_time_s
        else "exposed " + (format_time(key, exact=False))
    )


def _fix(plan: Plan, top: TimedOp, other: Callable[[str], Plan]) -> str:
    """What to change when ``top`` is the collective that shows the most."""
    layout, op, shape = plan.layout, top.op, top.shape
    latency_bound = top.time_s > 0 and top.latency_s > 0.5 * top.time_s
    if op.group == "tp":
        if not shape.intra:
            gpn = plan.cluster.gpus_per_node
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
    link = plan.cluster.intra if shape.intra else plan.cluster.inter
    return f"{op.op} over {link.name} outruns compute: raise the batch per GPU or add tp/pp"


def verdict(plan: Plan, other_flavor: Callable[[str], Plan]) -> str:
    """The one-line verdict on ``plan``; ``other_flavor(f)`` prices the same layout with
    data-parallel flavour ``f``, so that a suggested change is one the model says is better."""
    if not plan.fits_memory:
        need = format_bytes(plan.memory_bytes_per_gpu)
        have = format_bytes(plan.cluster.gpu_memory_bytes)
        alt = _best_flavor(plan, other_flavor, fits_only=True)
        fix = f"use {alt.layout.flavor} ({_step(alt)})" if alt else "raise tp x pp or add GPUs"
        return f"does not fit: model states need {need} per GPU, over {have}: {fix}"
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
        fix = _fix(plan, top, other_flavor)
    return f"{state}: exposed communication adds {pct} to compute; first change: {fix}"
