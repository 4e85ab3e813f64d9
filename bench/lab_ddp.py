"""Benchmark: the DDP lab on local gloo processes, ringtree's hook against PyTorch's all-reduce.

Goals: ``ringtree lab ddp --steps 50`` finishes in under two minutes on 2 cores (issue 8); a
DDP step with ringtree's hook hides communication behind the backward pass and takes no longer
than with torch's own gloo all-reduce hook (issue 16).

Each repeat trains three runs in the same processes, one after another: without any
communication (``compute``: every bucket returned as it is), with torch's all-reduce hook, and
with ringtree's. Per run it prints the median step time (the slowest rank's), the median time
the step's all-reduces were in flight (the union of its buckets' spans, hook call to result),
what they added to the step (``exposed``: the step's time minus the ``compute`` run's) and the
share of their time hidden behind computation (``hidden = 1 - exposed / in flight``); then
ringtree's step time over torch's, per repeat and its median. Small buckets
(``--bucket-cap-mb``) give DDP several buckets per step, so that there is something to overlap.

    .venv/bin/python bench/lab_ddp.py [--ranks 2] [--steps 50] [--bucket-cap-mb 0.25]
                                      [--repeats 3] [--algorithm auto] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

from ringtree.lab.ddp import LabConfig, LabResult, run_lab

GOAL_S = 120.0
RUNS = ("compute", "torch", "ringtree")


def bucket_comm_s(result: LabResult, run: str) -> list[float]:
    """Per (step, bucket): the shortest measured time over the ranks."""
    by_bucket: dict[tuple[int, int], list[float]] = defaultdict(list)
    for rr in result.runs[run]:
        for b in rr.buckets:
            by_bucket[(b["step"], b["index"])].append(b["measured_s"])
    return [min(v) for v in by_bucket.values()]


def step_s(result: LabResult, run: str) -> list[float]:
    """Per step: the slowest rank's step time."""
    ranks = result.runs[run]
    return [max(rr.step_end_s[k] - rr.step_start_s[k] for rr in ranks)
            for k in range(result.config.steps)]


def in_flight_s(result: LabResult, run: str) -> list[float]:
    """Per step: the longest, over the ranks, union of the step's bucket spans."""
    out = []
    for k in range(1, result.config.steps + 1):
        per_rank = []
        for rr in result.runs[run]:
            spans = sorted((b["t_start_s"], b["t_end_s"]) for b in rr.buckets if b["step"] == k)
            total, reach = 0.0, float("-inf")
            for a, b in spans:
                total += max(0.0, b - max(a, reach))
                reach = max(reach, b)
            per_rank.append(total)
        out.append(max(per_rank))
    return out


def figures(result: LabResult) -> dict[str, dict[str, float]]:
    """Per run: median step, in flight, exposed (ms) and hidden (fraction)."""
    base = statistics.median(step_s(result, "compute"))
    out = {}
    for run in RUNS:
        step = statistics.median(step_s(result, run))
        fly = statistics.median(in_flight_s(result, run)) if run != "compute" else 0.0
        exposed = max(0.0, step - base)
        hidden = min(1.0, max(0.0, 1 - exposed / fly)) if fly > 0 else 0.0
        per_step = len(result.runs[run][0].buckets) / result.config.steps
        out[run] = {"step_ms": step * 1e3, "in_flight_ms": fly * 1e3,
                    "exposed_ms": exposed * 1e3, "hidden": hidden,
                    "buckets_per_step": per_step}
    return out


def main() -> None:
    """Run the lab ``--repeats`` times and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--bucket-cap-mb", type=float, default=0.25)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--algorithm", default="auto")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    config = LabConfig(ranks=a.ranks, steps=a.steps, algorithm=a.algorithm,
                       bucket_cap_mb=a.bucket_cap_mb, timeout_s=600)
    repeats = []
    for i in range(a.repeats):
        result = run_lab(config, runs=RUNS)
        f = figures(result)
        ratio = f["ringtree"]["step_ms"] / f["torch"]["step_ms"]
        repeats.append({"wall_s": result.wall_s, "runs": f, "step_ratio": ratio,
                        "params": result.n_params})
        if not a.json:
            print(f"# repeat {i + 1}: {a.ranks} ranks, {a.steps} steps, bucket cap "
                  f"{a.bucket_cap_mb:g} MB, {result.n_params:,} parameters, wall "
                  f"{result.wall_s:.1f} s (goal for the 2-run lab: {GOAL_S:.0f} s)")
            for run, r in f.items():
                print(f"  {run:9s} step_ms {r['step_ms']:8.2f}  in_flight_ms "
                      f"{r['in_flight_ms']:7.2f}  exposed_ms {r['exposed_ms']:7.2f}  hidden "
                      f"{r['hidden']:5.0%}  buckets/step {r['buckets_per_step']:.0f}")
            print(f"  ratio ringtree/torch step_ms {ratio:.2f}")
    med = statistics.median(r["step_ratio"] for r in repeats)
    hidden = {run: statistics.median(r["runs"][run]["hidden"] for r in repeats)
              for run in ("torch", "ringtree")}
    if a.json:
        print(json.dumps({"repeats": repeats, "median_step_ratio": med, "median_hidden": hidden},
                         indent=2))
    else:
        print(f"median over {a.repeats} repeats: ringtree/torch step time {med:.2f}; hidden "
              f"share torch {hidden['torch']:.0%}, ringtree {hidden['ringtree']:.0%}")


if __name__ == "__main__":
    main()
