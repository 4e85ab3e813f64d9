"""Benchmark: ``ringtree profile`` on a large trace, time and peak memory.

Goal (issue 29): a 200 MB Kineto trace read in under 60 s, in memory bounded by what the
analysis keeps (a few numbers per kernel and operator), not by the file.

Writes a synthetic GPU trace of ``--mb`` megabytes shaped like torch.profiler's (the field
names and nesting of a torch 2.4 NCCL trace, HTA's ``nccl_parser_config`` sample): per step
a ``ProfilerStep#N``, CPU operators, a ``cudaLaunchKernel`` per kernel, compute kernels on
stream 7 and, every 50 kernels, an all-reduce -- ``c10d::allreduce_`` around
``record_param_comms`` (sizes, dtype, group) around ``nccl:all_reduce`` -- whose
``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` runs on stream 20. Then reads it in a fresh
process (so that its peak RSS is the reader's alone) with the library's own path
(``load_run`` + ``analyse`` on a cluster) and prints the file size, events, seconds, MB/s
and the peak RSS; ``--gzip`` writes and reads it gzipped.

    .venv/bin/python bench/profile_large_trace.py [--mb 200] [--gzip] [--keep FILE] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

GOAL_S = 60.0
KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def _step_events(step: int, t: float, corr: int, per_step: int) -> tuple[list[Any], float, int]:
    """One step's events from time ``t`` (us) and correlation id ``corr``."""
    out: list[dict[str, Any]] = []
    start = t
    for k in range(per_step):
        comm = k % 50 == 49
        if comm:
            nelems = 1 << 20
            out += [
                {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1,
                 "ts": t, "dur": 40.0, "args": {"External id": corr, "Input Dims": [[[nelems]]],
                                                 "Input type": ["TensorList"]}},
                {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                 "ts": t + 2, "dur": 30.0,
                 "args": {"Collective name": "allreduce", "In msg nelems": nelems,
                          "Out msg nelems": nelems, "Group size": 8, "dtype": "Float",
                          "Process Group Name": "0",
                          "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"}},
                {"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 1,
                 "tid": 1, "ts": t + 4, "dur": 20.0, "args": {"External id": corr + 1}},
            ]
        else:
            out.append({"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 1,
                        "ts": t, "dur": 8.0, "args": {"External id": corr,
                                                      "Input Dims": [[1024, 1024], [1024, 1024]],
                                                      "Input type": ["float", "float"]}})
        out.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                    "tid": 1, "ts": t + 5, "dur": 3.0,
                    "args": {"External id": corr, "cbid": 211, "correlation": corr}})
        out.append({"ph": "X", "cat": "kernel", "name": NCCL if comm else KERNEL, "pid": 0,
                    "tid": 20 if comm else 7, "ts": t + 30, "dur": 120.0 if comm else 9.0,
                    "args": {"External id": corr, "device": 0, "stream": 20 if comm else 7,
                             "correlation": corr, "grid": [108, 1, 1], "block": [128, 1, 1]}})
        t += 10.0
        corr += 2
    out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1,
                "tid": 1, "ts": start, "dur": t - start, "args": {}})
    return out, t, corr


def write_trace(f: IO[str], target_bytes: int) -> int:
    """Write a trace of about ``target_bytes``; the number of events."""
    head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0,
                                                     "world_size": 8}}
    f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n')
    written, n, step, t, corr, first = 0, 0, 0, 1.0e12, 1, True
    while written < target_bytes:
        events, t, corr = _step_events(step, t, corr, 1000)
        for e in events:
            line = ("" if first else ",\n") + json.dumps(e)
            f.write(line)
            written += len(line)
            first = False
        n += len(events)
        step += 1
    f.write("\n]}\n")
    return n


READER = """
import json, resource, sys, time
from ringtree.cost.clusters import get_cluster
from ringtree.kineto.load import load_run
from ringtree.kineto.pricing import Target
from ringtree.kineto.report import analyse
t = time.perf_counter()
run = load_run([sys.argv[1]])
rep = analyse(run, Target("dgx-a100", cluster=get_cluster("dgx-a100")))
s = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": s, "peak_rss_mb": rss, "calls": len(run.calls),
                  "steps": len(rep["steps"]), "rows": len(rep["collectives"])}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=200.0, help="trace size in MB (default 200)")
    ap.add_argument("--gzip", action="store_true", help="write and read it gzipped")
    ap.add_argument("--keep", metavar="FILE", help="write the trace here and keep it")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="ringtree-bench-")
    path = Path(args.keep) if args.keep else Path(folder) / ("big.json.gz" if args.gzip
                                                              else "big.json")
    try:
        t = time.perf_counter()
        with (gzip.open(path, "wt", compresslevel=1) if args.gzip else open(path, "w")) as f:
            n = write_trace(f, int(args.mb * 1e6))
        wrote = time.perf_counter() - t
        out = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True,
                             text=True, check=True)
        figs = json.loads(out.stdout)
        size = path.stat().st_size
        figs |= {"file_mb": size / 1e6, "events": n, "write_s": wrote,
                 "events_per_s": n / figs["seconds"], "goal_s": GOAL_S,
                 "ok": figs["seconds"] < GOAL_S}
    finally:
        if not args.keep and path.exists():
            path.unlink()
        os.rmdir(folder)
    if args.json:
        print(json.dumps(figs, indent=2))
    else:
        print(f"# {figs['file_mb']:.0f} MB on disk, {n:,} events ({figs['calls']:,} collective "
              f"calls, {figs['steps']} steps); written in {wrote:.1f} s")
        print(f"read + analysed in {figs['seconds']:.1f} s ({figs['events_per_s']:,.0f} "
              f"events/s), peak RSS {figs['peak_rss_mb']:.0f} MB; goal < {GOAL_S:.0f} s: "
              f"{'met' if figs['ok'] else 'MISSED'}")
    return 0 if figs["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
