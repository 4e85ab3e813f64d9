"""The lab's real run as a Chrome trace (open in https://ui.perfetto.dev or chrome://tracing).

One process per training run (``PyTorch's all-reduce (gloo)``, ``ringtree's hook``), one
track per rank (``rank r``), all on one clock (0 = the first step of the first run). On each
rank's track, nested: a slice per training step (``step k``, forward + backward + optimizer),
inside it the backward pass (``backward``, ending when DDP has every bucket back), and, for
ringtree's run when the engine recorded them, the engine's slices per send, receive and
reduce (args: bytes, chunk, peer, step of the schedule, phase; laid out by
:func:`ringtree.trace.chrome.to_chrome_trace`, so sends and receives that overlap go to extra
lanes of the same rank). Beside it, ``rank r (all-reduce)``: a slice per gradient bucket's
all-reduce from the hook's call to its result (``bucket i``, args: training step, bucket,
bytes, algorithm, measured and predicted seconds, the transport's byte counts), on more
lanes when successive buckets are in flight together -- what overlaps the backward pass
shows there.
"""

from __future__ import annotations

from typing import Any

from ringtree.lab.ddp import RUN_TITLES, LabResult
from ringtree.trace.chrome import to_chrome_trace
from ringtree.units import format_bytes

# BucketRecord fields a bucket slice shows in its args.
BUCKET_ARGS = ("bytes", "algorithm", "n_chunks", "measured_s", "predicted_s", "bytes_sent",
               "bytes_received")


def _slice(pid: int, tid: int, name: str, cat: str, start_s: float, end_s: float, t0: float,
           args: dict[str, Any]) -> dict[str, Any]:
    ts_ns = round((start_s - t0) * 1e9)
    dur_ns = round((end_s - t0) * 1e9) - ts_ns
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "cat": cat,
            "ts": ts_ns / 1000, "dur": dur_ns / 1000, "args": args}


#: Bucket tracks' thread ids start here (the engine's tracks are ``rank + lane x ranks``).
BUCKET_TID = 10_000


def _bucket_lanes(buckets: list[dict[str, Any]]) -> list[int]:
    """Per bucket (in order), the first lane free at its start: asynchronous all-reduces of
    successive buckets overlap, and slices of one track must nest."""
    ends: list[float] = []
    out = []
    for b in buckets:
        lane = next((i for i, end in enumerate(ends) if end <= b["t_start_s"]), len(ends))
        if lane == len(ends):
            ends.append(0.0)
        ends[lane] = b["t_end_s"]
        out.append(lane)
    return out


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
                                  {"training_step": k + 1, "loss": rr.losses[k]}))
            for k, (start, end) in enumerate(zip(rr.backward_start_s, rr.backward_end_s,
                                                 strict=True)):
                out.append(_slice(pid, rr.rank, "backward", "backward", start, end, t0,
                                  {"training_step": k + 1}))
            buckets = sorted(rr.buckets, key=lambda b: b["t_start_s"])
            lanes = _bucket_lanes(buckets)
            for lane in range(max(lanes, default=-1) + 1):
                tid = BUCKET_TID + rr.rank * 100 + lane
                name = f"rank {rr.rank} (all-reduce{f' {lane + 1}' if lane else ''})"
                out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name",
                            "args": {"name": name}})
                out.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index",
                            "args": {"sort_index": BUCKET_TID + rr.rank * 100 + lane}})
            for b, lane in zip(buckets, lanes, strict=True):
                name = f"bucket {b['index']} ({format_bytes(b['bytes'])}, {b['algorithm']})"
                args = {"training_step": b["step"], "bucket": b["index"]}
                args.update((key, b[key]) for key in BUCKET_ARGS)
                tid = BUCKET_TID + rr.rank * 100 + lane
                out.append(_slice(pid, tid, name, "bucket", b["t_start_s"], b["t_end_s"], t0,
                                  args))
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
