"""Benchmark: the DDP lab on local gloo processes, ringtree's hook against PyTorch's all-reduce.

Goal (issue 8): ``ringtree lab ddp --steps 50`` finishes in under two minutes on 2 cores.
Prints the wall time of the whole lab (start-up included) against that goal, and per run the
median step time and median per-bucket communication time (the shortest rank's, as the lab
reports it) with ringtree's over PyTorch's as a ratio, measured in the same run.

    .venv/bin/python bench/lab_ddp.py [--ranks 2] [--steps 50] [--algorithm auto]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from ringtree.lab.ddp import LabConfig, LabResult, run_lab

GOAL_S = 120.0


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
            for k in range(result.config.steps)]  # fmt: skip


def main() -> None:
    """Run the lab once and print the figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--algorithm", default="auto")
    a = p.parse_args()
    result = run_lab(LabConfig(ranks=a.ranks, steps=a.steps, algorithm=a.algorithm))
    print(f"# lab ddp: {a.ranks} ranks, {a.steps} steps per run, algorithm {a.algorithm}")
    print(f"wall_s {result.wall_s:.1f}  goal_s {GOAL_S:.0f}  "
          f"fraction_of_goal {result.wall_s / GOAL_S:.2f}")  # fmt: skip
    medians = {}
    for run in result.runs:
        medians[run] = statistics.median(bucket_comm_s(result, run))
        print(f"{run:9s} median_step_ms {statistics.median(step_s(result, run)) * 1e3:8.2f}  "
              f"median_bucket_comm_ms {medians[run] * 1e3:8.3f}")  # fmt: skip
    print(f"ratio ringtree/torch bucket_comm {medians['ringtree'] / medians['torch']:.2f}")
    print(f"max_difference_between_runs {result.run_difference():.3g}")


if __name__ == "__main__":
    main()
