"""Write ``deepep-like-ep64.json.gz``: a made-up GPU trace shaped like a DeepEP training step.

Rank 0 of 64 (``distributedInfo``), one ``ProfilerStep#1`` on the host, compute kernels on
stream 7 and DeepEP's communication kernels on stream 27, named as the public DeepEP library
names them (``deep_ep::internode::dispatch<...>``, github.com/deepseek-ai/DeepEP): 8 dispatch,
8 combine, 12 cached_notify and 4 notify_dispatch, each overlapping a GEMM. Every figure is made
up; only the shape follows a real trace. ``python tests/data/kineto/deepep_like.py OUT.json.gz``
"""

from __future__ import annotations

import gzip
import json
import sys

KERNELS = ("dispatch", "combine", "cached_notify", "notify_dispatch")
COUNTS = {"dispatch": 8, "combine": 8, "cached_notify": 12, "notify_dispatch": 4}
DUR_US = {"dispatch": 480, "combine": 760, "cached_notify": 40, "notify_dispatch": 60}


def events() -> list[dict]:
    t0, host = 1_000_000, {"pid": 1, "tid": 1}
    out: list[dict] = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": s,
                        "args": {"name": f"stream {s} "}} for s in (7, 27)]
    t, cid = t0 + 100, 1
    order = [k for k in KERNELS for _ in range(COUNTS[k])]
    for i, k in enumerate(order):
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t,
                  "dur": 5, "args": {"correlation": cid}, **host}
        comm = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 27, "ts": t + 10,
                "dur": DUR_US[k], "args": {"correlation": cid, "stream": 27, "device": 0},
                "name": f"void deep_ep::internode::{k}<false, 8>(int4*, float*, int, int)"}
        gemm = {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": t + 10, "dur": 900,
                "args": {"correlation": cid + 1, "stream": 7, "device": 0},
                "name": f"void cutlass::device_kernel<grouped_gemm_{i}>(Params)"}
        out += [launch, comm, gemm]
        t, cid = t + 1000, cid + 2
    out.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": t0,
                "dur": t - t0 + 100, **host})
    return out


def main() -> None:
    trace = {"schemaVersion": 1, "traceEvents": events(),
             "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 64},
             "deviceProperties": [{"id": 0, "name": "NVIDIA H800"}]}
    with gzip.open(sys.argv[1], "wt") as f:
        json.dump(trace, f)


if __name__ == "__main__":
    main()
