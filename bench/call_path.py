"""The engine's own cost per call: a 4 KiB call through the whole call path, without a wire.

Rank 0 of 2 over a transport whose sends and receives complete at once (nothing moves; a
receive fills its buffer with zeros), so what is timed is ringtree's Python from the call to
its return -- the group lookup, the options, the buffers' views, the plan's key and lookup,
the executor's replay of the tape, the kernels -- and none of a peer's or an engine's time.
That is the part of a small call a change to the call path can make slower or faster, and it
is measured with far less noise than a bench of real processes on a shared machine.

    python bench/call_path.py                        # all-reduce, 4 KiB, torch tensor
    python bench/call_path.py --collective reduce-scatter --numpy --json

Prints the median over ``--repeat`` timeit repetitions of ``--number`` calls each, in
microseconds per call of this process's CPU time (the call runs on one thread and never
waits; on a shared machine the wall clock, ``--wall``, also counts whatever else runs). To
compare two trees, run it from each in turn, several times, interleaved
(``PYTHONPATH=<tree>/src``), and compare the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import timeit
from typing import Any

import numpy as np


def null_transport(kind: str) -> Any:
    """Rank 0 of 2 over nothing: every send and receive completes when posted."""
    from ringtree.runtime.transport import Transport

    class Done:
        def wait(self, timeout: Any = None) -> None:
            pass

    done = Done()

    class Null(Transport):
        def _send(self, buf: Any, peer: int, tag: int = 0) -> Any:
            return done

        def _recv(self, buf: Any, peer: int, tag: int = 0) -> Any:
            buf[...] = 0  # as if the peer sent zeros: sums stay zeros, call after call
            return done

        def wait(self, req: Any, timeout_s: float) -> None:
            pass

    t = Null(0, 2)
    t.kind = kind
    return t


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--collective", default="all-reduce",
                   help="all-reduce, reduce-scatter or all-to-all (default all-reduce)")
    p.add_argument("--bytes", type=int, default=4096, help="buffer size (default 4096)")
    p.add_argument("--numpy", action="store_true", help="numpy buffers instead of torch's")
    p.add_argument("--kind", default="gloo", help="the engine auto chooses for (default gloo)")
    p.add_argument("--number", type=int, default=2000, help="calls per repetition")
    p.add_argument("--repeat", type=int, default=30, help="repetitions (the median is shown)")
    p.add_argument("--wall", action="store_true",
                   help="time the wall clock instead of this process's CPU time")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args()

    from ringtree.runtime import api

    t = null_transport(args.kind)
    count = args.bytes // 4
    x = np.zeros(count, dtype=np.float32)
    half = np.empty(count // 2, dtype=np.float32)
    if not args.numpy:
        import torch

        x, half = torch.from_numpy(x), torch.from_numpy(half)
    whole = x.clone() if hasattr(x, "clone") else x.copy()
    calls = {
        "all-reduce": lambda **kw: api.all_reduce(x, group=t, **kw),
        "reduce-scatter": lambda **kw: api.reduce_scatter(half, x, group=t, **kw),
        "all-to-all": lambda **kw: api.all_to_all_single(whole, x, group=t, **kw),
    }
    call = calls[args.collective]
    # the first call makes the plan (unchecked: no peer sends a fingerprint); the timed
    # calls take the default path of a known shape, which skips the exchange
    call(check=False)
    timer = time.perf_counter if args.wall else time.process_time
    times = timeit.repeat(call, number=args.number, repeat=args.repeat, timer=timer)
    per_call_us = [s / args.number * 1e6 for s in times]
    median = statistics.median(per_call_us)
    if args.json:
        print(json.dumps({"collective": args.collective, "bytes": args.bytes,
                          "median_us": median, "per_call_us": per_call_us}))
    else:
        print(f"{args.collective} {args.bytes} B: {median:.2f} us per call (median of "
              f"{args.repeat} x {args.number}; range {min(per_call_us):.2f}-"
              f"{max(per_call_us):.2f})")


if __name__ == "__main__":
    main()
