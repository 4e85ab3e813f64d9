"""A collective on N local processes, verified and timed: the library behind ``ringtree run``.

:func:`run_processes` starts the ranks (:mod:`ringtree.runtime.launch`), each runs
:mod:`ringtree.runtime.worker`, and the report puts side by side what was measured (median
time per call, bytes each rank's transport sent) and what the schedule and the cost model
say (bytes per rank, predicted time on the link the ranks see: gloo's loopback TCP, MPI's
shared memory, slower when there are more ranks than cores, or for NCCL a PCIe 4 GPU link,
or loopback TCP when ranks share a GPU and NCCL carries their messages over sockets).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective, ReduceOp
from ringtree.cost.models import predict
from ringtree.errors import RingtreeError
from ringtree.runtime import api
from ringtree.runtime.auto import link_for
from ringtree.runtime.launch import Launch, launch
from ringtree.units import dtype_bytes

#: dtypes ``run`` offers per backend (each engine's own collective must handle them too).
_TORCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")
RUN_DTYPES = {
    "gloo": _TORCH_DTYPES,
    "nccl": _TORCH_DTYPES,
    "mpi": ("float32", "float64", "int8", "uint8", "int32", "int64"),
}
_ALIASES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16",
            "float": "float32", "double": "float64", "half": "float16"}  # fmt: skip
#: Warn when asked for more ranks than this many per core.
RANKS_PER_CORE_WARN = 4


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
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in RUN_DTYPES[backend]:
        raise RingtreeError(
            f"dtype {name!r} is not offered by run --backend {backend}: expected one of "
            f"{', '.join(RUN_DTYPES[backend])}"
        )
    return key


def oversubscription_warning(n_ranks: int) -> str | None:
    """A warning when N exceeds RANKS_PER_CORE_WARN ranks per core, else None."""
    cores = os.cpu_count() or 1
    if n_ranks > RANKS_PER_CORE_WARN * cores:
        return (
            f"{n_ranks} ranks on {cores} cores (more than {RANKS_PER_CORE_WARN} per core): "
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
    itemsize = dtype_bytes(dt)
    if n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {n_ranks}")
    if size_bytes % itemsize:
        raise RingtreeError(f"size {size_bytes} B is not a whole number of {dt} elements")
    if col.has_root and not 0 <= root < n_ranks:
        raise RingtreeError(f"root {root} is not a rank of 0..{n_ranks - 1}")
    if kill_rank is not None and not 0 <= kill_rank < n_ranks:
        raise RingtreeError(f"--kill-rank {kill_rank} is not a rank of 0..{n_ranks - 1}")
    if col.reduces:
        from ringtree.runtime.kernels import check_dtype

        check_dtype(dt, rop)
    count = size_bytes // itemsize
    name, chunks = api.resolve(col, algorithm, n_ranks, count, itemsize, root, n_chunks,
                               kind=backend)  # fmt: skip
    sched = api.schedule(col, name, n_ranks, root, chunks, ranks_per_node)  # validates
    config = {
        "backend": backend, "collective": col.value, "size_bytes": size_bytes, "dtype": dt,
        "itemsize": itemsize, "algorithm": name, "n_chunks": chunks, "op": rop.value,
        "root": root, "iters": iters, "timeout_s": timeout_s, "check": check,
        "kill_rank": kill_rank, "ranks_per_node": ranks_per_node,
    }  # fmt: skip
    if backend == "mpi":
        _require_mpi4py()
    shares_gpus = backend == "nccl" and n_ranks > _require_gpus()
    argv = ["-m", "ringtree.runtime.worker", json.dumps(config)]
    startup_s = 30.0 + 3.0 * n_ranks
    outcome = launch(n_ranks, backend, argv, timeout_s=startup_s + timeout_s * (iters + 3))
    if not outcome.ok:
        raise RunFailed(failure_message(outcome, timeout_s))
    results = [r.result or {} for r in outcome.ranks]
    per_iter = [max(ts) for ts in zip(*(r["times_s"] for r in results), strict=True)]
    spec = BuildSpec(root=root, n_chunks=chunks, ranks_per_node=ranks_per_node)
    # ranks that share a GPU talk through NCCL's sockets on loopback (runtime/launch.py)
    link = link_for("gloo" if shares_gpus else backend, n_ranks)
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
        ranks=[
            {
                "rank": i,
                "bytes_sent": r["bytes_sent"],
                "bytes_sent_schedule": r["bytes_sent_schedule"],
                "messages_sent": r["messages_sent"],
            }
            for i, r in enumerate(results)
        ],
        times_s=per_iter,
        step_done_s=[r.get("step_done_s", []) for r in results],
    )


def failure_message(outcome: Launch, timeout_s: float) -> str:
    """One line per failed rank, the dead ones first (the likely cause)."""
    dead, errors = [], []
    for r in outcome.ranks:
        if r.status is not None and r.status < 0:
            dead.append(f"rank {r.rank} died (signal {-r.status})")
        elif r.error:
            errors.append(r.error.removeprefix("ringtree: error: "))
        elif r.status not in (0, None):
            errors.append(f"rank {r.rank} exited with status {r.status}")
    if outcome.timed_out and not dead and not errors:
        errors.append(f"the ranks did not finish in time (timeout {timeout_s:g} s per call)")
    return "; ".join(dead + errors) or "the ranks failed without saying why"


def _require_gpus() -> int:
    """The number of CUDA GPUs; RingtreeError when there is none (backend nccl)."""
    from ringtree.runtime.launch import gpu_count

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
