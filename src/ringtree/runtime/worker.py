"""What each rank of ``ringtree run`` (and ``ringtree demo``) does: ``python -m
ringtree.runtime.worker '<json config>'`` under the launcher.

1. join the group (gloo or NCCL from torchrun-style environment variables, or MPI's
   COMM_WORLD);
2. build its input: small integers, so every order of summation gives the same floats;
3. optionally exchange the call's fingerprint (mismatch detection);
4. run ringtree's collective and the engine's own on the same data and compare them;
5. count the bytes the transport sent in one call, next to the schedule's count;
6. time ``iters`` calls (a barrier before each);
7. write its result (or its error) where the launcher reads it, and exit (1 on error).

The config may ask one rank to die mid-collective (``kill_rank``), to show fault handling.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_bounds
from ringtree.errors import RingtreeError
from ringtree.runtime import api
from ringtree.runtime.errors import MismatchError, PeerError
from ringtree.runtime.launch import write_result
from ringtree.runtime.transport import Buffer, Transport


class DyingTransport(Transport):
    """Wraps a transport; the process kills itself (SIGKILL, no goodbye) when it is about to
    post send number ``after_sends`` -- a peer dying mid-collective."""

    def __init__(self, inner: Transport, after_sends: int) -> None:
        super().__init__(inner.rank, inner.size)
        self.inner, self.after_sends = inner, after_sends
        self.kind, self.grouped = inner.kind, inner.grouped

    def _send(self, buf: Buffer, peer: int) -> Any:
        if self.messages_sent > self.after_sends:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.inner._send(buf, peer)

    def _recv(self, buf: Buffer, peer: int) -> Any:
        return self.inner._recv(buf, peer)

    def wait(self, req: Any, timeout_s: float) -> None:
        self.inner.wait(req, timeout_s)


def main(
    config: dict[str, Any],
    body: Callable[[NativeEngine, dict[str, Any]], dict[str, Any]] | None = None,
) -> int:
    """Run one rank as ``config`` says (``body``: what the rank does once in the group and
    returns for the launcher; default: ``ringtree run``'s); returns the exit status."""
    backend = config["backend"]
    rank = _rank(backend)
    try:
        engine = NativeEngine(backend, config["timeout_s"])
        data = (body or _run)(engine, config)
        data["rank"] = rank
        write_result(rank, data)
        engine.close()
        return 0
    except (PeerError, MismatchError, RingtreeError) as e:
        write_result(rank, {"rank": rank, "error": str(e)})
        print(f"ringtree: error: {e}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:  # a bug: say so with the traceback, still exit cleanly
        traceback.print_exc()
        write_result(rank, {"rank": rank, "error": f"rank {rank}: internal error: {e!r}"})
        return 1


def _rank(backend: str) -> int:
    if backend != "mpi":
        return int(os.environ["RANK"])
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if key in os.environ:
            return int(os.environ[key])
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


class NativeEngine:
    """The engine's own collectives and barrier, on torch tensors (gloo: CPU; nccl: the
    rank's GPU, LOCAL_RANK modulo the GPUs it sees) or numpy arrays (MPI)."""

    def __init__(self, backend: str, timeout_s: float) -> None:
        self.backend = backend
        self.device: Any = None
        if backend in ("gloo", "nccl"):
            import torch
            import torch.distributed as dist

            self.torch, self.dist = torch, dist
            kw: dict[str, Any] = {"timeout": timedelta(seconds=max(timeout_s, 10))}
            if backend == "nccl":
                local = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
                self.device = torch.device("cuda", local % torch.cuda.device_count())
                torch.cuda.set_device(self.device)
                kw["device_id"] = self.device
            dist.init_process_group(backend, **kw)
            self.rank, self.size = dist.get_rank(), dist.get_world_size()
        else:
            from mpi4py import MPI

            self.MPI, self.comm = MPI, MPI.COMM_WORLD
            self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def array(self, values: Any) -> Any:
        """``values`` (numpy, or a CPU tensor for bfloat16) as the engine's own kind."""
        if self.backend == "mpi":
            return values
        t = self.torch.from_numpy(values) if isinstance(values, np.ndarray) else values
        return t if self.device is None else t.to(self.device)

    def numpy(self, x: Any) -> np.ndarray:
        if self.backend == "mpi":
            return x
        x = x.cpu() if self.device is not None else x
        return x.float().numpy() if str(x.dtype) == "torch.bfloat16" else x.numpy()

    def sync(self) -> None:
        """Wait for the GPU (NCCL's calls return once queued); nothing on CPU engines."""
        if self.device is not None:
            self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.backend == "mpi":
            self.comm.Barrier()
        else:
            self.dist.barrier()
        self.sync()

    def close(self) -> None:
        """Leave the group cleanly (after a success only: a broken group may hang here)."""
        if self.backend == "mpi":
            self.MPI.Finalize()
        else:
            self.dist.destroy_process_group()

    def native(self, col: Collective, x: Any, op: ReduceOp, root: int, count: int) -> Any:
        """The engine's own collective on a copy of ``x``: what the rank should hold."""
        n, r = self.size, self.rank
        b = block_bounds(count, n)
        combine = op.combine
        if self.backend != "mpi":
            dist, t = self.dist, x.clone()
            dop = getattr(dist.ReduceOp, {"product": "PRODUCT"}.get(combine.value, combine.name))
            if col is Collective.ALL_REDUCE:
                dist.all_reduce(t, op=dop)
            elif col is Collective.BROADCAST:
                dist.broadcast(t, src=root)
            elif col is Collective.REDUCE:
                dist.reduce(t, dst=root, op=dop)
            elif col is Collective.REDUCE_SCATTER:
                dist.all_reduce(t, op=dop)  # torch's own reduce-scatter needs equal blocks
                t = t[b[r] : b[r + 1]].clone()
            else:
                width = max(b[i + 1] - b[i] for i in range(n))
                padded = self.torch.zeros(width, dtype=x.dtype, device=x.device)
                padded[: b[r + 1] - b[r]] = x
                out = self.torch.empty(width * n, dtype=x.dtype, device=x.device)
                dist.all_gather_into_tensor(out, padded)
                t = self.torch.cat([out[i * width : i * width + b[i + 1] - b[i]] for i in range(n)])
            res = self.numpy(t)
        else:
            MPI, comm = self.MPI, self.comm
            mop = {"sum": MPI.SUM, "product": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}[
                combine.value
            ]
            if col is Collective.ALL_REDUCE:
                res = np.empty_like(x)
                comm.Allreduce(x, res, op=mop)
            elif col is Collective.BROADCAST:
                res = x.copy()
                comm.Bcast(res, root=root)
            elif col is Collective.REDUCE:
                res = np.empty_like(x)
                comm.Reduce(x, res, op=mop, root=root)
            elif col is Collective.REDUCE_SCATTER:
                res = np.empty(b[r + 1] - b[r], dtype=x.dtype)
                counts = [b[i + 1] - b[i] for i in range(n)]
                comm.Reduce_scatter(x, res, recvcounts=counts, op=mop)
            else:
                res = np.empty(count, dtype=x.dtype)
                counts = [b[i + 1] - b[i] for i in range(n)]
                comm.Allgatherv(x, [res, counts])
        if op is ReduceOp.AVG and (col is not Collective.REDUCE or r == root):
            res = op.finish(res.copy(), n)
        return res


def make_input(
    col: Collective, count: int, dtype: str, op: ReduceOp, rank: int, n: int
) -> np.ndarray:
    """Rank ``rank``'s input: small integers (exact sums in any order), 1s and 2s for PRODUCT."""
    b = block_bounds(count, n)
    lo, hi = (b[rank], b[rank + 1]) if col is Collective.ALL_GATHER else (0, count)
    i = np.arange(lo, hi, dtype=np.int64)
    vals = 1 + (i + rank) % 2 if op is ReduceOp.PRODUCT else (i * 7 + rank * 3) % 11 - 5
    if dtype == "bfloat16":
        import torch

        return torch.tensor(vals, dtype=torch.bfloat16)  # type: ignore[return-value]
    return vals.astype(dtype)


def copy_buffer(x: Any) -> Any:
    """A copy made without torch's thread pool: after a parallel region its idle threads
    spin for milliseconds, stealing the cores the next timed collective needs."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if x.device.type != "cpu":
        return x.clone()
    import torch

    if x.dtype == torch.bfloat16:  # numpy has no bfloat16: copy the bits
        return torch.from_numpy(x.view(torch.int16).numpy().copy()).view(torch.bfloat16)
    return torch.from_numpy(x.numpy().copy())


def _run(engine: NativeEngine, cfg: dict[str, Any]) -> dict[str, Any]:
    col = Collective.parse(cfg["collective"])
    op = ReduceOp.parse(cfg.get("op", "sum"))
    n, rank, root = engine.size, engine.rank, int(cfg.get("root", 0))
    itemsize = int(cfg["itemsize"])
    count = int(cfg["size_bytes"]) // itemsize
    if cfg.get("size_bytes_by_rank"):  # a rank asked to call with another size
        count = int(cfg["size_bytes_by_rank"].get(str(rank), cfg["size_bytes"])) // itemsize
    transport = api.transport_for(None)
    if cfg.get("kill_rank") == rank:  # die at the 2nd send of the collective itself
        fingerprint_sends = n - 1 if cfg.get("check", True) else 0
        transport = DyingTransport(transport, fingerprint_sends + 1)
    raw = make_input(col, count, cfg["dtype"], op, rank, n)
    x = engine.array(raw)
    b = block_bounds(count, n)
    kw: dict[str, Any] = {
        "op": op, "root": root, "algorithm": cfg["algorithm"], "group": transport,
        "async_op": False, "timeout": cfg["timeout_s"], "n_chunks": cfg.get("n_chunks"),
        "ranks_per_node": cfg.get("ranks_per_node"), "slice_bytes": cfg.get("slice_bytes"),
    }  # fmt: skip

    def fresh() -> tuple[Any, Any]:
        inp = copy_buffer(x)
        size = {Collective.REDUCE_SCATTER: b[rank + 1] - b[rank], Collective.ALL_GATHER: count}
        if col not in size:
            return inp, None
        if hasattr(inp, "new_empty"):
            return inp, inp.new_empty(size[col])
        return inp, np.empty(size[col], dtype=inp.dtype)

    def ringtree_call(step_marks: list[float] | None = None, check: bool = False) -> Any:
        inp, out = fresh()
        api.call(col, inp, out, check=check, step_done_s=step_marks, **kw)
        return inp if out is None else out

    # correctness (with the fingerprint exchange when asked), against the engine's own
    got = engine.numpy(ringtree_call(check=bool(cfg.get("check", True))))
    want = engine.native(col, x, op, root, count)
    holds = not (col is Collective.REDUCE and rank != root)
    correct = bool(not holds or np.array_equal(got, want))
    # bytes at the transport for one call
    before = transport.counters()
    ringtree_call()
    sent, _, messages = (a - b_ for a, b_ in zip(transport.counters(), before, strict=True))
    algorithm, n_chunks = api.resolve(col, cfg["algorithm"], n, count, itemsize, root,
                                      cfg.get("n_chunks"), kind=transport.kind)  # fmt: skip
    sched = api.schedule(col, algorithm, n, root, n_chunks, cfg.get("ranks_per_node"))
    # timing: each call, and when this rank finished each step of it
    times, finished = [], []
    for _ in range(int(cfg["iters"])):
        marks: list[float] = []
        engine.barrier()
        t0 = time.perf_counter()
        ringtree_call(marks)
        engine.sync()
        times.append(time.perf_counter() - t0)
        finished.append([m - t0 for m in marks])
    return {
        "correct": correct,
        "times_s": times,
        "step_done_s": [statistics.median(col) for col in zip(*finished, strict=True)],
        "bytes_sent": sent,
        "messages_sent": messages,
        "bytes_sent_schedule": sched.bytes_sent(rank, count, itemsize),
        "algorithm": algorithm,
        "n_chunks": sched.n_chunks,
        "n_steps": sched.n_steps,
    }


if __name__ == "__main__":
    status = main(json.loads(sys.argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # never hang in a dead group's destructors
