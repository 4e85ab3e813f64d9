"""The engine's own side of every check and measurement: its collectives and barrier.

:class:`NativeEngine` joins the group from the launcher's environment (gloo or NCCL from
torchrun-style variables, or MPI's COMM_WORLD) and runs the engine's own collective on a copy
of a rank's input -- what ringtree's result must equal; :func:`make_input` builds inputs whose
exact result does not depend on the order of summation. A failure of the engine's own
collective (a peer died) is a one-line :class:`EngineError`, never a raw engine message.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_bounds, block_sizes
from ringtree.runtime.mpi import mpi_op


class EngineError(RuntimeError):
    """The engine's own collective or barrier failed (usually: a peer died)."""


class NativeEngine:
    """The engine's own collectives and barrier, on torch tensors (gloo: CPU; nccl: the
    rank's GPU, LOCAL_RANK modulo the GPUs it sees) or numpy arrays (MPI); joins the group
    from the launcher's environment."""

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
        """The engine's own barrier (EngineError when a peer is gone)."""
        try:
            if self.backend == "mpi":
                self.comm.Barrier()
            else:
                self.dist.barrier()
            self.sync()
        except RuntimeError as e:
            raise self._failed("barrier", e) from None

    def _failed(self, what: str, e: Exception) -> EngineError:
        first = (str(e).strip().splitlines() or [""])[0]
        if first.startswith("[") and "] " in first:  # gloo's source location
            first = first.split("] ", 1)[1]
        return EngineError(
            f"rank {self.rank}: the {self.backend} engine's own {what} failed, a peer is gone "
            f"({first})"
        )

    def close(self) -> None:
        """Leave the group cleanly (after a success only: a broken group may hang here)."""
        if self.backend == "mpi":
            self.MPI.Finalize()
        else:
            self.dist.destroy_process_group()

    def native(self, col: Collective, x: Any, op: ReduceOp, root: int, count: int) -> Any:
        """The engine's own collective on a copy of ``x``: what the rank should hold
        (EngineError when a peer is gone)."""
        try:
            return self._native(col, x, op, root, count)
        except RuntimeError as e:
            raise self._failed(col.value, e) from None

    def _native(self, col: Collective, x: Any, op: ReduceOp, root: int, count: int) -> Any:
        n, r = self.size, self.rank
        b = block_bounds(count, n)
        sizes = block_sizes(count, n)
        combine = op.combine
        if col is Collective.BARRIER:
            self.barrier()
            return np.empty(
                0, dtype=np.asarray(self.numpy(x) if self.backend != "mpi" else x).dtype
            )
        if col is Collective.GATHER and r != root:
            self._rooted(col, x, root, sizes)
            return None
        if col in (Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER):
            res = self._rooted(col, x, root, sizes)
        elif self.backend != "mpi":
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
                width = max(sizes)
                padded = self.torch.zeros(width, dtype=x.dtype, device=x.device)
                padded[: b[r + 1] - b[r]] = x
                out = self.torch.empty(width * n, dtype=x.dtype, device=x.device)
                dist.all_gather_into_tensor(out, padded)
                t = self.torch.cat([out[i * width : i * width + b[i + 1] - b[i]] for i in range(n)])
            res = self.numpy(t)
        else:
            comm = self.comm
            mop = mpi_op(combine)
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
                comm.Reduce_scatter(x, res, recvcounts=sizes, op=mop)
            else:
                res = np.empty(count, dtype=x.dtype)
                comm.Allgatherv(x, [res, sizes])
        if op is ReduceOp.AVG and col.reduces and (col is not Collective.REDUCE or r == root):
            res = op.finish(res.copy(), n)
        return res

    def _rooted(self, col: Collective, x: Any, root: int, sizes: list[int]) -> Any:
        """All-to-all (even blocks: ``sizes``, each rank's input cut like np.array_split),
        gather or scatter (equal blocks) by the engine's own call; what this rank holds
        (gather: None off the root)."""
        n, r = self.size, self.rank
        if self.backend == "mpi":
            comm = self.comm
            if col is Collective.ALL_TO_ALL:
                res = np.empty(n * sizes[r], dtype=x.dtype)
                comm.Alltoallv([x, sizes], [res, [sizes[r]] * n])
                return res
            if col is Collective.GATHER:
                res = np.empty(n * x.size, dtype=x.dtype) if r == root else None
                comm.Gather(x, res, root=root)
                return res
            res = np.empty(sizes[r], dtype=x.dtype)
            comm.Scatter(x if r == root else None, res, root=root)
            return res
        dist, torch = self.dist, self.torch
        if col is Collective.ALL_TO_ALL:
            out = torch.empty(n * sizes[r], dtype=x.dtype, device=x.device)
            dist.all_to_all_single(out, x.clone(), [sizes[r]] * n, sizes)
            return self.numpy(out)
        if col is Collective.GATHER:
            parts = [torch.empty_like(x) for _ in range(n)] if r == root else None
            dist.gather(x.clone(), parts, dst=root)
            return self.numpy(torch.cat(parts)) if parts is not None else None
        out = torch.empty(sizes[r], dtype=x.dtype, device=x.device)
        chunks = list(x.clone().split(sizes)) if r == root else None
        dist.scatter(out, chunks, src=root)
        return self.numpy(out)


def engine_count(col: Collective, count: int, n: int) -> int:
    """The element count the engines run for ``count``: rounded down to a multiple of N for
    gather and scatter, whose blocks are equal (torch's and MPI's are, and ringtree's take
    torch's rule); 0 for the barrier (it moves nothing); else ``count``."""
    if col is Collective.BARRIER:
        return 0
    return count - count % n if col in (Collective.GATHER, Collective.SCATTER) else count


def call_buffers(
    col: Collective, x: Any, count: int, n: int, rank: int, root: int
) -> tuple[Any, Any]:
    """``(input, output)`` for :func:`ringtree.runtime.api.collective` from ``x``, the rank's
    input as :func:`make_input` makes it (on the engine's kind): a fresh output where the
    collective writes one (None: in place, or none on this rank)."""
    b = block_bounds(count, n)
    size = {
        Collective.REDUCE_SCATTER: b[rank + 1] - b[rank],
        Collective.ALL_GATHER: count,
        Collective.ALL_TO_ALL: n * (b[rank + 1] - b[rank]),
        Collective.GATHER: count if rank == root else None,
        Collective.SCATTER: b[rank + 1] - b[rank],
    }.get(col)
    if size is None:
        return x, None
    out = np.empty(size, dtype=x.dtype) if isinstance(x, np.ndarray) else x.new_empty(size)
    return x, out


def make_input(
    col: Collective, count: int, dtype: str, op: ReduceOp, rank: int, n: int
) -> np.ndarray:
    """Rank ``rank``'s input: small integers (exact sums in any order), 1s and 2s for PRODUCT."""
    b = block_bounds(count, n)
    own_block = col in (Collective.ALL_GATHER, Collective.GATHER)
    lo, hi = (b[rank], b[rank + 1]) if own_block else (0, count)
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
