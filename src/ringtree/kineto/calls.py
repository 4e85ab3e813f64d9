"""What an imported trace holds: a :class:`Call` per collective or point-to-point call on
each rank, the busy intervals of each rank's compute and communication, its steps, and the
process groups (:class:`RankTrace`, one per rank; :class:`Run`, the ranks read together).

Times are microseconds on the trace's own clock (Kineto's ``ts``), as floats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ringtree.dtypes import ITEMSIZE


@dataclass
class Call:
    """One call on one rank.

    collective: ringtree's name (``all-reduce``...), or ``send`` / ``recv``; label: the
    library's own name for a non-NCCL kernel (``DeepEP dispatch``), else "". name: the event
    that named it (``c10d::allreduce_``, ``nccl:all_reduce``, a kernel). count: elements of
    the buffer nccl-tests counts (the whole one for all-gather and reduce-scatter), times the
    group size still to apply when ``per_rank``; None when the trace does not say. dtype:
    ringtree's dtype name or None. group: process group name; group_ranks: its members
    (global ranks), when known. cpu: the host call ``(start, end)``; work: the collective's
    own span -- the GPU kernel(s), or gloo's span on its worker thread -- when the trace has it.
    stream: where the work ran (``stream 7``, ``thread 11910``); thread: the host thread that
    called it. kernel: the NCCL kernel's
    name; kernel_algorithm / kernel_protocol: its specialisation (see
    :mod:`ringtree.kineto.names`). peer: the other rank of a send/recv, when recorded.
    """

    rank: int
    collective: str
    name: str
    count: int | None = None
    dtype: str | None = None
    per_rank: bool = False
    group: str | None = None
    group_ranks: tuple[int, ...] | None = None
    cpu: tuple[float, float] | None = None
    work: tuple[float, float] | None = None
    stream: str = ""
    thread: str = ""
    kernel: str = ""
    kernel_algorithm: str | None = None
    kernel_protocol: str | None = None
    label: str = ""
    peer: int | None = None
    #: the collective its work span ran, where that says (gloo runs an all-reduce of the
    #: whole buffer for a reduce-scatter: its span is a ``gloo:all_reduce``)
    work_collective: str | None = None
    #: the group's size where the trace gives it but not the members
    group_size_hint: int | None = None
    #: (pid, tid) of the event its span is: where the trace draws it
    track: tuple[Any, Any] = (None, None)

    @property
    def group_size(self) -> int | None:
        """Ranks in the call's process group, when known."""
        return len(self.group_ranks) if self.group_ranks is not None else self.group_size_hint

    @property
    def itemsize(self) -> int | None:
        """Bytes per element, when the dtype is known."""
        return ITEMSIZE.get(self.dtype) if self.dtype else None

    @property
    def size_bytes(self) -> int | None:
        """The nccl-tests buffer size (0 for a barrier), when the trace gives it."""
        if self.collective == "barrier":
            return 0
        if self.count is None or self.itemsize is None:
            return None
        n = self.group_size if self.per_rank else 1
        return None if n is None else self.count * self.itemsize * n

    @property
    def span(self) -> tuple[float, float]:
        """The work span if recorded, else the host call."""
        s = self.work or self.cpu
        assert s is not None
        return s

    @property
    def duration_us(self) -> float:
        """Length of :attr:`span`."""
        start, end = self.span
        return end - start

    def key(self) -> tuple[str, int | None, int | None, str]:
        """What rows of the collectives' table group by: collective, size, group size, label."""
        return self.collective, self.size_bytes, self.group_size, self.label


@dataclass
class Step:
    """One ``ProfilerStep#N`` on one rank: its number and window ``(start, end)`` on the
    timeline the split uses (the host's for CPU traces, the GPU's for GPU traces)."""

    number: int
    start: float
    end: float


@dataclass
class RankTrace:
    """One rank's trace, imported.

    busy: merged, sorted, disjoint intervals (an ``(n, 2)`` array each) of the timeline the
    step split reads: ``compute``, ``comm`` and ``memory`` (GPU: kernels, NCCL and other
    communication kernels, memcpy/memset; CPU: operators on the compute threads, the
    collectives' calls and gloo's work spans). device: ``gpu`` or ``cpu``.
    """

    path: str
    rank: int
    world_size: int | None
    backend: str
    device: str
    host: str
    calls: list[Call]
    busy: dict[str, np.ndarray]
    steps: list[Step]
    process_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """The ranks read together, ordered by rank; ``warnings`` holds every one-line warning
    the import gave (one per kind and file)."""

    ranks: list[RankTrace]
    warnings: list[str] = field(default_factory=list)

    @property
    def calls(self) -> list[Call]:
        """Every rank's calls, rank by rank."""
        return [c for r in self.ranks for c in r.calls]

    @property
    def backend(self) -> str:
        """The backend the traces name (``nccl``, ``gloo``; "" when none)."""
        return next((r.backend for r in self.ranks if r.backend), "")

    @property
    def device(self) -> str:
        """``gpu`` when any rank's trace has GPU kernels, else ``cpu``."""
        return "gpu" if any(r.device == "gpu" for r in self.ranks) else "cpu"
