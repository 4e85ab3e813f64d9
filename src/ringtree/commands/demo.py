"""``ringtree demo``: the main job. For now the simulated trace of a ring all-reduce on 4 ranks."""

from __future__ import annotations

import argparse

import numpy as np

from ringtree.algorithms import build
from ringtree.collectives import Collective, ReduceOp, reference
from ringtree.output import stdout_console
from ringtree.simulate import simulate
from ringtree.trace.steps import trace_data
from ringtree.trace.text import render_steps


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` command."""
    p = sub.add_parser("demo", help="the main job: a ring all-reduce on 4 ranks, traced")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Trace a ring all-reduce of 1 MiB on 4 ranks and check it against numpy."""
    console = stdout_console()
    s = build(Collective.ALL_REDUCE, "ring", 4)
    count = (1 << 20) // 4
    render_steps(console, trace_data(s, count, 4))
    rng = np.random.default_rng(0)
    inputs = [rng.integers(-100, 100, count).astype(np.float32) for _ in range(4)]
    got, want = simulate(s, inputs, ReduceOp.SUM), reference(s.collective, inputs)
    ok = all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    console.print(f"simulated result {'matches' if ok else 'DIFFERS FROM'} numpy's sum")
    return 0 if ok else 1
