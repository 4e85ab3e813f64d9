"""--calibrate-step: the efficiency that reproduces a measured step."""

from dataclasses import replace

import pytest

from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan.calibrate import fit_efficiency
from ringtree.plan.compute import GENERATION
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy

C = on_cluster(get_cluster("dgx-h100"), 2)
S = parse_strategy("zero1,tp=8,pp=2")
T = Training(global_batch=32, recompute="selective")


def test_fit_recovers_the_efficiency_a_step_was_made_with():
    made = replace(GENERATION["hopper"], gemm=0.45)
    step = plan(PRESETS["13b"], C, S, replace(T, efficiency=made)).step_time_s
    eff = fit_efficiency(PRESETS["13b"], C, S, T, step)
    assert eff.gemm == pytest.approx(0.45, rel=1e-4)
    assert "fitted to a measured step" in eff.source


def test_steps_the_model_cannot_explain():
    with pytest.raises(RingtreeError, match="faster than the model allows"):
        fit_efficiency(PRESETS["13b"], C, S, T, 1e-3)
    with pytest.raises(RingtreeError, match="slower than the model gives"):
        fit_efficiency(PRESETS["13b"], C, S, T, 1e4)
