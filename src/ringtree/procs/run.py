"""A collective on N local processes, verified and timed: the library behind ``ringtree run``.

:func:`run_processes` starts the ranks (:mod:`ringtree.procs.launch`), each runs
:func:`run_rank` under the one rank main, and the report puts side by side what was measured (median
time per call, bytes each rank's transport sent) and what the schedule and the cost model
say (bytes per rank, predicted time on the link the ranks see: gloo's loopback TCP, MPI's
shared memory, slower when there are more ranks than cores, or for NCCL a PCIe 4 GPU link,
or loopback TCP when ranks share a GPU and NCCL carries their messages over sockets).
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ringtree import dtypes
from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective, ReduceOp
from ringtree.config import RANKS_PER_CORE
from ringtree.cost.models import predict
from ringtree.errors import RingtreeError
from ringtree.events import Recorder
from ringtree.procs.launch import launch_body
from ringtree.procs.native import (
    NativeEngine,
    call_buffers,
    copy_buffer,
    make_input,
)
from ringtree.runtime import api, calls
from ringtree.runtime.auto import link_for
from ringtree.runtime.transport import Buffer, Transport

#: dtypes ``run`` offers per backend (each engine's own collective must handle them too).
_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")
RUN_DTYPES = {
    "gloo": _TORCH_DTYPES,
    "nccl": _TORCH_DTYPES,
    "mpi": ("float32", "float64", "int8", "uint8", "int32", "int64"),
}


class RunFailed(Exception):
    """The collective failed on some rank (a dead peer, a timeout, a mismatch); the message
    names the ranks and their errors."""


@dataclass
class RunReport:
    """What ``ringtree run`` prints."""

    collective: str
    algorithm: str
    backend: str
    n_ranks: int
    size_bytes: int
    dtype: str
    op: str | None
    root: int | None
    iters: int
    correct: bool
    time_s: float
    predicted_s: float
    link: str
    n_steps: int
    ranks: list[dict[str, int]] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)
    #: per rank, per step: when the rank had applied the step's last message (median over
    #: the timed calls, seconds from the call's start; ranks idle in a step repeat the last)
    step_done_s: list[list[float]] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """The JSON of ``ringtree run --json``."""
        return {
            "correct": self.correct,
            "time_s": self.time_s,
            "predicted_s": self.predicted_s,
            "ranks": self.ranks,
            "collective": self.collective,
            "algorithm": self.algorithm,
            "backend": self.backend,
            "n_ranks": self.n_ranks,
            "size_bytes": self.size_bytes,
            "dtype": self.dtype,
            "op": self.op,
            "root": self.root,
            "iters": self.iters,
            "n_steps": self.n_steps,
            "link": self.link,
            "times_s": self.times_s,
        }


def canonical_dtype(name: str, backend: str) -> str:
    """``fp32`` -> ``float32``; RingtreeError unless ``backend``'s run supports it."""
    return dtypes.canonical(name, RUN_DTYPES[backend], f"run --backend {backend}")


def oversubscription_warning(n_ranks: int) -> str | None:
    """A warning when N exceeds RANKS_PER_CORE ranks per core, else None."""
    cores = os.cpu_count() or 1
    if n_ranks > RANKS_PER_CORE * cores:
        return (
            f"{n_ranks} ranks on {cores} cores (more than {RANKS_PER_CORE} per core): "
            "expect slow start-up and noisy timings; use fewer ranks or more machines"
        )
    return None


