"""One small spec per collective, as nccl-tests has: how many elements a size holds, the bus
bandwidth factor, each rank's input and the result each rank must hold. The collective's
buffers come from its layout (:attr:`ringtree.collectives.Collective.layout`), the engine's
own call from :mod:`ringtree.procs.native_calls`; the shared driver
(:mod:`ringtree.measure.worker`) does everything else.

Inputs are small integers (:func:`ringtree.procs.native.make_input`: ``(7i + 3r) mod 11 - 5``,
1s and 2s for PRODUCT), so every order of summation gives the same floats and a result is
either exactly right or wrong: ``#wrong`` counts the elements that differ.

Sizes are whole buffers, as nccl-tests prints them: the all-reduce/broadcast/reduce buffer,
the reduce-scatter *input*, the all-gather *output* (N blocks), one rank's all-to-all input
(N blocks, one per rank), the gather's output and the scatter's input at the root (N
blocks). Like nccl-tests, the element counts of the collectives with blocks are rounded down
to a multiple of N, so every block is the same size (the engines' own calls for equal blocks
run). The barrier moves nothing: its size is 0 whatever is asked, its line a time.

Bus bandwidth (nccl-tests' PERFORMANCE.md, and its alltoall.cc, gather.cc, scatter.cc):
``busbw = algbw x factor``, the factor making a collective's figure comparable with the
link's per-direction speed whatever N is -- all-reduce 2(N-1)/N (each rank sends and receives
2(N-1)/N of the buffer in the ring), reduce-scatter, all-gather, all-to-all, gather and
scatter (N-1)/N, broadcast and reduce 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringtree.collectives import Collective, ReduceOp, bus_factor, reference
from ringtree.procs.native import make_input


def algbw_Bps(size_bytes: int, time_s: float) -> float:
    """Algorithm bandwidth: the buffer size over the time of one call (nccl-tests' algbw)."""
    return size_bytes / time_s if time_s > 0 else 0.0


@dataclass(frozen=True)
class Spec:
    """What the driver needs to know about one collective beyond its layout
    (:attr:`Collective.layout`) and the engines' own calls
    (:mod:`ringtree.procs.native_calls`); ringtree's own call is
    :func:`ringtree.runtime.api.collective`."""

    collective: Collective

    def count(self, size_bytes: int, itemsize: int, n_ranks: int) -> int:
        """Elements in a buffer of ``size_bytes``: whole elements, a multiple of N when the
        collective's buffers are cut into blocks (nccl-tests' rule), none for the barrier."""
        lay = self.collective.layout
        count = lay.count(size_bytes // itemsize, n_ranks)
        return count - count % n_ranks if lay.blocks else count

    def busbw_Bps(self, size_bytes: int, time_s: float, n_ranks: int) -> float:
        """nccl-tests' bus bandwidth: algbw x the collective's factor (:func:`bus_factor`)."""
        return algbw_Bps(size_bytes, time_s) * bus_factor(self.collective, n_ranks)

    def input_values(
        self, count: int, dtype: str, op: ReduceOp, rank: int, n_ranks: int
    ) -> np.ndarray:
        """Rank ``rank``'s input (its block for all-gather and gather) as a numpy array."""
        return np.asarray(make_input(self.collective, count, dtype, op, rank, n_ranks))

    def expected(
        self, count: int, dtype: str, op: ReduceOp, root: int, rank: int, n_ranks: int
    ) -> np.ndarray | None:
        """What ``rank`` must hold afterwards: the numpy reference of every rank's input
        (None: a reduce's or gather's non-root rank, whose buffer is only checked to be
        unchanged by ringtree)."""
        inputs = [self.input_values(count, dtype, op, r, n_ranks) for r in range(n_ranks)]
        return reference(self.collective, inputs, op, root)[rank]


#: Every collective's spec.
SPECS: dict[Collective, Spec] = {col: Spec(col) for col in Collective}


def spec_for(collective: Collective | str) -> Spec:
    """The spec of ``collective`` (any spelling ``Collective.parse`` accepts)."""
    return SPECS[Collective.parse(collective)]
