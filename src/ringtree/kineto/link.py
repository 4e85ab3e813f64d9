"""One rank's collective calls from its trace's events (:func:`calls_of`).

A call on the host is a nest of markers on one thread -- ``c10d::allreduce_`` around
``record_param_comms`` around ``nccl:all_reduce``, whichever the torch version wrote -- and
its fields come from the most informative marker: ``record_param_comms``'s args (collective,
element counts, dtype, group), else the ``c10d::`` op's ``Input Dims``/``Input type``
(``record_shapes=True``), else the backend annotation's. Its work is linked to it:

- a GPU kernel through its correlation id to the runtime call that launched it, on the call's
  thread inside the call (how Kineto and HTA link them);
- a gloo span (``gloo:all_reduce`` on one of gloo's worker threads, torch 2.x CPU traces)
  to the first call before it of the same collective, in order: gloo runs a process group's
  work in the order it was queued. gloo's reduce-scatter runs an all-reduce of the whole
  buffer (ProcessGroupGloo; its span says ``gloo:all_reduce``), so that is linked too.

Work with no call to link to (a trace cut down to kernels, HTA's CPU sample) becomes a call of
its own, with what its own args and name say.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from typing import Any

import numpy as np

from ringtree.kineto.calls import Call
from ringtree.kineto.events import Collector, CommKernel, Marker
from ringtree.kineto.names import (
    BUFFER,
    P2P,
    Buffer,
    annotation_buffer,
    collective_of,
    dtype_of,
    nccl_kernel,
    normalise,
)

#: a marker that starts this many us after its nest's end still belongs to it (rounding)
EPSILON_US = 0.5


def nests(markers: list[Marker]) -> list[list[Marker]]:
    """Markers grouped per thread into nests: a marker starting inside the open nest's span
    joins it (gloo's synchronous send starts inside ``c10d::send`` and may end after it)."""
    out: list[list[Marker]] = []
    for m in sorted(markers, key=lambda m: (str(m.tid), m.start, -m.end)):
        last = out[-1] if out else None
        if last and last[0].tid == m.tid and m.start <= max(x.end for x in last) + EPSILON_US:
            last.append(m)
        else:
            out.append([m])
    return out


def _numel(dims: Any) -> int | None:
    """Elements of a shape ``[a, b]`` or of a tensor list ``[[a], [b, c]]``; None for ``[]``
    (a list of tensor lists, which record_shapes does not record) or anything else."""
    if not isinstance(dims, list) or not dims:
        return None
    if all(isinstance(d, int) for d in dims):
        return int(np.prod(dims, dtype=np.int64))
    parts = [_numel(d) for d in dims]
    return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]


def _from_dims(args: dict[str, Any], buf: Buffer) -> tuple[int | None, str | None]:
    """``(count, dtype)`` of argument ``buf.arg`` of an op's recorded shapes."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if buf.arg < 0 or not isinstance(dims, list) or buf.arg >= len(dims):
        return None, None
    ty = types[buf.arg] if isinstance(types, list) and buf.arg < len(types) else None
    return _numel(dims[buf.arg]), dtype_of(ty)


def _ranks(args: dict[str, Any]) -> tuple[int, ...] | None:
    """The group's global ranks from record_param_comms' args: ``Process Group Ranks`` (a
    string ``"[0, 1]"``) or ``Global rank start``/``stride`` with ``Group size``."""
    text = args.get("Process Group Ranks")
    if isinstance(text, str):
        try:
            ranks = json.loads(text)
        except ValueError:
            ranks = None
        if isinstance(ranks, list) and ranks and all(isinstance(r, int) for r in ranks):
            return tuple(ranks)
    start, stride, size = (args.get(k) for k in ("Global rank start", "Global rank stride",
                                                  "Group size"))
    if all(isinstance(x, int) for x in (start, stride, size)) and size > 0 and stride > 0:
        return tuple(range(start, start + stride * size, stride))
    return None


def _param_comms(call: Call, args: dict[str, Any]) -> bool:
    """Fill ``call`` from record_param_comms' (or a kernel's) metadata; False if it has none."""
    kind = collective_of(str(args.get("Collective name", "")))
    n_in, n_out = args.get("In msg nelems"), args.get("Out msg nelems")
    if kind is None or not isinstance(n_in, int):
        return False
    call.collective = kind
    call.count = n_out if kind == "all-gather" and isinstance(n_out, int) else n_in
    call.per_rank = False
    call.dtype = dtype_of(args.get("dtype")) or call.dtype
    group = args.get("Process Group Name", args.get("pg_name"))
    if group is not None:
        call.group = str(group)
    call.group_ranks = _ranks(args) or call.group_ranks
    size = args.get("Group size")
    if call.group_ranks is None and isinstance(size, int) and size > 0:
        call.group_size_hint = size
    return True


def _shapes(call: Call, op: Marker | None, notes: list[Marker]) -> None:
    """Count and dtype from the recorded shapes: the ``c10d::`` op's buffer argument, the
    dtype from a backend annotation where the op has a tensor list (no dtype recorded)."""
    if op is not None and normalise(op.name) in BUFFER:
        buf = BUFFER[normalise(op.name)]
        call.count, call.dtype = _from_dims(op.args, buf)
        call.per_rank = buf.per_rank
    for m in notes:
        buf = annotation_buffer(call.collective)
        count, dtype = _from_dims(m.args, buf)
        if call.count is None and count is not None:
            call.count, call.per_rank = count, buf.per_rank
        call.dtype = call.dtype or dtype


def call_of_nest(rank: int, nest: list[Marker]) -> Call | None:
    """The call a nest of markers records (None: no marker names a collective, e.g. a
    record_param_comms of a ``wait``)."""
    op = next((m for m in nest if m.name.startswith("c10d::")), None)
    rpc = next((m for m in nest if m.name == "record_param_comms"), None)
    notes = [m for m in nest if m is not op and m is not rpc]
    named = op or next((m for m in notes if collective_of(m.name)), None)
    kind = collective_of(named.name) if named else None
    call = Call(rank, kind or "", (named or nest[0]).name,
                cpu=(nest[0].start, max(m.end for m in nest)), stream=f"thread {nest[0].tid}",
                thread=f"thread {nest[0].tid}", track=(nest[0].pid, nest[0].tid))
    if rpc is None or not _param_comms(call, rpc.args):
        if kind is None:
            return None
        _shapes(call, op, notes)
    if op is not None and kind in P2P:
        peer = (op.args.get("Concrete Inputs") or [None] * 3)[2:3]
        if peer and isinstance(peer[0], str) and peer[0].lstrip("-").isdigit():
            call.peer = int(peer[0])
    return call


def _attach_kernel(call: Call, k: CommKernel) -> None:
    """Make ``k`` (part of) ``call``'s work."""
    call.work = (min(k.start, call.work[0]), max(k.end, call.work[1])) if call.work else \
        (k.start, k.end)
    call.stream, call.track = f"stream {k.stream}", (k.pid, k.stream)
    if not call.kernel:
        call.kernel = k.name
        parsed = nccl_kernel(k.name)
        if parsed is not None:
            call.kernel_algorithm, call.kernel_protocol = parsed.algorithm, parsed.protocol
            call.dtype = call.dtype or parsed.dtype
    call.label = call.label or k.label
    if call.count is None:
        _param_comms(call, k.args)


