"""Fit the compute model's constants that no BF16 Hopper/Ampere run fixes: the FP8 GEMMs'
fraction of the FP8 peak (``Efficiency.fp8_gemm``) per GPU generation, and Blackwell's BF16
GEMMs and FlashAttention, each on one published run; check them on others.

- Hopper: the twelve FP8 rows of NVIDIA NeMo 24.07's DGX-H100 table (GPT3 5B to 175B, Llama 2
  7B to 70B, Llama 3 8B and 70B, Nemotron 8B, 22B, 340B on 8 to 512 GPUs;
  bench/published_training/nemo-24.07-perf.toml), each set up as bench/plan_vs_published.py
  sets it up: the value that minimises their mean |error| (a grid of 0.0025), with the FP8
  GEMMs' BF16 output write priced (ringtree.plan.compute's module doc). One row alone (Llama 2
  70B, as before, without that write) put the exposed TP and pipeline transfers of that
  layout into the GEMMs' rate: 0.7573, an FP8 GEMM 2.6x the BF16 rate, and the TP-free rows
  of the same table (GPT3 5B, Nemotron 8B) 18 % too fast.
- Blackwell: NVIDIA Megatron-Bridge 25.11's DGX-B200 LLAMA3_8B FP8-CS on 8 GPUs (DDP, GBS
  128, MBS 2, sequence 8192: 30,624 tokens/s/GPU, docs/performance-summary.md at commit
  2b8806b9) for fp8_gemm (the BF16 GEMMs tied to it by Hopper's BF16/FP8 ratio: no dense BF16
  Blackwell row is published); FlashAttention's ``flash`` on NVIDIA NeMo's long-sequence
  LLAMA3-8B (FP8) - B200 row of 1024K tokens (256 GPUs, TP 4, CP 16, DP 4, batch 4: 1,608 model
  TFLOP/s per GPU; docs/source/performance/performance_long_sequence.md at commit 14d427f5,
  container NeMo25.04.rc2), where attention is 97 % of the FLOPs. The two are fitted in turn
  until they settle.
- The sustained-clock ratio of Meta's H100 96 GB HBM2e at 500 W (gpus.toml's
  ``h100-hbm2e-96gb``: no clock or TFLOP/s is published, torchtitan says its peak is "between
  SXM and NVL"): the ratio in [835/989, 1] of its peaks to the H100 SXM's that minimises the
  mean squared error of the rows marked ``fit = true`` on that GPU (torchtitan-perf-2025's
  BF16 FSDP-only rows of Tables 1 and 3: Llama 3.1 8B on 8 and 128 GPUs, eager and compiled),
  on a grid of 0.001 (0.845 to 1).
- Checks: Megatron-Bridge 25.11's DGX-H100 LLAMA3_70B FP8-CS (64 GPUs, TP 4, PP 8, VP 5:
  1,602 tokens/s/GPU); torchao's torchtitan benchmark, Llama3-8b on 8 H100 (FSDP2, batch 1,
  sequence 8192, per-op SAC, torch.compile): BF16 6,150 tokens/s, FP8 tensorwise with float8
  all-gather 7,689.5 (pytorch/ao commit 9519bebb, torchao/float8/README.md, "Training
  benchmarks").

Unstated settings (recomputation, sequence parallelism) take the fastest value that fits, as
``bench/plan_vs_published.py`` does.

    .venv/bin/python bench/fit_compute.py
"""

from __future__ import annotations

import math
import sys
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ringtree.cost.clusters import get_cluster, gpus
from ringtree.plan.compute import GENERATION, Efficiency, default_efficiency
from ringtree.plan.model import Model, count_params
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import get_model
from ringtree.plan.record import Plan, Training
from ringtree.plan.strategy import Layout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when imported
from plan_vs_published import Run, error, load, outside, predict  # noqa: E402

HERE = Path(__file__).resolve().parent / "published_training"
SOURCE = "megatron-bridge-25.11-perf"
#: The DGX-B200 row (not in the TOML, which holds the H100 rows), as printed: LLAMA3_8B, 8 GPUs,
#: FP8-CS, GBS 128, MBS 2, sequence 8192, FSDP 0, TP 1, PP 1, CP 1, 30624 tokens/s/GPU; the
#: shape is Llama 3 8B's (Llama Team 2024, Table 3), vocabulary 128,000 as the TOML's rows.
B200_8B = {"name": "llama3_8b-8gpu-b200", "gpus": 8, "layers": 32, "hidden": 4096,
           "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128000, "seq_len": 8192,
           "tp": 1, "pp": 1, "cp": 1, "micro_batch": 2, "global_batch": 128,
           "tokens_per_s_per_gpu": 30624.0}
