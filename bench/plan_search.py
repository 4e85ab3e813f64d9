"""How long ``ringtree plan --search`` takes, as a whole process, and how many configurations
it considers.

Goals (issue 18): 10^5 configurations in under 10 s on the project's 2 cores; a 70B model on
1,024 GPUs (dgx-h100, 128 nodes) over every configuration in under 10 s. The peer is
``import ringtree.cli``, what no search can go under.

    .venv/bin/python bench/plan_search.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

RT = [sys.executable, "-m", "ringtree.cli", "plan"]
CASES = [
    ("import ringtree (peer)", [sys.executable, "-c", "import ringtree.cli"], None),
    (
        "70b, 1,024 H100 (128 x dgx-h100), batch 1,024",
        [*RT, "--model", "70b", "--cluster", "dgx-h100", "--nodes", "128",
         "--global-batch", "1024", "--search", "--top", "5", "--json"],
        10.0,
    ),
    (
        "mixtral-8x7b, 512 H100 (64 x dgx-h100), batch 1,024",
        [*RT, "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "64",
         "--global-batch", "1024", "--search", "--top", "5", "--json"],
        10.0,
    ),
    (
        "llama3-405b, 8,192 H100 (1,024 x dgx-h100), batch 2,048",
        [*RT, "--model", "llama3-405b", "--cluster", "dgx-h100", "--nodes", "1024",
         "--global-batch", "2048", "--search", "--top", "5", "--json"],
        10.0,
    ),
]


def run(argv: list[str]) -> tuple[float, dict | None]:
    """Seconds one run of ``argv`` takes, start to exit, and its JSON (it must succeed)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{proc.stderr}")
    return wall, json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else None


def main() -> int:
    """Time each case ``--repeat`` times; print the median and the configurations."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"# ringtree plan --search: median of {args.repeat} whole-process runs")
    print(f"# {'case':56} {'median s':>8} {'min s':>7} {'configs':>8}   goal")
    for name, argv, goal in CASES:
        times, found = [], None
        for _ in range(args.repeat):
            t, found = run(argv)
            times.append(t)
        n = found["considered"] if found else 0
        ok = "" if goal is None else (f"<{goal:g} s " + ("ok" if statistics.median(times) < goal
                                                          else "MISSED"))
        best = f"  best {found['plans'][0]['strategy']}" if found and found["plans"] else ""
        print(f"  {name:56} {statistics.median(times):8.2f} {min(times):7.2f} {n:8,}   {ok}{best}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
