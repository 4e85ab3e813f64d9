"""bench/plan_vs_published.py's text output: one line per run (published and predicted step,
MFU or TFLOP/s, the signed error, the setting), the means, and each left-out run's reasons."""

from __future__ import annotations

import json
import sys


def print_memory(mem: list[dict], acts: list[dict], as_json: bool) -> int:
    """The memory comparisons, as text or JSON."""
    if as_json:
        json.dump({"memory": mem, "activation_memory": acts}, sys.stdout, indent=2)
        print()
        return 0
    print("# memory per GPU, published (nvidia-smi, GB as printed) vs predicted:")
    for r in mem:
        print(f"  {r['source']:26} {r['run']:44} {r['published_gb']:6.1f} GB "
              f"{r['predicted_gb']:6.1f} GB {r['error']:+6.1%}")
    print(f"# Korthikanti et al.'s activation memory per layer: {len(acts)} cases, worst "
          f"|error| {max(abs(r['error']) for r in acts):.2%}")
    return 0


def _pair(r: dict, key: str) -> str:
    if r.get(f"published_{key}") is None or r.get(f"predicted_{key}") is None:
        return ""
    unit = {"s": "{:.2f} s", "mfu": "MFU {:.3f}", "tflops": "{:.0f} TF/s"}[key]
    return f"{unit.format(r[f'published_{key}']):>10} {unit.format(r[f'predicted_{key}']):>10}"


def _line(r: dict) -> str:
    pair = next((x for x in (_pair(r, k) for k in ("s", "mfu", "tflops")) if x), " " * 21)
    err = f"{r['error']:>+7.1%}" if r.get("error") is not None else "      -"
    fits = "" if r.get("fits", True) else " (does not fit)"
    return (f"  {r['source']:26} {r['name']:44} {r.get('gpus', ''):>5} {pair} {err}  "
            f"{r['strategy']} b={r.get('micro_batch', '-')} {r.get('recompute', '-')} "
            f"{r.get('precision', '')}{fits}")


def print_comparison(doc: dict, effs: dict) -> None:
    """The comparison as grep-friendly text: every counted run, the means (all, checks, fit)
    per source, the memory checks, the searched runs, every left-out run and why."""
    print("# ringtree plan vs published training runs (iteration time; MFU or model TFLOP/s "
          "per GPU where only that is)")
    for a, e in effs.items():
        print(f"# {a}: GEMMs at {e.gemm:.4f} of peak ({e.source})")
    print(f"# {'source':26} {'run':44} {'GPUs':>5} {'published':>10} {'predicted':>10} "
          f"{'error':>7}  setting")
    for r in doc["runs"]:
        print(_line(r) + (" (fit)" if r["fit"] else ""))
    fmt = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
    print(f"# counted: {doc['counted']} runs on {', '.join(doc['generations'])}: mean |error| "
          f"{fmt(doc['mean_abs_error'])}, worst {fmt(doc['max_abs_error'])}; checks (fit "
          f"false) {doc['checked_runs']}: mean {fmt(doc['check_mean_abs_error'])}, worst "
          f"{fmt(doc['check_max_abs_error'])}; fitted: mean {fmt(doc['fit_mean_abs_error'])}")
    for s, v in sorted(doc["sources"].items()):
        print(f"#   {s:26} counted {v['counted']:3}, left out {v['left_out']:3}; check mean "
              f"{fmt(v['check_mean_abs_error'])}, fit mean {fmt(v['fit_mean_abs_error'])}")
    print_memory(doc["memory"], doc["activation_memory"], False)
    for r in doc["searched"]:
        print(f"# searched by its authors: {r['source']} {r['run']}: theirs {r['theirs']} "
              f"b={r['theirs_micro_batch']} {r['theirs_s']:.2f} s, --search's best {r['best']} "
              f"b={r['best_micro_batch']} {r['best_recompute']} {r['best_s']:.2f} s of "
              f"{r['considered']:,} with {'/'.join(r['stages'])} (theirs {r['within']:+.1%}); "
              f"over every ZeRO stage {r['any_stage_best']} {r['any_stage_best_s']:.2f} s "
              f"(theirs {r['any_stage_within']:+.1%})")
    peaks = doc["peak_memory"]
    if peaks:
        worst = max(peaks, key=lambda r: abs(r["error"]))
        print(f"# peak memory per GPU as torchtitan reports it: {len(peaks)} runs, mean |error| "
              f"{sum(abs(r['error']) for r in peaks) / len(peaks):.1%}, worst {worst['name']} "
              f"{worst['published_gib']:.1f} GiB predicted {worst['predicted_gib']:.1f} GiB")
    print(f"# {len(doc['ran_but_predicted_not_to_fit'])} runs that ran are predicted not to fit "
          "in their GPUs' memory")
    print(f"# left out: {doc['left_out']} of {doc['left_out'] + doc['counted']} runs "
          "(outside the model: predicted, shown, not counted; left out: not plannable):")
    for why, n in sorted(doc["left_out_by_reason"].items(), key=lambda x: -x[1]):
        print(f"#   {n:4}  {why}")
    for why, v in doc["outside_for_one_reason"].items():
        print(f"# outside for this reason alone: {v['runs']} runs, mean |error| "
              f"{v['mean_abs_error']:.1%}, worst {v['max_abs_error']:.1%}: {why}")
    for r in doc["left_out_runs"]:
        head = _line(r) if r["kind"] == "outside the model" else f"  {r['source']:26} {r['name']}"
        print(f"{head}\n      {r['kind']}: {r['why']}")
