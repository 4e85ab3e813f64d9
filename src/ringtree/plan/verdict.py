"""A plan's one-line verdict: is the step communication-bound, and the first thing to change.

Thresholds: exposed communication under 10 % of compute is compute-bound (nothing to change);
above 100 % it is communication-bound. The first thing to change is read from the largest
cost: model states that do not fit, the pipeline bubble, or the collective with the most
exposed time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ringtree.plan.volumes import model_state_bytes
from ringtree.units import format_bytes

if TYPE_CHECKING:
    from ringtree.plan.planner import Plan, TimedOp

COMPUTE_BOUND_BELOW = 0.10
COMM_BOUND_ABOVE = 1.0


def _fits(plan: Plan, flavor: str) -> bool:
    """Whether ``plan``'s layout with another data-parallel flavour fits in memory."""
    layout = replace(plan.layout, flavor=flavor)
    need = model_state_bytes(plan.model, layout, plan.training.itemsize)
    return need <= plan.cluster.gpu_memory_bytes


def _fix(plan: Plan, top: TimedOp) -> str:
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
    if layout.flavor == "zero3":
        if _fits(plan, "zero2"):
            return "ZeRO-3 moves 3 Psi per step and zero2's model states fit: use zero2 (2 Psi)"
        if latency_bound:
            return f"ZeRO-3's gathers over dp={layout.dp} are latency-bound: shrink dp with tp/pp"
        return "raise the batch per GPU: more compute to hide ZeRO-3's gathers behind"
    if latency_bound and op.calls_per_round > 1:
        return f"{op.calls} calls of {op.op} are mostly latency: use larger buckets (--bucket)"
    if op.window is None:
        if _fits(plan, "ddp"):
            return f"{op.op} after the optimizer step is not hidden: use ddp (same bytes, hidden)"
        return f"raise the batch per GPU: {op.op} after the optimizer step is not hidden"
    link = plan.cluster.intra if shape.intra else plan.cluster.inter
    return f"gradient sync over {link.name} outruns backward: raise the batch per GPU"


def verdict(plan: Plan) -> str:
    """The one-line verdict on ``plan``."""
    if not plan.fits_memory:
        need = format_bytes(plan.memory_bytes_per_gpu)
        have = format_bytes(plan.cluster.gpu_memory_bytes)
        fix = "raise tp x pp or add GPUs" if plan.layout.flavor == "zero3" else "use zero3"
        return f"does not fit: model states need {need} per GPU, over {have}: {fix}"
    if plan.compute_s is None:
        return (
            f"communication takes {plan.comm_time_s * 1e3:.3g} ms per step; give --compute or "
            "--tflops/--mfu to judge what backward hides"
        )
    overhead = plan.overhead or 0.0
    pct = f"{overhead * 100:.3g} %"
    if overhead < COMPUTE_BOUND_BELOW and plan.bubble_s < COMPUTE_BOUND_BELOW * plan.compute_s:
        return f"compute-bound: exposed communication adds {pct} to compute; nothing to change"
    state = "communication-bound" if overhead > COMM_BOUND_ABOVE else "not communication-bound"
    top = max(plan.collectives, key=lambda c: c.exposed_s, default=None)
    if top is None or plan.bubble_s > top.exposed_s:
        bubble = plan.bubble_s / plan.step_time_s if plan.step_time_s else 0.0
        fix = (
            f"pipeline bubble is {bubble * 100:.3g} % of the step: more micro-batches per "
            f"pipeline (now {plan.micro_batches}; raise --global-batch) or lower pp"
        )
    else:
        fix = _fix(plan, top)
    return f"{state}: exposed communication adds {pct} to compute; first change: {fix}"
