"""How long ``ringtree plan`` takes at cluster scale, as a whole process.

Goals (issue 7): one strategy for 16,384 GPUs (2,048 nodes x 8) in under 1 s; ``--compare``
over every strategy for that cluster in under 5 s. The peer, measured in the same run, is the
bare interpreter start (``python -c pass``) and ``import ringtree``: what no plan can go under.

    .venv/bin/python bench/plan_scale.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CLUSTER = ["--gpus", "16384", "--gpus-per-node", "8", "--intra", "nvlink4", "--inter", "ib-ndr"]
CASES = [
    ("python -c pass (peer)", [sys.executable, "-c", "pass"], None),
    ("import ringtree (peer)", [sys.executable, "-c", "import ringtree.cli"], None),
    (
        "plan 70b zero3, 16384 GPUs",
        [sys.executable, "-m", "ringtree.cli", "plan", "--model", "70b", *CLUSTER,
         "--strategy", "zero3", "--compute", "1s", "--json"],
        1.0,
    ),
    (
        "plan 70b zero1,tp=8,pp=8, 16384 GPUs",
        [sys.executable, "-m", "ringtree.cli", "plan", "--model", "70b", *CLUSTER,
         "--strategy", "zero1,tp=8,pp=8", "--compute", "1s", "--json"],
        1.0,
    ),
    (
        "plan 7b ddp (all-reduce on 16384), 16384 GPUs",
        [sys.executable, "-m", "ringtree.cli", "plan", "--model", "7b", *CLUSTER,
         "--strategy", "ddp", "--compute", "1s", "--gpu-memory", "141GB", "--json"],
        1.0,
    ),
    (
        "plan 70b --compare (all), 16384 GPUs",
        [sys.executable, "-m", "ringtree.cli", "plan", "--model", "70b", *CLUSTER,
         "--compare", "--compute", "1s", "--json"],
        5.0,
    ),
]


def wall_s(argv: list[str]) -> float:
    """Seconds one run of ``argv`` takes, start to exit (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    """Run each case ``--repeat`` times, interleaved, and print medians against the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (default 5)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    for _ in range(args.repeat):  # interleaved, so machine noise hits every case alike
        for name, argv, _ in CASES:
            times[name].append(wall_s(argv))
    peer = statistics.median(times[CASES[1][0]])
    print(f"# ringtree plan at scale: median of {args.repeat} whole-process runs")
    print(f"# {'case':<46} {'median s':>9} {'min s':>7} {'x import':>9} {'goal':>7}")
    ok = True
    for name, _, goal in CASES:
        med, low = statistics.median(times[name]), min(times[name])
        verdict = "" if goal is None else ("ok" if med < goal else "MISSED")
        ok &= goal is None or med < goal
        goal_text = "" if goal is None else f"<{goal:g} s"
        print(f"  {name:<46} {med:9.3f} {low:7.3f} {med / peer:9.2f} {goal_text:>7} {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
