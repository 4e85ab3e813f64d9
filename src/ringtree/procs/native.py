"""The engine's own side of every check and measurement: its collectives and barrier.

:class:`NativeEngine` joins the group from the launcher's environment (gloo or NCCL from
torchrun-style variables, or MPI's COMM_WORLD) and runs the engine's own collective
(:mod:`ringtree.procs.native_calls`) on a copy of a rank's input -- what ringtree's result
must equal; :func:`make_input` builds inputs whose exact result does not depend on the order
of summation, :func:`call_buffers` the buffers of a call, both from the collective's layout.
A failure of the engine's own collective (a peer died) is a one-line :class:`EngineError`,
never a raw engine message.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import numpy as np

from ringtree.collectives import Collective, ReduceOp
from ringtree.procs.native_calls import native_call


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
        """The engine's own collective (:mod:`ringtree.procs.native_calls`) on a copy of
        ``x``, a rank's input of the layout of ``count`` elements: what the rank should hold
        (None where nothing is specified); EngineError when a peer is gone."""
        inp, out = call_buffers(col, copy_buffer(x), count, self.size, self.rank, root)
        try:
            native_call(col, self.backend)(self, inp, out, op, root)
            self.sync()
        except RuntimeError as e:
            raise self._failed(col.value, e) from None
        if not col.layout.holds_result(self.rank, root):
            return None
        return self.numpy(inp if out is None else out)


def call_buffers(
    col: Collective, x: Any, count: int, n: int, rank: int, root: int
) -> tuple[Any, Any]:
    """``(input, output)`` for :func:`ringtree.runtime.api.collective` from ``x``, the rank's
    input as :func:`make_input` makes it (on the engine's kind): a fresh output of the
    layout's size where the collective writes one (None: in place, or none on this rank)."""
    size = col.layout.output_elems(count, n, rank, root)
    if size is None:
        return x, None
    out = np.empty(size, dtype=x.dtype) if isinstance(x, np.ndarray) else x.new_empty(size)
    return x, out


def make_input(
    col: Collective, count: int, dtype: str, op: ReduceOp, rank: int, n: int
) -> np.ndarray:
    """Rank ``rank``'s input in the layout of ``count`` elements (its block, or all of them):
    small integers (exact sums in any order), 1s and 2s for PRODUCT."""
    i = np.arange(*col.layout.span(count, n, rank), dtype=np.int64)
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
