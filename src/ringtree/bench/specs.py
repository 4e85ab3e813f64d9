"""One small spec per collective, as nccl-tests has: how many elements a size holds, the bus
bandwidth factor, each rank's input, the result each rank must hold, and the engine's own
call (torch.distributed over gloo, or MPI). The shared driver (:mod:`ringtree.bench.worker`)
does everything else.

Inputs are small integers (:func:`ringtree.procs.native.make_input`: ``(7i + 3r) mod 11 - 5``,
1s and 2s for PRODUCT), so every order of summation gives the same floats and a result is
either exactly right or wrong: ``#wrong`` counts the elements that differ.

Sizes are whole buffers, as nccl-tests prints them: the all-reduce/broadcast/reduce buffer,
the reduce-scatter *input*, the all-gather *output* (N blocks), one rank's all-to-all input
(N blocks, one per rank), the gather's output and the scatter's input at the root (N
blocks). Like nccl-tests, the element counts of the collectives with blocks are rounded down
to a multiple of N, so every block is the same size (the engines' own calls need that). The
barrier moves nothing: its size is 0 whatever is asked, its line a time.

Bus bandwidth (nccl-tests' PERFORMANCE.md, and its alltoall.cc, gather.cc, scatter.cc):
``busbw = algbw x factor``, the factor making a collective's figure comparable with the
link's per-direction speed whatever N is -- all-reduce 2(N-1)/N (each rank sends and receives
2(N-1)/N of the buffer in the ring), reduce-scatter, all-gather, all-to-all, gather and
scatter (N-1)/N, broadcast and reduce 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_bounds, bus_factor, reference
from ringtree.procs.native import make_input
from ringtree.runtime.mpi import mpi_op


def algbw_Bps(size_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth: the buffer size over the time of one call (nccl-tests' algbw)."""
    return size_bytes / time_s if time_s > 0 else 0.0


@dataclass(frozen=True)
class Spec:
    """What the driver needs to know about one collective.

    ``rounds_to_n``: the element count is rounded down
    to a multiple of N (equal blocks). ``native_gloo``/``native_mpi``: the engine's own call,
    ``f(engine, inbuf, outbuf, op, root)``, leaving the result where ringtree's call leaves it;
    ringtree's own call is :func:`ringtree.runtime.api.collective`.
    """

    collective: Collective
    rounds_to_n: bool
    native_gloo: Callable[..., None]
    native_mpi: Callable[..., None]

    def count(self, size_bytes: int, itemsize: int, n_ranks: int) -> int:
        """Elements in a buffer of ``size_bytes`` (whole elements; a multiple of N when the
        collective has equal blocks; none for the barrier)."""
        if self.collective is Collective.BARRIER:
            return 0
        count = size_bytes // itemsize
        return count - count % n_ranks if self.rounds_to_n else count

    def busbw_Bps(self, size_bytes: int, time_s: float, n_ranks: int) -> float:
        """nccl-tests' bus bandwidth: algbw x the collective's factor (:func:`bus_factor`)."""
        return algbw_Bps(size_bytes, time_s) * bus_factor(self.collective, n_ranks)

    def input_values(
        self, count: int, dtype: str, op: ReduceOp, rank: int, n_ranks: int
    ) -> np.ndarray:
        """Rank ``rank``'s input (its block for all-gather) as a numpy array."""
        return np.asarray(make_input(self.collective, count, dtype, op, rank, n_ranks))

    def expected(
        self, count: int, dtype: str, op: ReduceOp, root: int, rank: int, n_ranks: int
    ) -> np.ndarray | None:
        """What ``rank`` must hold afterwards (its output; None: a reduce's non-root rank,
        whose buffer is only checked to be unchanged by ringtree)."""
        col = self.collective
        if col in (Collective.ALL_TO_ALL, Collective.GATHER, Collective.SCATTER,
                   Collective.BARRIER):
            inputs = [self.input_values(count, dtype, op, r, n_ranks) for r in range(n_ranks)]
            return reference(col, inputs, op, root)[rank]
        if col is Collective.BROADCAST:
            return self.input_values(count, dtype, op, root, n_ranks)
        if col is Collective.ALL_GATHER:
            blocks = [self.input_values(count, dtype, op, r, n_ranks) for r in range(n_ranks)]
            return np.concatenate(blocks)
        if col is Collective.REDUCE and rank != root:
            return None
        acc = self.input_values(count, dtype, op, 0, n_ranks).copy()
        for r in range(1, n_ranks):
            op.apply(acc, self.input_values(count, dtype, op, r, n_ranks))
        acc = op.finish(acc, n_ranks)
        if col is Collective.REDUCE_SCATTER:
            b = block_bounds(count, n_ranks)
            return acc[b[rank] : b[rank + 1]]
        return acc