def run_processes(
    n_ranks: int,
    collective: Collective | str,
    size_bytes: int,
    *,
    backend: str = "gloo",
    algorithm: str = "auto",
    op: ReduceOp | str = ReduceOp.SUM,
    root: int = 0,
    dtype: str = "float32",
    iters: int = 10,
    timeout_s: float = 60.0,
    check: bool = True,
    kill_rank: int | None = None,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
) -> RunReport:
    """Run ``collective`` on ``n_ranks`` local processes and report; RunFailed if any rank
    failed (every process is gone by then), RingtreeError on bad arguments."""
    col = Collective.parse(collective)
    rop = ReduceOp.parse(op)
    dt = canonical_dtype(dtype, backend)
    itemsize = dtypes.itemsize(dt)
    count = _checked_count(col, rop, dt, n_ranks, size_bytes, root, kill_rank)
    if col is Collective.BARRIER:  # it moves nothing, whatever the size
        count = size_bytes = 0
    name, chunks = calls.resolve(col, algorithm.strip().lower(), n_ranks, count, itemsize, root,
                                 n_chunks, kind=backend)
    sched = calls.schedule(col, name, n_ranks, root, chunks, ranks_per_node)  # validates
    config = {
        "backend": backend, "collective": col.value, "size_bytes": size_bytes, "dtype": dt,
        "itemsize": itemsize, "algorithm": name, "n_chunks": chunks, "op": rop.value,
        "root": root, "iters": iters, "timeout_s": timeout_s, "check": check,
        "kill_rank": kill_rank, "ranks_per_node": ranks_per_node,
    }
    if backend == "mpi":
        _require_mpi4py()
    shares_gpus = backend == "nccl" and n_ranks > _require_gpus()
    startup_s = 30.0 + 3.0 * n_ranks
    total_s = startup_s + timeout_s * (iters + 3)
    outcome = launch_body(n_ranks, backend, "ringtree.procs.run:run_rank", config,
                          timeout_s=total_s)
    if not outcome.ok:
        raise RunFailed(outcome.failure_message(total_s))
    results = [r.result or {} for r in outcome.ranks]
    per_iter = [max(ts) for ts in zip(*(r["times_s"] for r in results), strict=True)]
    spec = BuildSpec(root=root, n_chunks=chunks, ranks_per_node=ranks_per_node)
    # ranks that share a GPU talk through NCCL's sockets on loopback (runtime/launch.py)
    link = link_for("gloo" if shares_gpus else backend)
    pred = predict(col, name, n_ranks, size_bytes, link, itemsize=itemsize, spec=spec)
    return RunReport(
        collective=col.value,
        algorithm=name,
        backend=backend,
        n_ranks=n_ranks,
        size_bytes=size_bytes,
        dtype=dt,
        op=rop.value if col.reduces else None,
        root=root if col.has_root else None,
        iters=iters,
        correct=all(r["correct"] for r in results),
        time_s=statistics.median(per_iter) if per_iter else 0.0,
        predicted_s=pred.time_s,
        link=f"{link.name}: {link.note}" if link.note else link.name,
        n_steps=sched.n_steps,
        ranks=[{"rank": i, **{k: r[k] for k in _RANK_FIELDS}} for i, r in enumerate(results)],
        times_s=per_iter,
        step_done_s=[r.get("step_done_s", []) for r in results],
    )


#: What the report gives of each rank's result.
_RANK_FIELDS = ("bytes_sent", "bytes_sent_schedule", "messages_sent")


def _checked_count(col: Collective, op: ReduceOp, dtype: str, n_ranks: int, size_bytes: int,
                   root: int, kill_rank: int | None) -> int:
    """The element count ``size_bytes`` of ``dtype`` holds; RingtreeError, saying what would
    do, when the arguments do not make a run."""
    itemsize = dtypes.itemsize(dtype)
    if n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {n_ranks}")
    if size_bytes % itemsize:
        raise RingtreeError(f"size {size_bytes} B is not a whole number of {dtype} elements")
    if col.has_root and not 0 <= root < n_ranks:
        raise RingtreeError(f"root {root} is not a rank of 0..{n_ranks - 1}")
    if kill_rank is not None and not 0 <= kill_rank < n_ranks:
        raise RingtreeError(f"--kill-rank {kill_rank} is not a rank of 0..{n_ranks - 1}")
    if col.reduces:
        from ringtree.runtime.kernels import check_dtype

        check_dtype(dtype, op)
    count = size_bytes // itemsize
    if col.layout.equal_blocks and count % n_ranks:
        raise RingtreeError(
            f"{col.value} of {count} {dtype} elements on {n_ranks} ranks: its blocks are equal "
            f"(one per rank, as torch's and MPI's), so the size must be a multiple of "
            f"{n_ranks} elements"
        )
    return count


def _require_gpus() -> int:
    """The number of CUDA GPUs; RingtreeError when there is none (backend nccl)."""
    from ringtree.procs.launch import gpu_count

    gpus = gpu_count()
    if gpus == 0:
        raise RingtreeError(
            "backend nccl needs a CUDA GPU and torch built with CUDA (torch.cuda.is_available() "
            "is False here): use --backend gloo on CPU"
        )
    return gpus


def _require_mpi4py() -> None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise RingtreeError(
            "backend mpi needs mpi4py and an MPI: pip install 'ringtree[mpi]'"
        ) from None
    if sys.platform == "win32":
        raise RingtreeError("backend mpi is not supported on Windows by ringtree run")


