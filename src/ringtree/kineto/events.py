"""Sort one rank's Kineto events as they stream by (:class:`Collector`): what names a
collective, the communication kernels, every kernel's and operator's interval, the kernel
launches, the steps. Only what the analysis needs is kept: a few numbers per kernel, operator
and launch in typed arrays (24 bytes each), whole events only for collectives.

Kineto's categories have changed names (``Operator``/``Kernel``/``Runtime`` before torch 1.9;
``cpu_op``/``kernel``/``cuda_runtime`` since); both are read.
"""

from __future__ import annotations

import re
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ringtree.kineto.names import comm_kernel, is_comm_marker

KERNEL_CATS = {"kernel"}
MEMORY_CATS = {"gpu_memcpy", "gpu_memset", "memcpy", "memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime"}
OP_CATS = {"cpu_op", "operator", "user_annotation"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")
#: kernel kinds in :attr:`Collector.kernel_kind`
COMPUTE, MEMORY, COMM = 0, 1, 2


@dataclass
class Marker:
    """A host event that names a collective (:func:`~ringtree.kineto.names.is_comm_marker`)."""

    tid: Any
    start: float
    end: float
    name: str
    args: dict[str, Any]
    pid: Any = None


@dataclass
class CommKernel:
    """A communication kernel: span, name, args, stream, correlation id (-1: none) and what
    its name says (:func:`~ringtree.kineto.names.comm_kernel`)."""

    start: float
    end: float
    name: str
    args: dict[str, Any]
    stream: Any
    correlation: int
    collective: str
    label: str
    pid: Any = None


@dataclass
class Collector:
    """What one rank's events hold, gathered in one pass by :meth:`add`.

    ``missing`` counts events without a field the analysis needs (``ts`` ...), by field, for
    one warning each.
    """

    markers: list[Marker] = field(default_factory=list)
    comm_kernels: list[CommKernel] = field(default_factory=list)
    kernel_start: array = field(default_factory=lambda: array("d"))
    kernel_end: array = field(default_factory=lambda: array("d"))
    kernel_kind: array = field(default_factory=lambda: array("b"))
    kernel_corr: array = field(default_factory=lambda: array("q"))
    launch_corr: array = field(default_factory=lambda: array("q"))
    launch_tid: array = field(default_factory=lambda: array("q"))
    launch_ts: array = field(default_factory=lambda: array("d"))
    #: host thread -> flat [start0, end0, start1, ...] of its operators
    ops: dict[int, array] = field(default_factory=lambda: defaultdict(lambda: array("d")))
    steps: list[tuple[int, float, float, Any]] = field(default_factory=list)
    devices: set[Any] = field(default_factory=set)
    missing: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    n_events: int = 0
    _tids: dict[Any, int] = field(default_factory=dict)

    def tid(self, tid: Any) -> int:
        """A small integer for a thread id (Kineto writes ints, sometimes strings)."""
        return self._tids.setdefault(tid, len(self._tids))

    def tid_name(self, index: int) -> Any:
        """The thread id behind :meth:`tid`'s integer."""
        return next(t for t, i in self._tids.items() if i == index)

    def add(self, e: dict[str, Any]) -> None:
        """Take one trace event."""
        self.n_events += 1
        if e.get("ph") != "X":
            return
        ts, dur = e.get("ts"), e.get("dur", 0)
        if not isinstance(ts, int | float) or not isinstance(dur, int | float):
            self.missing["ts/dur"] += 1
            return
        cat = str(e.get("cat", "")).lower()
        name = e.get("name")
        if not isinstance(name, str):
            self.missing["name"] += 1
            return
        end = ts + dur
        if cat in KERNEL_CATS:
            self._kernel(e, name, ts, end)
        elif cat in MEMORY_CATS:
            self._device(e, ts, end, MEMORY)
        elif cat in RUNTIME_CATS:
            corr = _args(e).get("correlation")
            if isinstance(corr, int):
                self.launch_corr.append(corr)
                self.launch_tid.append(self.tid(e.get("tid")))
                self.launch_ts.append(ts)
        elif cat in OP_CATS:
            self._host(e, cat, name, ts, end)

    def _device(self, e: dict[str, Any], ts: float, end: float, kind: int) -> None:
        corr = _args(e).get("correlation")
        self.kernel_start.append(ts)
        self.kernel_end.append(end)
        self.kernel_kind.append(kind)
        self.kernel_corr.append(corr if isinstance(corr, int) else -1)
        self.devices.add(e.get("pid"))

    def _kernel(self, e: dict[str, Any], name: str, ts: float, end: float) -> None:
        comm = comm_kernel(name)
        self._device(e, ts, end, COMPUTE if comm is None else COMM)
        if comm is not None:
            args = _args(e)
            corr = args.get("correlation")
            if not isinstance(corr, int):
                self.missing["kernel correlation"] += 1
                corr = -1
            stream = args.get("stream", e.get("tid"))
            self.comm_kernels.append(CommKernel(ts, end, name, args, stream, corr, *comm,
                                                pid=e.get("pid")))

    def _host(self, e: dict[str, Any], cat: str, name: str, ts: float, end: float) -> None:
        step = STEP.match(name)
        if step:
            self.steps.append((int(step.group(1)), ts, end, e.get("tid")))
        elif is_comm_marker(name):
            self.markers.append(Marker(e.get("tid"), ts, end, name, _args(e), e.get("pid")))
        elif cat != "user_annotation":
            flat = self.ops[self.tid(e.get("tid"))]
            flat.append(ts)
            flat.append(end)


def _args(e: dict[str, Any]) -> dict[str, Any]:
    a = e.get("args")
    return a if isinstance(a, dict) else {}