# -- the engines' own calls ---------------------------------------------------------------
def _dist_op(engine: Any, op: ReduceOp) -> Any:
    name = {ReduceOp.PRODUCT: "PRODUCT"}.get(op.combine, op.combine.name)
    return getattr(engine.dist.ReduceOp, name)


def _gloo_finish(op: ReduceOp, buf: Any, n: int) -> None:
    """gloo has no AVG: its native call sums, then divides like ringtree does."""
    if op is ReduceOp.AVG:
        if buf.dtype.is_floating_point:
            buf.div_(n)
        else:
            buf.div_(n, rounding_mode="floor")


def _mpi_finish(op: ReduceOp, buf: np.ndarray, n: int) -> None:
    if op is ReduceOp.AVG:
        if np.issubdtype(buf.dtype, np.integer):
            np.floor_divide(buf, n, out=buf)
        else:
            np.true_divide(buf, buf.dtype.type(n), out=buf)


def _own_output(x: Any, out: Any) -> Any:
    """Out of place over gloo (``out`` given): torch's API has no such all-reduce, broadcast
    or reduce, so its native call is torch's idiom, a copy then the in-place call."""
    if out is None:
        return x
    out.copy_(x)
    return out


def _gloo_all_reduce(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    x = _own_output(x, out)
    e.dist.all_reduce(x, op=_dist_op(e, op))
    _gloo_finish(op, x, e.size)


def _gloo_reduce_scatter(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.reduce_scatter_tensor(out, x, op=_dist_op(e, op))
    _gloo_finish(op, out, e.size)


def _gloo_all_gather(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.all_gather_into_tensor(out, x)


def _gloo_broadcast(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.broadcast(_own_output(x, out) if e.rank == root else (x if out is None else out),
                     src=root)


def _gloo_reduce(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    if e.rank == root:
        x = _own_output(x, out)
    e.dist.reduce(x, dst=root, op=_dist_op(e, op))
    if e.rank == root:
        _gloo_finish(op, x, e.size)


def _mpi_all_reduce(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    if out is None:
        e.comm.Allreduce(e.MPI.IN_PLACE, x, op=mpi_op(op))
    else:
        e.comm.Allreduce(x, out, op=mpi_op(op))
    _mpi_finish(op, x if out is None else out, e.size)


def _mpi_reduce_scatter(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    e.comm.Reduce_scatter_block(x, out, op=mpi_op(op))
    _mpi_finish(op, out, e.size)


def _mpi_all_gather(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    e.comm.Allgather(e.MPI.IN_PLACE if np.shares_memory(x, out) else x, out)


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


def _gloo_all_to_all(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.all_to_all_single(out, x)


def _gloo_gather(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.gather(x, list(out.chunk(e.size)) if e.rank == root else None, dst=root)


def _gloo_scatter(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.scatter(out, list(x.chunk(e.size)) if e.rank == root else None, src=root)


def _gloo_barrier(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.dist.barrier()


def _mpi_all_to_all(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    e.comm.Alltoall(x, out)


def _mpi_gather(e: Any, x: np.ndarray, out: Any, op: ReduceOp, root: int) -> None:
    e.comm.Gather(x, out if e.rank == root else None, root=root)


def _mpi_scatter(e: Any, x: np.ndarray, out: np.ndarray, op: ReduceOp, root: int) -> None:
    e.comm.Scatter(x if e.rank == root else None, out, root=root)


def _mpi_barrier(e: Any, x: Any, out: Any, op: ReduceOp, root: int) -> None:
    e.comm.Barrier()


SPECS: dict[Collective, Spec] = {
    spec.collective: spec
    for spec in (
        Spec(Collective.ALL_REDUCE, False, _gloo_all_reduce, _mpi_all_reduce),
        Spec(Collective.REDUCE_SCATTER, True, _gloo_reduce_scatter, _mpi_reduce_scatter),
        Spec(Collective.ALL_GATHER, True, _gloo_all_gather, _mpi_all_gather),
        Spec(Collective.BROADCAST, False, _gloo_broadcast, _mpi_broadcast),
        Spec(Collective.REDUCE, False, _gloo_reduce, _mpi_reduce),
        Spec(Collective.ALL_TO_ALL, True, _gloo_all_to_all, _mpi_all_to_all),
        Spec(Collective.GATHER, True, _gloo_gather, _mpi_gather),
        Spec(Collective.SCATTER, True, _gloo_scatter, _mpi_scatter),
        Spec(Collective.BARRIER, False, _gloo_barrier, _mpi_barrier),
    )
}


def spec_for(collective: Collective | str) -> Spec:
    """The spec of ``collective`` (any spelling ``Collective.parse`` accepts)."""
    return SPECS[Collective.parse(collective)]