class DyingTransport(Transport):
    """Wraps a transport; the process kills itself (SIGKILL, no goodbye) when it is about to
    post send number ``after_sends`` -- a peer dying mid-collective. Fingerprints travel on
    the inner transport's control channel and do not count."""

    def __init__(self, inner: Transport, after_sends: int) -> None:
        super().__init__(inner.rank, inner.size)
        self.inner, self.after_sends = inner, after_sends
        self.kind, self.grouped, self.tag = inner.kind, inner.grouped, inner.tag

    def control(self) -> Transport:
        return self.inner.control()

    def message_tag(self, shape: int) -> int:
        return self.inner.message_tag(shape)

    def _send(self, buf: Buffer, peer: int, tag: int) -> Any:
        if self.messages_sent > self.after_sends:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner._send(buf, peer, tag)

    def _recv(self, buf: Buffer, peer: int, tag: int) -> Any:
        return self.inner._recv(buf, peer, tag)

    def wait(self, req: Any, timeout_s: float) -> None:
        self.inner.wait(req, timeout_s)


def run_rank(engine: NativeEngine, cfg: dict[str, Any]) -> dict[str, Any]:
    """One rank of ``ringtree run``: the engine's own collective first (what every rank must
    hold), then ringtree's on the same input, checked (the fingerprint exchanged when
    ``check``); the bytes its transport sent in one call; ``iters`` timed calls, each after a
    ringtree barrier (so that a dead peer is a PeerError here too), on buffers made before
    the barrier. ``kill_rank`` dies at its second send of the collective."""
    col = Collective.parse(cfg["collective"])
    op = ReduceOp.parse(cfg.get("op", "sum"))
    n, rank, root = engine.size, engine.rank, int(cfg.get("root", 0))
    itemsize = int(cfg["itemsize"])
    count = int(cfg["size_bytes"]) // itemsize
    if cfg.get("size_bytes_by_rank"):  # a rank asked to call with another size
        count = int(cfg["size_bytes_by_rank"].get(str(rank), cfg["size_bytes"])) // itemsize
    transport = api.transport_for(None)
    if cfg.get("kill_rank") == rank:
        transport = DyingTransport(transport, 1)
    raw = make_input(col, count, cfg["dtype"], op, rank, n)
    x = engine.array(raw)
    want = engine.native(col, x, op, root, count)
    kw: dict[str, Any] = {
        "algorithm": cfg["algorithm"], "timeout": cfg["timeout_s"], "n_chunks": cfg.get("n_chunks"),
        "ranks_per_node": cfg.get("ranks_per_node"), "slice_bytes": cfg.get("slice_bytes"),
    }

    def fresh() -> tuple[Any, Any]:  # each call gets the input anew (all-reduce is in place)
        return call_buffers(col, copy_buffer(x), count, n, rank, root)

    def ringtree_call(bufs: tuple[Any, Any], **extra: Any) -> Any:
        inp, out = bufs
        api.collective(col, inp, out, op, root, transport, **kw, **extra)
        return inp if out is None else out

    one = engine.array(np.ones(1, dtype=np.float32))

    def barrier() -> None:
        api.all_reduce(one, group=transport, algorithm="recursive", timeout=cfg["timeout_s"])
        engine.sync()

    got = engine.numpy(ringtree_call(fresh(), check="always" if cfg.get("check", True) else False))
    correct = bool(want is None or np.array_equal(got, want))  # None: nothing promised
    rec = Recorder(rank, messages=False)
    ringtree_call(fresh(), recorder=rec)  # the bytes at the transport for one call
    times, finished = [], []
    for _ in range(int(cfg["iters"])):
        bufs = fresh()  # made before the clock starts
        barrier()
        t0 = time.perf_counter()
        ringtree_call(bufs, recorder=rec)
        engine.sync()
        times.append(time.perf_counter() - t0)
        finished.append([m - t0 for m in rec.calls[-1].step_done_s])
    first = rec.calls[0]
    sched = calls.schedule(col, first.algorithm, n, root, first.n_chunks, cfg.get("ranks_per_node"))
    return {
        "correct": correct,
        "times_s": times,
        "step_done_s": [statistics.median(c) for c in zip(*finished, strict=True)],
        "bytes_sent": first.bytes_sent,
        "messages_sent": first.messages_sent,
        "bytes_sent_schedule": sched.bytes_sent(rank, count, itemsize),
        "algorithm": first.algorithm,
        "n_chunks": sched.n_chunks,
        "n_steps": sched.n_steps,
    }
