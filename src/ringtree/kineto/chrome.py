"""The traces read, written back as one Chrome trace with the model's predictions
(:func:`write_annotated`): every event as it was, and beside each priced collective a slice
of the predicted length on a track of its own (``<track> predicted``, the same process),
starting where the measured one starts. Perfetto (ui.perfetto.dev) and chrome://tracing open
it.

Several ranks' traces share the output: each rank's integer process ids become
``rank x 10**7 + pid`` (Linux pids stay below 2**22) and its processes are named
``rank r: <name>``. The files are streamed through (:mod:`ringtree.kineto.reader`): memory
holds one event at a time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from ringtree.errors import RingtreeError
from ringtree.kineto.calls import Run
from ringtree.kineto.instances import Instance
from ringtree.kineto.pricing import Priced
from ringtree.kineto.reader import TraceFile
from ringtree.units import format_bytes

PID_STRIDE = 10**7


def _pid(pid: Any, rank: int, many: bool) -> Any:
    if not many:
        return pid
    return rank * PID_STRIDE + pid if isinstance(pid, int) else f"{pid} (rank {rank})"


def _copy(f: IO[str], path: str, rank: int, many: bool, first: bool) -> bool:
    for e in TraceFile(path).events():
        if many:
            e["pid"] = _pid(e.get("pid"), rank, many)
            if e.get("ph") == "M" and e.get("name") == "process_name":
                args = e.get("args") if isinstance(e.get("args"), dict) else {}
                e["args"] = {**args, "name": f"rank {rank}: {args.get('name', '')}"}
        f.write(("" if first else ",\n") + json.dumps(e))
        first = False
    return first


def predicted_events(found: list[Instance], prices: dict[int, Priced],
                     many: bool) -> list[dict[str, Any]]:
    """A predicted slice beside every call of every priced collective."""
    out = []
    for inst in found:
        p = prices.get(id(inst))
        if p is None:
            continue
        for c in inst.calls:
            pid, tid = c.track
            size = format_bytes(c.size_bytes) if c.size_bytes is not None else "?"
            out.append({
                "ph": "X", "cat": "ringtree_prediction", "name": f"predicted {c.collective} {size}",
                "pid": _pid(pid, c.rank, many), "tid": f"{tid} predicted", "ts": c.span[0],
                "dur": p.time_s * 1e6,
                "args": {"predicted_s": p.time_s, "algorithm": p.algorithm,
                         "measured_s": inst.time_us * 1e-6, "group_size": c.group_size},
            })
    return out


def write_annotated(path: str, run: Run, found: list[Instance],
                    prices: dict[int, Priced]) -> int:
    """Write the annotated trace (module doc) to ``path``; the number of predicted slices.
    RingtreeError when ``path`` cannot be written."""
    many = len(run.ranks) > 1
    extra = predicted_events(found, prices, many)
    try:
        with open(Path(path), "w") as f:
            f.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
            first = True
            for r in run.ranks:
                first = _copy(f, r.path, r.rank, many, first)
            for e in extra:
                f.write(("" if first else ",\n") + json.dumps(e))
                first = False
            f.write("\n]}\n")
    except OSError as e:
        raise RingtreeError(f"cannot write {path!r}: {e.strerror}") from None
    return len(extra)
