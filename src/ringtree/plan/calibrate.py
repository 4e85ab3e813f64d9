"""Fit the compute model's one free constant, the GEMMs' fraction of peak (of the FP8 peak
under ``--precision fp8``), to a measured step.

``ringtree plan ... --strategy S --calibrate-step 1.23s`` finds the efficiency e_gemm for which
the plan of S takes the measured time (bisection: the step time falls as e_gemm rises), and
plans (or searches) with it. What the fit cannot absorb it says: a step faster than the model
allows at the GPU's full peak, or one so slow that under 2 % of peak would explain it (then
something other than compute is slow: data loading, a straggler, the network).
"""

from __future__ import annotations

from dataclasses import replace

from ringtree.errors import RingtreeError
from ringtree.plan.compute import Efficiency, default_efficiency
from ringtree.plan.model import Model
from ringtree.plan.placement import Placement
from ringtree.plan.planner import modelled, plan
from ringtree.plan.precision import FP8
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout, Strategy
from ringtree.units import format_time

LOW, HIGH = 0.02, 1.0


def fit_efficiency(
    model: Model, placement: Placement, strategy: Strategy | Layout, training: Training,
    measured_s: float, iterations: int = 40,
) -> Efficiency:
    """The efficiency whose plan of ``strategy`` takes ``measured_s`` (module doc)."""
    if not modelled(model, placement, training):
        raise RingtreeError(
            "--calibrate-step fits the compute model: it needs a cluster as built (--cluster "
            "PRESET) and the model's whole shape, without --compute/--tflops"
        )
    assert placement.cluster is not None
    base = training.efficiency or default_efficiency(placement.cluster.gpu)

    field = "fp8_gemm" if training.precision == FP8 else "gemm"  # the GEMMs that dominate

    def step(gemm: float) -> float:
        eff = replace(base, **{field: gemm}, source="")
        t = plan(model, placement, strategy, replace(training, efficiency=eff), with_verdict=False)
        assert t.step_time_s is not None
        return t.step_time_s

    fastest, slowest = step(HIGH), step(LOW)
    if measured_s < fastest:
        raise RingtreeError(
            f"a measured step of {format_time(measured_s, exact=False)} is faster than the "
            f"model allows at the GPU's full peak ({format_time(fastest, exact=False)}): check "
            "the configuration (batch, sequence length, recomputation, strategy)"
        )
    if measured_s > slowest:
        raise RingtreeError(
            f"a measured step of {format_time(measured_s, exact=False)} is slower than the "
            f"model gives at {LOW:.0%} of peak ({format_time(slowest, exact=False)}): "
            "something other than compute and communication is slow"
        )
    lo, hi = LOW, HIGH
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if step(mid) > measured_s:
            lo = mid
        else:
            hi = mid
    gemm = (lo + hi) / 2
    return replace(base, **{field: gemm},
                   source=f"fitted to a measured step of {format_time(measured_s)}")