#: NeMo's LLAMA3-8B (FP8) - B200 1024K row as printed (commit 14d427f5); TFLOP/s only.
B200_1M = {"name": "llama3-8b-b200-seq1024k", "gpus": 256, "layers": 32, "hidden": 4096,
           "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "seq_len": 1048576,
           "tp": 4, "pp": 1, "cp": 16, "micro_batch": 1, "global_batch": 4,
           "tflops_per_gpu": 1608.0}


def _run(name: str, source: str = SOURCE) -> dict:
    data = tomllib.loads((HERE / f"{source}.toml").read_text())
    return next(r for r in data["runs"] if r["name"] == name)


def _model(r: dict) -> Model:
    m = Model(str(r["name"]), 0, r["layers"], r["hidden"], r["seq_len"], heads=r["heads"],
              kv_heads=r["kv_heads"], ffn=r["ffn"], vocab=r["vocab"], gated=True)
    return replace(m, params=count_params(m))


def best(r: dict, cluster: str, eff: Efficiency, precision: str = "fp8") -> Plan:
    """The fastest fitting plan of the run's settings (recomputation and sp unknown)."""
    model, tp, pp = _model(r), r["tp"], r["pp"]
    pl = on_cluster(get_cluster(cluster), r["gpus"] // 8)
    dp = r["gpus"] // (tp * pp * r["cp"])
    flavor = "zero3" if r.get("fsdp") else "zero1"
    out = []
    for sp in ([False, True] if tp > 1 else [False]):
        for rc in ("none", "selective", "full"):
            lay = Layout(flavor, dp, tp, pp, sp, r["cp"], 1, r.get("virtual_stages", 1))
            tr = Training(micro_batch=r["micro_batch"], global_batch=r["global_batch"],
                          recompute=rc, dp_overlap="full", precision=precision,
                          efficiency=eff)
            out.append(plan(model, pl, lay, tr, with_verdict=False))
    return min(out, key=lambda p: (not p.fits_memory, p.step_time_s))


def published_s(r: dict, eff: Efficiency) -> float:
    """Iteration time: global batch x sequence / (tokens/s/GPU x GPUs), or from the model
    TFLOP/s per GPU and the plan's model FLOPs (the same count as NeMo's)."""
    if "tokens_per_s_per_gpu" in r:
        return r["global_batch"] * r["seq_len"] / (r["tokens_per_s_per_gpu"] * r["gpus"])
    flops = best(r, "dgx-b200", eff).model_flops
    return flops / (r["tflops_per_gpu"] * 1e12 * r["gpus"])  # type: ignore[operator]


def fit(r: dict, cluster: str, base: Efficiency, field: str,
        tie: Callable[[float], dict] = lambda v: {}) -> float:
    """The value of ``field`` (and what ``tie`` sets with it) for which the run's best plan
    takes its published time (bisection: the step falls as the efficiency rises)."""
    target, lo, hi = published_s(r, base), 0.05, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        eff = replace(base, **{field: mid}, **tie(mid))
        if best(r, cluster, eff).step_time_s > target:  # type: ignore[operator]
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def hopper_fp8(lo: float = 0.6, hi: float = 0.8, step: float = 0.0025) -> tuple[float, float]:
    """Hopper's fp8_gemm minimising the mean |error| of NeMo 24.07's FP8 rows as the
    comparison sets them up (a grid from ``lo`` to ``hi``), and that mean."""
    runs = [r for r in load()[0] if r.source == "nemo-24.07-perf" and not outside(r.source, r.data)]

    def mean(v: float) -> float:
        eff = replace(GENERATION["hopper"], fp8_gemm=v)
        return sum(abs(error(r, predict(r, eff))) for r in runs) / len(runs)

    grid = [lo + i * step for i in range(round((hi - lo) / step) + 1)]
    return min(((v, mean(v)) for v in grid), key=lambda x: x[1])


#: H100 NVL's dense BF16 peak over H100 SXM's (torchtitan/tools/utils.py get_peak_flops:
#: 835e12 and 989e12): the lowest sustained-clock ratio the 500 W part can have.
NVL_OVER_SXM = 835 / 989


def _scaled(run: Run, ratio: float) -> Run:
    """The run on its GPU with both peaks at ``ratio`` x H100 SXM's."""
    sxm, pl = gpus()["h100-sxm"], run.placement
    gpu = replace(pl.cluster.gpu, bf16_tflops=sxm.bf16_tflops * ratio,  # type: ignore[union-attr]
                  fp8_tflops=sxm.fp8_tflops * ratio)
    return replace(run, placement=replace(pl, cluster=replace(pl.cluster, gpu=gpu)))


def hbm2e_ratio(step: float = 0.001) -> tuple[float, float]:
    """The H100 HBM2e 500 W part's sustained-clock ratio (module doc) and the fit rows' mean
    |error| at it."""
    runs = [r for r in load()[0] if r.data.get("fit") and "HBM2e" in str(r.data.get("gpu"))]

    def errors(v: float) -> list[float]:
        return [error(r, predict(r, GENERATION["hopper"])) for r in (_scaled(x, v) for x in runs)]

    grid = [i * step for i in range(math.ceil(NVL_OVER_SXM / step), round(1 / step) + 1)]
    best_v = min(grid, key=lambda v: sum(e * e for e in errors(v)))
    return best_v, sum(abs(e) for e in errors(best_v)) / len(runs)


def blackwell(ratio: float) -> Efficiency:
    """Blackwell's fp8_gemm (BF16 tied by ``ratio``) and flash, fitted in turn."""
    eff = default_efficiency(get_cluster("dgx-b200").gpu)
    for _ in range(4):
        fp8 = fit(B200_8B, "dgx-b200", eff, "fp8_gemm", lambda v: {"gemm": v * ratio})
        eff = replace(eff, fp8_gemm=fp8, gemm=fp8 * ratio)
        eff = replace(eff, flash=fit(B200_1M, "dgx-b200", eff, "flash"))
    return eff


def main() -> int:
    """Print each fit and the check."""
    hopper, err = hopper_fp8()
    print(f"# hopper: fp8_gemm {hopper:.4f} (fitted on the nemo-24.07-perf rows: mean |error| "
          f"{err:.1%})")
    ratio = GENERATION["hopper"].gemm / hopper
    bw = blackwell(ratio)
    print(f"# blackwell: fp8_gemm {bw.fp8_gemm:.4f}, gemm {bw.gemm:.4f} (fitted on {SOURCE} "
          f"DGX-B200 LLAMA3_8B; BF16 at Hopper's BF16/FP8 ratio {ratio:.4f}), flash "
          f"{bw.flash:.4f} (fitted on NeMo's B200 LLAMA3-8B 1024K)")
    clock, err = hbm2e_ratio()
    print(f"# h100-hbm2e-96gb: sustained-clock ratio {clock:.3f} (BF16 {989 * clock:.1f}, FP8 "
          f"{1979 * clock:.1f} TFLOP/s; fit rows' mean |error| {err:.1%})")
    eff = replace(GENERATION["hopper"], fp8_gemm=hopper)
    r = _run("llama3_70b-64gpu")
    got, want = best(r, "dgx-h100", eff).step_time_s, published_s(r, eff)
    print(f"# check: {SOURCE} llama3_70b-64gpu {got:.3f} s predicted, {want:.3f} s published "
          f"({got / want - 1:+.1%})")  # type: ignore[operator]
    m, pl = get_model("llama3-8b"), on_cluster(get_cluster("dgx-h100"), 1)
    steps = {}
    for prec in ("bf16", "fp8"):
        tr = Training(global_batch=8, recompute="selective", precision=prec, efficiency=eff)
        steps[prec] = plan(m, pl, Layout("zero3", 8, 1, 1), tr, with_verdict=False).step_time_s
    speedup = steps["bf16"] / steps["fp8"]
    print(f"# check: torchtitan Llama3-8b on 8 H100, BF16/FP8 step {speedup:.3f} predicted, "
          f"{7689.5 / 6150:.3f} published ({speedup / (7689.5 / 6150) - 1:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