def _standalone_kernel(rank: int, k: CommKernel) -> Call:
    call = Call(rank, k.collective or "p2p", k.name)
    _attach_kernel(call, k)
    return call


def link_kernels(calls: list[tuple[int, Call]], col: Collector) -> list[Call]:
    """Attach each communication kernel to the host call that launched it (``calls``: pairs
    of thread index and call); return calls made of the kernels no call launched."""
    rank = calls[0][1].rank if calls else -1
    corr = np.asarray(col.launch_corr, dtype=np.int64)
    order = np.argsort(corr, kind="stable")
    corr = corr[order]
    on_thread: dict[int, list[tuple[float, float, Call]]] = defaultdict(list)
    for tid, call in calls:
        assert call.cpu is not None
        on_thread[tid].append((call.cpu[0], call.cpu[1], call))
    starts = {t: [s for s, _, _ in v] for t, v in on_thread.items()}
    alone = []
    for k in col.comm_kernels:
        i = int(np.searchsorted(corr, k.correlation)) if k.correlation >= 0 else corr.size
        found = None
        if i < corr.size and corr[i] == k.correlation:
            tid, ts = col.launch_tid[order[i]], col.launch_ts[order[i]]
            j = bisect.bisect_right(starts.get(tid, []), ts) - 1
            if j >= 0 and ts <= on_thread[tid][j][1] + EPSILON_US:
                found = on_thread[tid][j][2]
        if found is not None:
            _attach_kernel(found, k)
        else:
            alone.append(_standalone_kernel(rank if rank >= 0 else 0, k))
    return alone


def link_works(calls: list[Call], works: list[Marker]) -> list[Marker]:
    """Attach gloo's work spans to the calls that queued them, in order (module doc); return
    the spans no call queued."""
    queues: dict[str, list[int]] = defaultdict(list)
    works = sorted(works, key=lambda w: w.start)
    for i, w in enumerate(works):
        queues[collective_of(w.name) or ""].append(i)
    used = [False] * len(works)
    starts = {k: [works[i].start for i in q] for k, q in queues.items()}
    for call in sorted((c for c in calls if c.work is None and c.cpu is not None
                        and c.collective not in P2P), key=lambda c: c.cpu[0]):  # type: ignore
        best: int | None = None
        for kind in (call.collective, "all-reduce") if call.collective == "reduce-scatter" \
                else (call.collective,):
            q = queues.get(kind, [])
            j = bisect.bisect_left(starts.get(kind, []), call.cpu[0] - EPSILON_US)  # type: ignore
            while j < len(q) and used[q[j]]:
                j += 1
            if j < len(q) and (best is None or works[q[j]].start < works[best].start):
                best = q[j]
        if best is not None:
            used[best] = True
            _attach_work(call, works[best])
    return [w for w, u in zip(works, used, strict=True) if not u]


def _attach_work(call: Call, w: Marker) -> None:
    kind = collective_of(w.name) or call.collective
    call.work, call.stream, call.work_collective = (w.start, w.end), f"thread {w.tid}", kind
    call.track = (w.pid, w.tid)
    buf = annotation_buffer(kind)
    count, dtype = _from_dims(w.args, buf)
    if call.count is None and count is not None:
        call.count, call.per_rank = count, buf.per_rank
    call.dtype = call.dtype or dtype


def calls_of(rank: int, col: Collector) -> list[Call]:
    """Every call on this rank (module doc), ordered by start."""
    host: list[tuple[int, Call]] = []
    works: list[Marker] = []
    for nest in nests(col.markers):
        if all(m.name.startswith("gloo:") for m in nest):
            works.extend(nest)
            continue
        call = call_of_nest(rank, nest)
        if call is not None:
            host.append((col.tid(nest[0].tid), call))
    alone = link_kernels(host, col)
    calls = [c for _, c in host]
    for w in link_works(calls, works):
        kind = collective_of(w.name) or ""
        call = Call(rank, kind, w.name)
        _attach_work(call, w)
        alone.append(call)
    return sorted(calls + alone, key=lambda c: c.span[0])
