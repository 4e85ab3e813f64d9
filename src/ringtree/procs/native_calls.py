"""The engines' own collectives, one table: per collective, the torch.distributed call (gloo,
NCCL) and the MPI call that ringtree's result is checked against and timed against.

Every call is ``f(engine, inbuf, outbuf, op, root)`` on a :class:`~ringtree.procs.native.
NativeEngine`'s buffers as :func:`~ringtree.procs.native.call_buffers` makes them from the
collective's :class:`~ringtree.collectives.Layout` (``outbuf`` None: in place, or none on
this rank), and leaves the result where ringtree's call leaves it. All-reduce, broadcast and
reduce also take an output of their own (the bench's out-of-place lines, as nccl-tests'):
MPI writes it; torch's API has no such call, so there its idiom runs, a copy then the
in-place call. With equal blocks each is the engine's own call for the collective
(``reduce_scatter_tensor``, ``Reduce_scatter_block``, ``Alltoall`` ...: what the bench times,
as nccl-tests does); with the uneven blocks ringtree also takes (np.array_split) it is the
engine's general form of it (an all-reduce then the block: gloo has no uneven reduce-scatter;
``Allgatherv``, ``Alltoallv`` ...). gloo has no AVG and MPI none at all: they sum, then divide
as ringtree does (floor division for integers). Every ReduceOp maps onto the engines' own
(BAND/BOR/BXOR too; mpi4py's through :data:`ringtree.runtime.mpi.MPI_OPS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_bounds, block_sizes
from ringtree.runtime.mpi import mpi_op

#: ``f(engine, inbuf, outbuf, op, root)``: one engine's own call of one collective.
NativeCall = Callable[[Any, Any, Any, ReduceOp, int], None]


@dataclass(frozen=True)
class NativeCalls:
    """A collective's own call on each engine: ``torch`` (torch.distributed: gloo, NCCL)
    and ``mpi`` (mpi4py)."""

    torch: NativeCall
    mpi: NativeCall


def native_call(col: Collective, backend: str) -> NativeCall:
    """The engine's own call of ``col`` for ``backend`` (gloo, nccl or mpi)."""
    calls = NATIVE_CALLS[col]
    return calls.mpi if backend == "mpi" else calls.torch


def _equal(count: int, n: int) -> bool:
    return count % n == 0


# -- torch.distributed ----------------------------------------------------------------------
def _dist_op(e: Any, op: ReduceOp) -> Any:
    name = {ReduceOp.PRODUCT: "PRODUCT"}.get(op.combine, op.combine.name)
    return getattr(e.dist.ReduceOp, name)


def _torch_finish(op: ReduceOp, buf: Any, n: int) -> None:
    """AVG: the sum divided by N, in place (floor division for integers)."""
    if op is ReduceOp.AVG:
        if buf.dtype.is_floating_point:
            buf.div_(n)
        else:
            buf.div_(n, rounding_mode="floor")


def _own_output(x: Any, out: Any) -> Any:
    """The buffer torch's in-place call runs on: ``x``, or ``out`` holding a copy of it."""
    if out is None:
        return x
    out.copy_(x)
    return out


