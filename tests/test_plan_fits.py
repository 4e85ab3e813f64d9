"""The constants bench/fit_compute.py fits reproduce the published runs they were fitted on
(so a constant changed by hand, or a model change that moves them, shows here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from ringtree.plan.compute import GENERATION

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "fit_compute.py"


@pytest.fixture(scope="module")
def fits():
    spec = importlib.util.spec_from_file_location("fit_compute", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_hopper_fp8_minimises_nemo_2407s_mean_error(fits):
    # the grid's best around the constant is the constant: a model change that moves the fit
    # (or a constant changed by hand) fails here
    got, err = fits.hopper_fp8(0.73, 0.745)
    assert got == pytest.approx(GENERATION["hopper"].fp8_gemm, abs=1e-9)
    assert err < 0.06  # 5.8 % over the twelve rows when fitted


def test_fitted_names_every_row_hopper_fp8_is_fitted_on(fits):
    runs = [r for r in fits.load()[0] if r.source == "nemo-24.07-perf"]
    assert {("nemo-24.07-perf", r.name) for r in runs} <= sys.modules["plan_vs_published"].FITTED


def test_blackwell_reproduces_its_two_rows(fits):
    eff = GENERATION["blackwell"]
    got = fits.best(fits.B200_8B, "dgx-b200", eff).step_time_s
    assert got == pytest.approx(128 * 8192 / (30624 * 8), rel=0.005)
    p = fits.best(fits.B200_1M, "dgx-b200", eff)
    assert p.model_flops / (p.step_time_s * 256) == pytest.approx(1608e12, rel=0.005)
    # tied: Blackwell's BF16/FP8 efficiency ratio is Hopper's
    hopper = GENERATION["hopper"]
    assert eff.gemm / eff.fp8_gemm == pytest.approx(hopper.gemm / hopper.fp8_gemm, rel=0.002)


def test_the_hbm2e_part_runs_at_its_fitted_clock(fits):
    # one sustained-clock ratio for both peaks, between H100 NVL's 835 and H100 SXM's 989
    # TFLOP/s (torchtitan: "between SXM and NVL"), fitted on the four rows marked fit = true
    from ringtree.cost.clusters import gpus

    ratio, err = fits.hbm2e_ratio()
    assert 835 / 989 <= ratio <= 1 and err < 0.02  # 1.6 % over the four rows when fitted
    part = gpus()["h100-hbm2e-96gb"]
    assert part.bf16_tflops == pytest.approx(989 * ratio, abs=0.05)  # 845.6
    assert part.fp8_tflops == pytest.approx(1979 * ratio, abs=0.05)  # 1,692.0
    assert part.memory_bandwidth_GBps == 2400 and part.memory_bytes == 96 * 10**9
    fitted = {r.name for r in fits.load()[0] if r.data.get("fit")}
    assert fitted == {"llama3.1-8b-8gpu-fsdp", "llama3.1-8b-8gpu-fsdp-compile",
                      "llama3.1-8b-128gpu-fsdp", "llama3.1-8b-128gpu-fsdp-compile"}
    assert {("torchtitan-perf-2025", n) for n in fitted} <= sys.modules["plan_vs_published"].FITTED
