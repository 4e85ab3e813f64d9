"""The lab's real run as a Chrome trace (open in https://ui.perfetto.dev or chrome://tracing).

One process per training run (``PyTorch's all-reduce (gloo)``, ``ringtree's hook``), one
track per rank (``rank r``), all on one clock (0 = the first step of the first run). On each
rank's track, nested: a slice per training step (``step k``, forward + backward + optimizer),
inside it a slice per gradient bucket's all-reduce (``bucket i``, args: training step,
bucket, bytes, algorithm, measured and predicted seconds, the transport's byte counts), and,
for ringtree's run when the engine recorded them, inside that the engine's slices per send,
receive and reduce (args: bytes, chunk, peer, step of the schedule, phase; laid out by
:func:`ringtree.trace.chrome.to_chrome_trace`, so sends and receives that overlap go to extra
lanes of the same rank).
"""

from __future__ import annotations

from typing import Any

from ringtree.lab.ddp import RUN_TITLES, LabResult
from ringtree.trace.chrome import to_chrome_trace
from ringtree.units import format_bytes

# BucketRecord fields a bucket slice shows in its args.
BUCKET_ARGS = ("bytes", "algorithm", "n_chunks", "measured_s", "predicted_s", "bytes_sent",
               "bytes_received")  # fmt: skip


def _slice(pid: int, tid: int, name: str, cat: str, start_s: float, end_s: float, t0: float,
           args: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    ts_ns = round((start_s - t0) * 1e9)
    dur_ns = round((end_s - t0) * 1e9) - ts_ns
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat,
            "ts": ts_ns / 1000, "dur": dur_ns / 1000, "args": args}  # fmt: skip


def lab_chrome_trace(result: LabResult) -> dict[str, Any]:
    """The trace-event JSON object of ``result`` (see the module doc), ready for json.dump."""
    n = result.config.ranks
    t0 = min(rr.step_start_s[0] for runs in result.runs.values() for rr in runs if rr.step_start_s)
    out: list[dict[str, Any]] = []
    for pid, (run, ranks) in enumerate(result.runs.items()):
        events = [e for rr in ranks for e in rr.events]
        part = to_chrome_trace(events, run=RUN_TITLES.get(run, run), pid=pid, n_ranks=n, t0_s=t0)
        out += part["traceEvents"]
        for rr in ranks:
            for k, (start, end) in enumerate(zip(rr.step_start_s, rr.step_end_s, strict=True)):
                out.append(_slice(pid, rr.rank, f"step {k + 1}", "step", start, end, t0,
                                  {"training_step": k + 1, "loss": rr.losses[k]}))  # fmt: skip
            for b in rr.buckets:
                name = f"bucket {b['index']} ({format_bytes(b['bytes'])}, {b['algorithm']})"
                args = {"training_step": b["step"], "bucket": b["index"]}
                args.update((key, b[key]) for key in BUCKET_ARGS)
                out.append(_slice(pid, rr.rank, name, "bucket", b["t_start_s"], b["t_end_s"],
                                  t0, args))  # fmt: skip
    cfg = result.config
    return {
        "traceEvents": out,
        "displayTimeUnit": "ns",
        "otherData": {
            "ranks": n,
            "steps": cfg.steps,
            "algorithm": cfg.algorithm,
            "seed": cfg.seed,
            "parameters": result.n_params,
            "runs": list(result.runs),
        },
    }