def _torch_all_reduce(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    x = _own_output(x, out)
    e.dist.all_reduce(x, op=_dist_op(e, op))
    _torch_finish(op, x, e.size)


def _torch_reduce_scatter(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    if _equal(x.numel(), e.size):
        e.dist.reduce_scatter_tensor(out, x, op=_dist_op(e, op))
    else:  # torch's reduce-scatter takes equal blocks only
        whole = x.clone()
        e.dist.all_reduce(whole, op=_dist_op(e, op))
        b = block_bounds(x.numel(), e.size)
        out.copy_(whole[b[e.rank] : b[e.rank + 1]])
    _torch_finish(op, out, e.size)


def _torch_all_gather(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    n = e.size
    if _equal(out.numel(), n):
        e.dist.all_gather_into_tensor(out, x)
        return
    sizes = block_sizes(out.numel(), n)  # uneven: every block padded to the largest
    width = max(sizes)
    padded = e.torch.zeros(width, dtype=x.dtype, device=x.device)
    padded[: x.numel()] = x
    parts = e.torch.empty(width * n, dtype=x.dtype, device=x.device)
    e.dist.all_gather_into_tensor(parts, padded)
    out.copy_(e.torch.cat([parts[i * width : i * width + sizes[i]] for i in range(n)]))


def _torch_broadcast(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.broadcast(_own_output(x, out) if e.rank == root else (x if out is None else out),
                     src=root)


def _torch_reduce(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    if e.rank == root:
        x = _own_output(x, out)
    e.dist.reduce(x, dst=root, op=_dist_op(e, op))
    if e.rank == root:
        _torch_finish(op, x, e.size)


def _torch_all_to_all(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    n = e.size
    if _equal(x.numel(), n):
        e.dist.all_to_all_single(out, x)
    else:  # every rank's input cut like np.array_split
        sizes = block_sizes(x.numel(), n)
        e.dist.all_to_all_single(out, x, [sizes[e.rank]] * n, sizes)


def _torch_gather(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    k = x.numel()
    parts = [out[i * k : (i + 1) * k] for i in range(e.size)] if e.rank == root else None
    e.dist.gather(x, parts, dst=root)


def _torch_scatter(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    k = out.numel()
    parts = [x[i * k : (i + 1) * k] for i in range(e.size)] if e.rank == root else None
    e.dist.scatter(out, parts, src=root)


def _torch_barrier(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.barrier()


# -- MPI --------------------------------------------------------------------------------------
def _mpi_finish(op: ReduceOp, buf: np.ndarray, n: int) -> None:
    """AVG: the sum divided by N, in place (floor division for integers)."""
    if op is ReduceOp.AVG:
        if np.issubdtype(buf.dtype, np.integer):
            np.floor_divide(buf, n, out=buf)
        else:
            np.true_divide(buf, buf.dtype.type(n), out=buf)


def _mpi_all_reduce(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    if out is None:
        e.comm.Allreduce(e.MPI.IN_PLACE, x, op=mpi_op(op))
    else:
        e.comm.Allreduce(x, out, op=mpi_op(op))
    _mpi_finish(op, x if out is None else out, e.size)


def _mpi_reduce_scatter(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    if _equal(x.size, e.size):
        e.comm.Reduce_scatter_block(x, out, op=mpi_op(op))
    else:
        e.comm.Reduce_scatter(x, out, recvcounts=block_sizes(x.size, e.size), op=mpi_op(op))
    _mpi_finish(op, out, e.size)


def _mpi_all_gather(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    if _equal(out.size, e.size):
        e.comm.Allgather(e.MPI.IN_PLACE if np.shares_memory(x, out) else x, out)
    else:
        e.comm.Allgatherv(x.copy(), [out, block_sizes(out.size, e.size)])


def _mpi_broadcast(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    if out is not None and e.rank == root:  # MPI's broadcast is in place: copy first
        out[...] = x
    e.comm.Bcast(x if out is None else out, root=root)


def _mpi_reduce(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    if e.rank == root:
        into = x if out is None else out
        e.comm.Reduce(e.MPI.IN_PLACE if out is None else x, into, op=mpi_op(op), root=root)
        _mpi_finish(op, into, e.size)
    else:
        e.comm.Reduce(x, None, op=mpi_op(op), root=root)


def _mpi_all_to_all(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    n = e.size
    if _equal(x.size, n):
        e.comm.Alltoall(x, out)
    else:  # every rank's input cut like np.array_split
        sizes = block_sizes(x.size, n)
        e.comm.Alltoallv([x, sizes], [out, [sizes[e.rank]] * n])


def _mpi_gather(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    e.comm.Gather(x, out if e.rank == root else None, root=root)


def _mpi_scatter(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    e.comm.Scatter(x if e.rank == root else None, out, root=root)


def _mpi_barrier(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.comm.Barrier()


NATIVE_CALLS: dict[Collective, NativeCalls] = {
    Collective.ALL_REDUCE: NativeCalls(_torch_all_reduce, _mpi_all_reduce),
    Collective.REDUCE_SCATTER: NativeCalls(_torch_reduce_scatter, _mpi_reduce_scatter),
    Collective.ALL_GATHER: NativeCalls(_torch_all_gather, _mpi_all_gather),
    Collective.BROADCAST: NativeCalls(_torch_broadcast, _mpi_broadcast),
    Collective.REDUCE: NativeCalls(_torch_reduce, _mpi_reduce),
    Collective.ALL_TO_ALL: NativeCalls(_torch_all_to_all, _mpi_all_to_all),
    Collective.GATHER: NativeCalls(_torch_gather, _mpi_gather),
    Collective.SCATTER: NativeCalls(_torch_scatter, _mpi_scatter),
    Collective.BARRIER: NativeCalls(_torch_barrier, _mpi_barrier),
}
