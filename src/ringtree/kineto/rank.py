"""One rank's trace file in, a :class:`~ringtree.kineto.calls.RankTrace` out
(:func:`read_rank`): its calls (:mod:`ringtree.kineto.link`), busy intervals, steps and
process groups, and a one-line warning for each field the trace lacks.

Steps. A ``ProfilerStep#N`` annotation is a window on the host thread that ran the step. On
a CPU trace that window is the step. On a GPU trace the step's work runs later on the device,
so its window there runs from the first kernel launched inside the host window to the first
kernel of the next step (the last step: to its last kernel's end) -- consecutive steps tile
the device's timeline, as HTA's per-rank breakdown does over the whole trace.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any

import numpy as np

from ringtree.kineto import intervals as iv
from ringtree.kineto.calls import Call, RankTrace, Step
from ringtree.kineto.events import COMM, COMPUTE, MEMORY, Collector
from ringtree.kineto.link import calls_of
from ringtree.kineto.reader import Progress, TraceFile

#: the machine's load while the run was traced, where the trace says (``ringtree lab ddp
#: --torch-profile`` writes it: ``{"other_cores": x, "wall_s": t}``)
LOAD_KEY = "ringtree_load"
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def read_rank(path: str | Path, progress: Progress | None = None,
              default_rank: int = 0) -> RankTrace:
    """Read one trace file (RingtreeError, one line, when it is not a readable Kineto trace).
    The rank is ``distributedInfo.rank``, else a number after ``rank``/``worker`` in the file
    name, else ``default_rank`` (each with a warning)."""
    f = TraceFile(path, progress)
    col = Collector()
    for e in f.events():
        col.add(e)
    warnings: list[str] = []
    info = f.header.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    rank = _rank(f.path, info, default_rank, warnings)
    calls = calls_of(rank, col)
    gpu = bool(len(col.kernel_start))
    busy = _gpu_busy(col) if gpu else _cpu_busy(col, calls)
    steps = _steps(col, gpu, warnings)
    groups = _groups(info)
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    _warn_missing(f.path, col, calls, warnings)
    devices = [str(d.get("name")) for d in f.header.get("deviceProperties") or []
               if isinstance(d, dict)]
    meta = {k: f.header[k] for k in ("schemaVersion", "traceName", "displayTimeUnit", LOAD_KEY)
            if k in f.header}
    return RankTrace(f.path, rank, world, str(info.get("backend", "")), "gpu" if gpu else "cpu",
                     str(f.header.get("host_name", "")), calls, busy, steps, groups, devices,
                     [f"{Path(f.path).name}: {w}" for w in warnings], meta)


def _rank(path: str, info: dict[str, Any], default: int, warnings: list[str]) -> int:
    if isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = _RANK_IN_NAME.search(Path(path).name)
    rank = int(m.group(1)) if m else default
    warnings.append(f"no distributedInfo.rank: taken as rank {rank} "
                    f"({'from the file name' if m else 'by its place in the list'})")
    return rank


def _groups(info: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Process group name -> members, from ``distributedInfo.pg_config`` (torch >= 2.1)."""
    out = {}
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict) and isinstance(pg.get("ranks"), list):
            out[str(pg.get("pg_name"))] = tuple(int(r) for r in pg["ranks"])
    return out


def _gpu_busy(col: Collector) -> dict[str, np.ndarray]:
    start, end = np.asarray(col.kernel_start), np.asarray(col.kernel_end)
    kind = np.asarray(col.kernel_kind)
    return {name: iv.merge(start[kind == k], end[kind == k])
            for name, k in (("compute", COMPUTE), ("memory", MEMORY), ("comm", COMM))}


def _cpu_busy(col: Collector, calls: list[Call]) -> dict[str, np.ndarray]:
    """Compute: each host thread's operators outside the collectives called on it; comm: the
    collectives' calls and gloo's work spans."""
    by_thread: dict[str, list[tuple[float, float]]] = {}
    spans = []
    for c in calls:
        if c.cpu is not None:
            by_thread.setdefault(c.thread, []).append(c.cpu)
            spans.append(c.cpu)
        if c.work is not None:
            spans.append(c.work)
    compute = []
    for tid, flat in col.ops.items():
        ops = np.asarray(flat).reshape(-1, 2)
        mine = by_thread.get(f"thread {col.tid_name(tid)}", [])
        comm = iv.merge([s for s, _ in mine], [e for _, e in mine])
        compute.append(iv.subtract(iv.merge(ops[:, 0], ops[:, 1]), comm))
    return {"compute": iv.union(*compute) if compute else iv.EMPTY,
            "comm": iv.merge([s for s, _ in spans], [e for _, e in spans]),
            "memory": iv.EMPTY}


def _steps(col: Collector, gpu: bool, warnings: list[str]) -> list[Step]:
    if not col.steps:
        warnings.append("no ProfilerStep#N markers (profile with a schedule and call "
                        "prof.step() each step): no step split")
        return []
    host = sorted((s, e, n) for n, s, e, _ in col.steps)
    if not gpu:
        return [Step(n, s, e) for s, e, n in host]
    corr = np.asarray(col.launch_corr, dtype=np.int64)
    if not corr.size:
        warnings.append("no kernel launches (cuda_runtime events): steps split on the host's "
                        "windows")
        return [Step(n, s, e) for s, e, n in host]
    order = np.argsort(corr, kind="stable")
    kcorr = np.asarray(col.kernel_corr, dtype=np.int64)
    i = np.clip(np.searchsorted(corr[order], kcorr), 0, corr.size - 1)
    found = corr[order][i] == kcorr
    launched = np.asarray(col.launch_ts)[order][i]
    starts = [s for s, _, _ in host]
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for k in np.flatnonzero(found):
        j = bisect.bisect_right(starts, launched[k]) - 1
        if j >= 0 and launched[k] <= host[j][1]:
            first[j] = min(first.get(j, np.inf), col.kernel_start[k])
            last[j] = max(last.get(j, -np.inf), col.kernel_end[k])
    idx = sorted(first)
    return [Step(host[j][2], first[j], first[idx[p + 1]] if p + 1 < len(idx) else last[j])
            for p, j in enumerate(idx)]


def _warn_missing(path: str, col: Collector, calls: list[Call], warnings: list[str]) -> None:
    for what, n in col.missing.items():
        warnings.append(f"{n} events without {what} were skipped")
    sizeless = [c for c in calls if c.count is None and c.collective != "barrier" and not c.label]
    if sizeless:
        warnings.append(f"{len(sizeless)} of {len(calls)} collectives have no size (profile with "
                        "record_shapes=True; GPU traces of torch >= 2.2 carry sizes in "
                        "record_param_comms)")
    untyped = [c for c in calls if c.count is not None and c.dtype is None]
    if untyped:
        warnings.append(f"{len(untyped)} collectives have no element type: no size in bytes")
