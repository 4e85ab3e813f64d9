"""ringtree plan against published training runs: predicted vs published iteration time.

Reads every run of ``bench/published_training/*.toml`` (their sources and the definitions of
their figures are in that folder's README), sets each up as ``ringtree plan`` would (model
shape, cluster, strategy, batch, recomputation), and compares the predicted step time with the
published one: the iteration time where printed, else the one the source's own FLOP count
and throughput give (``derived_iteration_time_s``), else the published MFU against the
predicted MFU (the same thing when both count FLOPs as Megatron-LM does).

The compute model's one constant, the GEMMs' fraction of peak, is calibrated once per GPU
generation on the runs named in ``CALIBRATION`` (``--fit`` refits it and prints the value that
goes into ``ringtree.plan.compute.GENERATION``); every other run is a check, and the figures
reported are the checks' errors.

Where a source does not say a setting (the micro-batch, interleaving, recomputation, sequence
parallelism, the distributed optimizer), the run is given the fastest value that fits, as
``--search`` would choose it: these runs' authors tuned them. Settings that the era fixes are
set from it (``ERA``): Megatron-LM before FlashAttention (2021-22: Narayanan, Korthikanti,
MT-NLG, BLOOM, MegaScale's baseline) computes attention unfused and reduces gradients after
the backward (Korthikanti et al.: "we do not use any overlapping of gradient all-reduces");
Megatron-Core (2024) and Llama 3 use FlashAttention and overlap data-parallel communication.

Each run is counted (``"fit": true`` for the calibration runs, a check otherwise), outside the
model (it needs what main's planner lacks: FP8, MoE compute, FSDP as PyTorch runs it,
Blackwell, torch.compile, ...; predicted and shown, not counted) or left out (nothing can be
planned: TPU, OPT's "up to" without a time, MegaScale's own system, Korthikanti's micro-batch
level recomputation); every such run is listed with all its reasons
(``bench/published_runs.py``, which also reads each run's fields). ``--json`` prints
``runs`` (counted), ``left_out_runs``, ``left_out``, ``mean_abs_error`` (every counted run),
``check_mean_abs_error``, ``fit_mean_abs_error``, ``max_abs_error``, per-source means and the
left-out runs counted by reason. ``--count TEXT`` counts the runs outside only for reasons
containing TEXT (a feature measured before its reason goes); ``--memory`` prints only the
memory comparisons.

    .venv/bin/python bench/plan_vs_published.py [--json] [--fit] [--memory] [--count TEXT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

from ringtree.errors import RingtreeError
from ringtree.plan.calibrate import fit_efficiency
from ringtree.plan.compute import GENERATION, Efficiency, default_efficiency
from ringtree.plan.memory import activation_bytes_per_layer
from ringtree.plan.model import Model
from ringtree.plan.planner import plan
from ringtree.plan.record import Plan, Training
from ringtree.plan.search import search
from ringtree.plan.strategy import FLAVORS, Layout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when imported
from published_report import print_comparison, print_memory  # noqa: E402
from published_runs import (  # noqa: E402
    ALL_GATHER_CP,
    DEEPSPEED,
    ERA,
    HERE,
    MODERN,
    NO_SP,
    NO_TP_OVERLAP,
    SEP,
    SYSTEMS,
    TRAIN_METRICS,
    Run,
    described,
    dp_degree,
    expert_degree,
    flavors,
    folded_etp,
    framework,
    fused,
    global_batch,
    hsdp_shard,
    load,
    loss,
    main_grad_bytes,
    micro_batches,
    outside,
    planner_framework,
    planner_precision,
    recompute_every,
    recomputes,
)
from torchtitan_runs import torchtitan_stages  # noqa: E402

__all__ = ["HERE", "Run", "load", "outside"]
#: Runs that calibrate their GPU generation's efficiency (source file stem, run name): the
#: runs with ``"fit": true``; every other run is a check.
CALIBRATION = {
    "ampere": ("korthikanti2022", "175b-selective-sp"),
    "hopper": ("megatron-lm-readme", "gpt-70b"),
}
#: Runs the compute model's other constants were fitted on (bench/fit_compute.py: FP8 GEMMs
#: on Hopper (every NeMo 24.07 row, jointly) and Blackwell, Blackwell's FlashAttention;
#: ringtree.plan.compute.EAGER on torchtitan's eager/compiled pair): also ``"fit": true``.
NEMO_2407 = ("gpt3-5b-64gpu", "gpt3-20b-64gpu", "gpt3-175b-128gpu", "gpt3-175b-512gpu",
             "llama2-7b-8gpu", "llama2-13b-16gpu", "llama2-70b-64gpu", "nemotron-8b-64gpu",
             "nemotron-22b-64gpu", "nemotron-340b-128gpu", "llama3-8b-8gpu", "llama3-70b-64gpu")
FITTED = {
    *(("nemo-24.07-perf", name) for name in NEMO_2407),
    ("megatron-bridge-25.11-perf", "llama3_8b-dgx-b200-fp8-cs-8gpu"),
    ("nemo-long-context", "llama3-8b-b200-seq1024k-256gpu"),
    ("torchtitan-perf-2025", "llama3.1-8b-8gpu-fsdp"),
    ("torchtitan-perf-2025", "llama3.1-8b-8gpu-fsdp-compile"),
    ("narayanan2021", "zero3-174.6b-768gpu"),  # DeepSpeed ZeRO-3's slowdown (plan/frameworks.py)
    # and the rows a TOML marks ``fit = true`` (the sustained clock of the H100 HBM2e 500 W
    # part, ringtree/data/gpus.toml, on torchtitan-perf-2025's BF16 FSDP rows)
    *((p.stem, r["name"]) for p in sorted(HERE.glob("*.toml"))
      for r in tomllib.loads(p.read_text()).get("runs", []) if r.get("fit")),
}


def settings(run: Run) -> list[tuple[Layout, Training]]:
    """Every way to run ``run`` its source allows (unknown settings take every value)."""
    r = run.data
    attention, overlap, _ = ERA.get(run.source, MODERN)
    tp, pp, cp = r.get("tp", 1), r.get("pp", 1), r.get("cp", 1)
    dp = dp_degree(r)
    layers = r["layers"]
    if "virtual_stages" in r:
        vs = [r["virtual_stages"]]
    elif pp > 1 and framework(run.source, r) == "torchtitan":
        vs = [torchtitan_stages(r)]
    elif pp > 1 and "interleaved" in str(r.get("pipeline_schedule", "interleaved")).lower() and (
        run.source not in DEEPSPEED
    ):
        vs = [v for v in range(1, 9) if pp * v <= layers]
    else:
        vs = [1]
    if "sequence_parallel" in r or run.source in NO_SP:
        sps = [bool(r.get("sequence_parallel", False))]
    else:
        sps = [False, True] if tp > 1 else [False]
    label = framework(run.source, r)
    tp_overlap = (bool(r.get("async_tp")) if label == "torchtitan"
                  else run.source not in NO_TP_OVERLAP)
    out = []
    for flavor in flavors(run.source, r):
        for v in vs:
            for sp in sps:
                lay = Layout(flavor, dp, tp, pp, sp and tp > 1, cp, expert_degree(r), v,
                             hsdp_shard(r), folded_etp(r))
                for b in micro_batches(r):
                    for rc in recomputes(r):
                        tr = Training(micro_batch=b, global_batch=global_batch(r), recompute=rc,
                                      attention=attention, dp_overlap=overlap,
                                      framework=planner_framework(label), tp_overlap=tp_overlap,
                                      cp_overlap=run.source not in ALL_GATHER_CP,
                                      precision=planner_precision(r),
                                      compile=fused(label, r),
                                      recompute_every=recompute_every(r),
                                      main_grad_bytes=main_grad_bytes(r),
                                      pp_overlap=label == "megatron-bridge" and v > 1,
                                      train_metrics=TRAIN_METRICS.get(label, 0),
                                      loss=loss(label, r),
                                      param_bytes=int(r.get("param_bytes", 4)),
                                      fsdp_no_sync=bool(r.get("fsdp_no_sync", False)),
                                      ep_overlap=bool(r.get("moe_a2a_overlap")))
                        out.append((lay, replace(tr, **SYSTEMS.get(r.get("system"), {}))))
    return out


def efficiency(run: Run, effs: dict[str, Efficiency]) -> Efficiency:
    """The run's generation's efficiency (Hopper's, marked uncalibrated, where none is)."""
    return effs.get(run.arch) or default_efficiency(run.placement.cluster.gpu)


def predict(run: Run, eff: Efficiency) -> Plan:
    """The fastest plan of the run's settings that fits (the fastest of all if none does: a
    published run ran, so the memory model's verdict is reported, not trusted over it)."""
    best: Plan | None = None
    for lay, tr in settings(run):
        try:
            p = plan(run.model, run.placement, lay, replace(tr, efficiency=eff), with_verdict=False)
        except RingtreeError:
            continue
        key = (not p.fits_memory, p.step_time_s)
        if best is None or key < (not best.fits_memory, best.step_time_s):
            best = p
    if best is None:
        raise RingtreeError(f"{run.name}: no setting applies")
    return best


def error(run: Run, p: Plan) -> float:
    """Predicted over published iteration time, minus 1 (from MFUs, or model TFLOP/s per GPU,
    when only those are published: published over predicted, minus 1)."""
    if run.published_s is not None:
        return p.step_time_s / run.published_s - 1  # type: ignore[operator]
    if run.published_mfu is not None:
        return run.published_mfu / p.mfu - 1  # type: ignore[operator]
    return run.published_tflops / predicted_tflops(p) - 1  # type: ignore[operator]


def predicted_tflops(p: Plan) -> float:
    """Model TFLOP/s per GPU of a plan (the planner's FLOP count, Megatron-LM's)."""
    return p.model_flops / (p.step_time_s * p.placement.gpus) / 1e12  # type: ignore[operator]


def memory_checks(runs: list[Run], effs: dict[str, Efficiency]) -> list[dict]:
    """Published memory per GPU (BLOOM's nvidia-smi snapshots, GB as printed) against the
    prediction for the run's setting."""
    out = []
    for run in runs:
        published = run.data.get("memory_per_gpu_gb")
        if published is None:
            continue
        p = predict(run, efficiency(run, effs))
        got = p.memory_bytes_per_gpu / 1e9
        out.append({"source": run.source, "run": run.name, "published_gb": published,
                    "predicted_gb": got, "error": got / published - 1})
    return out


def activation_checks() -> list[dict]:
    """Korthikanti et al.'s activation memory per layer (their formulas evaluated in
    activation_memory.toml) against :func:`activation_bytes_per_layer`."""
    data = tomllib.loads((HERE / "activation_memory.toml").read_text())
    cases = {
        "per_layer_gib_tensor_parallel": (False, "none"),
        "per_layer_gib_tensor_sequence_parallel": (True, "none"),
        "per_layer_gib_tensor_parallel_selective": (False, "selective"),
        "per_layer_gib_tensor_sequence_parallel_selective": (True, "selective"),
        "per_layer_gib_full_recompute": (False, "full"),
    }
    out = []
    for d in data["derived"]:
        h = d["hidden"]
        m = Model(d["model"], 1, d["layers"], h, d["seq_len"], heads=d["heads"], ffn=4 * h,
                  vocab=51200, tied=True, dropout=True)
        for key, (sp, rc) in cases.items():
            got = activation_bytes_per_layer(m, d["micro_batch"], d["tp"], sp, rc, "unfused")
            got /= 2**30
            out.append({"model": d["model"], "case": key, "published_gib": d[key],
                        "predicted_gib": got, "error": got / d[key] - 1})
    return out


#: Runs whose authors searched configurations: --search must rank theirs first or within 5 %.
#: The search keeps what the authors kept fixed: BLOOM's activation checkpointing (and its
#: framework's ZeRO-1 beside a pipeline), Llama 3's absence of it at 8k tokens and its data
#: parallelism: FSDP that "shards optimizer states and gradients, but for model shards we do
#: not reshard after forward computation" (Dubey et al. 2024, 3.3.2), ZeRO-2's memory and
#: traffic (zero3 re-gathers after forward). (source, run, the ZeRO stages searched.)
SEARCHED = (("bloom176b", "bloom-176b-production-iter85376", FLAVORS),
            ("llama3", "llama3-405b-8k-8192gpu", ("zero2",)),
            ("llama3", "llama3-405b-8k-16384gpu", ("zero2",)),
            ("llama3", "llama3-405b-128k-16384gpu", ("zero2",)))


def search_checks(runs: list[Run], effs: dict[str, Efficiency]) -> list[dict]:
    """Their configuration's predicted step against the best ``--search`` finds under the
    same assumptions (framework, attention kernels, overlap, batch, ZeRO stage), and against
    the best over every ZeRO stage (``any_stage_*``: shown, not the check)."""
    out = []
    for source, name, stages in SEARCHED:
        run = next(r for r in runs if r.source == source and r.name == name)
        theirs = predict(run, efficiency(run, effs))
        base = replace(theirs.training, efficiency=efficiency(run, effs))
        fixed = run.data.get("recompute") in ("none", "selective", "full")
        found = search(run.model, run.placement, base, top=1, fixed_recompute=fixed, flavors=stages)
        best = found.plans[0]
        anyway = found if stages == FLAVORS else search(run.model, run.placement, base, top=1,
                                                        fixed_recompute=fixed)
        any_best = anyway.plans[0]
        out.append({
            "source": source, "run": name, "theirs": theirs.strategy,
            "theirs_micro_batch": theirs.training.micro_batch,
            "theirs_s": theirs.step_time_s, "best": best.strategy,
            "best_micro_batch": best.training.micro_batch,
            "best_recompute": best.training.recompute, "best_s": best.step_time_s,
            "considered": found.considered, "stages": list(stages),
            "any_stage_best": any_best.strategy, "any_stage_best_s": any_best.step_time_s,
            "any_stage_within": theirs.step_time_s / any_best.step_time_s - 1,  # type: ignore[operator]
            "within": theirs.step_time_s / best.step_time_s - 1,  # type: ignore[operator]
        })
    return out


def fit(runs: list[Run]) -> dict[str, Efficiency]:
    """Each generation's efficiency fitted on its calibration run."""
    out = {}
    for arch, (source, name) in CALIBRATION.items():
        run = next(r for r in runs if r.source == source and r.name == name)
        best = predict(run, GENERATION[arch])
        target = run.published_s
        if target is None:
            target = best.step_time_s * best.mfu / run.published_mfu  # type: ignore[operator]
        lay = best.layout
        eff = fit_efficiency(run.model, run.placement, lay, best.training, target)
        out[arch] = replace(eff, source=f"fitted on {source} {name}")
    return out


def row(run: Run, p: Plan | None, effs: dict[str, Efficiency]) -> dict:
    """One run's record: what it is (source, precision, strategy, framework) and, when
    planned, its predicted and published figures and the signed error."""
    out = {
        "source": run.source, "name": run.name, "run": run.name,
        "fit": (CALIBRATION.get(run.arch) == (run.source, run.name)
                or (run.source, run.name) in FITTED), "gpu": run.arch,
        **described(run.source, run.data),
        "published_s": run.published_s, "published_mfu": run.published_mfu,
        "published_tflops": run.published_tflops,
    }
    out["strategy"] = p.strategy if p else out["stated_strategy"]
    if p is not None:
        out.update({
            "predicted_s": p.step_time_s, "predicted_mfu": p.mfu,
            "predicted_tflops": predicted_tflops(p), "error": error(run, p),
            "micro_batch": p.training.micro_batch, "recompute": p.training.recompute,
            "fits": p.fits_memory, "memory_gb": p.memory_bytes_per_gpu / 1e9,
            "efficiency": efficiency(run, effs).source,
        })
        if "memory_gib" in run.data:  # torchtitan's peak, the largest over GPUs
            out["published_memory_gib"] = run.data["memory_gib"]
    return out


def lift(why: str | None, lifted: tuple[str, ...]) -> str | None:
    """The reasons left once those containing any of ``lifted`` are set aside (a feature a
    branch adds, measured before its reason is deleted)."""
    rest = [w for w in (why or "").split(SEP) if w and not any(x in w for x in lifted)]
    return SEP.join(rest) or None


def compare(runs: list[Run], skipped: list[tuple[str, str, str, dict]],
            effs: dict[str, Efficiency], lifted: tuple[str, ...] = ()) -> dict:
    """Every run predicted and compared: the counted ones (``runs``: fit and check), those
    outside the model (predicted where possible, not counted) and those left out."""
    counted, left = [], []
    for run in runs:
        why = lift(outside(run.source, run.data), lifted)
        try:
            p = predict(run, efficiency(run, effs))
        except RingtreeError as e:
            if why is None:
                raise
            p, why = None, f"{why}{SEP}no setting plans: {e}"
        rec = row(run, p, effs)
        if why is None:
            rec["role"] = "fit" if rec["fit"] else "check"
            counted.append(rec)
        else:
            left.append({**rec, "role": "outside", "why": why, "kind": "outside the model"})
    left += [{"source": s, "name": n, "run": n, **described(s, r), "why": w, "kind": "left out",
              "error": None} for s, n, w, r in skipped]
    return {"runs": counted, "left_out_runs": left, **summary(counted, left)}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summary(counted: list[dict], left: list[dict]) -> dict:
    """Mean and worst |error| over every counted run, over the checks (fit false) and the
    fitted runs, per source, and the left-out runs counted by reason."""
    errs = [abs(r["error"]) for r in counted]
    check = [abs(r["error"]) for r in counted if not r["fit"]]
    fitted = [abs(r["error"]) for r in counted if r["fit"]]
    sources: dict[str, dict] = {}
    for r in counted + left:
        s = sources.setdefault(r["source"], {"counted": 0, "left_out": 0, "check": [], "fit": []})
        if r in left:
            s["left_out"] += 1
        else:
            s["counted"] += 1
            s["fit" if r["fit"] else "check"].append(abs(r["error"]))
    per_source = {k: {"counted": v["counted"], "left_out": v["left_out"],
                      "check_mean_abs_error": _mean(v["check"]),
                      "fit_mean_abs_error": _mean(v["fit"])} for k, v in sources.items()}
    reasons: dict[str, int] = {}
    alone: dict[str, list[float]] = {}  # runs outside for one reason only: their errors
    for r in left:
        for why in r["why"].split(SEP):
            reasons[why] = reasons.get(why, 0) + 1
        if r.get("error") is not None and SEP not in r["why"]:
            alone.setdefault(r["why"], []).append(abs(r["error"]))
    return {
        "mean_abs_error": _mean(errs), "max_abs_error": max(errs, default=None),
        "check_mean_abs_error": _mean(check), "check_max_abs_error": max(check, default=None),
        "fit_mean_abs_error": _mean(fitted), "counted": len(counted),
        "checked_runs": len(check), "left_out": len(left),
        "generations": sorted({r["gpu"] for r in counted if not r["fit"]}),
        "sources": per_source, "left_out_by_reason": reasons,
        "outside_for_one_reason": {w: {"runs": len(e), "mean_abs_error": _mean(e),
                                       "max_abs_error": max(e)} for w, e in alone.items()},
        # runs that ran, planned where the planner judges they do not fit (issue 28, item 6)
        "ran_but_predicted_not_to_fit": [r["name"] for r in counted + left
                                         if r.get("fits") is False],
        "peak_memory": [{"source": r["source"], "name": r["name"],
                         "published_gib": r["published_memory_gib"],
                         "predicted_gib": r["memory_gb"] * 1e9 / 2**30,
                         "error": r["memory_gb"] * 1e9 / 2**30 / r["published_memory_gib"] - 1}
                        for r in counted + left if r.get("published_memory_gib")],
    }


def main() -> int:
    """Print the comparison (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fit", action="store_true", help="refit the efficiencies and print them")
    ap.add_argument("--no-search", action="store_true", help="skip the searched-runs check")
    ap.add_argument("--memory", action="store_true", help="only the memory comparisons")
    ap.add_argument("--count", action="append", default=[], metavar="TEXT",
                    help="count the runs outside the model only for reasons containing TEXT "
                    "(repeatable; to measure a feature before its reason is deleted)")
    args = ap.parse_args()
    runs, skipped = load()
    effs = fit(runs) if args.fit else dict(GENERATION)
    if args.memory:
        return print_memory(memory_checks(runs, effs), activation_checks(), args.json)
    doc = compare(runs, skipped, effs, tuple(args.count))
    doc.update({
        "efficiency": {a: e.gemm for a, e in effs.items()},
        "calibration": {a: f"{s} {n}" for a, (s, n) in CALIBRATION.items()},
        "memory": memory_checks(runs, effs), "activation_memory": activation_checks(),
        "searched": [] if args.no_search else search_checks(runs, effs),
        "skipped": [{"source": s, "run": n, "why": w} for s, n, w, _ in skipped],
    })
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print_comparison(doc, effs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
