"""The lab's profiled run (``ringtree lab ddp --torch-profile DIR``): torch.profiler around
DDP's steps on each rank, and the machine's load while it ran.

Each step is a ``ProfilerStep#N``; the first step is skipped (DDP's first iteration also
broadcasts its state and rebuilds its buckets) and the second warms the profiler up and is not
recorded, as torch's profiler recipe does (``wait=1, warmup=1``), where the run has the steps.
Rank r's trace is ``DIR/rank{r}.json``, written when the last step ends.

The load. A prediction on a calibrated one-machine link is for the cores the ranks have
(:func:`ringtree.cost.host.under_load`; ``ringtree validate`` predicts for the cores other
programs leave free). So the run measures them, as ``ringtree bench`` does: the machine's busy
CPU time (Linux ``/proc/stat``) less the ranks' own (``getrusage``, every thread), over the
run's wall time, in cores; each trace carries it as a top-level ``"ringtree_load":
{"other_cores": x, "wall_s": t}``, which ``ringtree profile`` reads. Elsewhere (no
``/proc/stat``) the key is absent and predictions are for an idle machine.
"""

from __future__ import annotations

import json
import os
import resource
import time
import warnings
from pathlib import Path
from typing import Any

from ringtree.kineto.rank import LOAD_KEY


def busy_cpu_s() -> float | None:
    """The machine's busy CPU seconds so far (user, nice, system, irq, softirq, steal of
    ``/proc/stat``'s first line); None where there is no such file."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        ticks = [int(v) for v in first[1:9]] + [0] * 8
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """This process's CPU seconds, all threads."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


class Profiled:
    """torch.profiler on one rank over a run of ``steps`` steps, writing ``folder/rank{r}.json``
    (module doc): :meth:`step` after each step, :meth:`finish` after the last."""

    def __init__(self, folder: str | Path, steps: int, rank: int) -> None:
        from torch.profiler import ProfilerActivity, profile, schedule

        self.path = Path(folder) / f"rank{rank}.json"
        wait = 1 if steps > 2 else 0
        warmup = 1 if steps > 1 else 0
        with warnings.catch_warnings():  # "won't be using warmup" for a one-step run
            warnings.simplefilter("ignore", UserWarning)
            plan = schedule(wait=wait, warmup=warmup, active=steps - wait - warmup,
                            repeat=1)
            self.prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                schedule=plan)
            self.prof.start()
        self.start = (time.perf_counter(), own_cpu_s(), busy_cpu_s())

    def step(self) -> None:
        """One step ended."""
        self.prof.step()

    def finish(self) -> None:
        """Stop, measure the load (a collective after the profiled window: every rank's CPU
        time), write the trace with it."""
        import torch.distributed as dist

        self.prof.stop()
        wall, own, busy = (time.perf_counter(), own_cpu_s(), busy_cpu_s())
        mine = own - self.start[1]
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        self.prof.export_chrome_trace(str(self.path))
        if busy is None or self.start[2] is None:
            return
        span = max(wall - self.start[0], 1e-9)
        other = max(0.0, (busy - self.start[2] - sum(every)) / span)
        load = json.dumps({LOAD_KEY: {"other_cores": other, "wall_s": span}})
        text = self.path.read_text()
        at = text.index("{")
        self.path.write_text(text[:at] + load[:-1] + ", " + text[at + 1:])
