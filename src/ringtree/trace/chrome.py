"""Chrome trace-event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

Layout: one process per run (``pid``, named by a ``process_name`` metadata event), one thread
track per rank (``tid = rank``, named ``rank r``), one complete slice (``"ph": "X"``) per
send, receive and reduce with ``args`` {bytes, chunk, peer, step, phase}; ``cat`` is the kind.

Slices on one track must nest (the format's rule; Perfetto drops the rest). Predicted traces
always do. Measured slices that overlap without nesting (a receive posted during a send) go
to an extra track of the same rank, ``tid = rank + lane * n_ranks``, named ``rank r (lane k)``
and sorted right below it.

Times are written in microseconds from the earliest event, rounded to the nanosecond.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ringtree.cost.terms import Link
from ringtree.events import KINDS, TraceEvent
from ringtree.schedule import Schedule
from ringtree.trace.files import write_text
from ringtree.trace.predicted import predicted_events

_ARROW = {"send": "→", "recv": "←", "reduce": "+"}


def _slice_name(e: TraceEvent) -> str:
    peer = "" if e.kind == "reduce" else f" {_ARROW[e.kind]} r{e.peer}"
    return f"{e.kind} c{e.chunk}{peer}"


def _pack_lanes(spans: list[tuple[int, int, TraceEvent]]) -> list[tuple[int, int, int]]:
    """For spans sorted by (start, longest first): ``(lane, start, end)`` with the lowest lane
    of their rank where the span nests inside the open spans (or starts after them).

    Times are whole nanoseconds rounded one by one, so a span may poke out of its parent or
    overlap the one before by 1 ns; such a span is trimmed to fit rather than sent to a lane
    of its own."""
    open_spans: dict[int, list[list[tuple[int, int]]]] = {}  # rank -> lanes -> (start, end)
    out = []
    for start, end, e in spans:
        stacks = open_spans.setdefault(e.rank, [])
        lane = 0
        while lane < len(stacks):
            stack = stacks[lane]
            while stack and stack[-1][1] <= start + _SLACK_NS:  # spans over by now
                start = max(start, stack.pop()[1])
            if not stack or end <= stack[-1][1] + _SLACK_NS:  # nests in the innermost open span
                if stack:  # inside it at both ends (its start may have been trimmed too)
                    start, end = max(start, stack[-1][0]), min(end, stack[-1][1])
                break
            lane += 1
        else:
            stacks.append([])
        end = max(start, end)
        stacks[lane].append((start, end))
        out.append((lane, start, end))
    return out


_SLACK_NS = 1


def to_chrome_trace(
    events: Iterable[TraceEvent],
    *,
    run: str = "measured",
    pid: int = 0,
    n_ranks: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    t0_s: float | None = None,
) -> dict[str, Any]:
    """The trace-event JSON object for ``events`` (of one run), ready for ``json.dump``.

    ``run`` names the process; ``pid`` lets several runs share one file (concatenate their
    ``traceEvents``); ``n_ranks`` gives every rank a track, even one without events
    (default: the highest rank seen + 1); ``metadata`` goes to ``otherData``; ``t0_s`` is the
    time written as 0 (default: the earliest event), so that runs sharing a file share a clock.
    """
    evs = list(events)
    t0 = min((e.t_start_s for e in evs), default=0.0) if t0_s is None else t0_s
    spans = sorted(
        ((round((e.t_start_s - t0) * 1e9), round((e.t_end_s - t0) * 1e9), e) for e in evs),
        key=lambda x: (x[0], x[0] - x[1], x[2].rank, KINDS.index(x[2].kind)),
    )
    packed = _pack_lanes(spans)
    lanes = [lane for lane, _, _ in packed]
    spans = [(a, b, e) for (_, a, b), (_, _, e) in zip(packed, spans, strict=True)]
    n_ranks = max([n_ranks or 0, *(e.rank + 1 for e in evs)])
    n_lanes = max(lanes, default=0) + 1
    out: list[dict[str, Any]] = [
        {"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": run}}
    ]
    tracks = {(e.rank, lane) for (_, _, e), lane in zip(spans, lanes, strict=True)}
    tracks |= {(r, 0) for r in range(n_ranks)}
    for rank, lane in sorted(tracks):
        tid = rank + lane * n_ranks
        name = f"rank {rank}" + (f" (lane {lane})" if lane else "")
        out.append(
            {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}
        )
        out.append(
            {
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "name": "thread_sort_index",
                "args": {"sort_index": rank * n_lanes + lane},
            }
        )
    for (start, end, e), lane in zip(spans, lanes, strict=True):
        out.append(
            {
                "ph": "X",
                "pid": pid,
                "tid": e.rank + lane * n_ranks,
                "name": _slice_name(e),
                "cat": e.kind,
                "ts": start / 1000,
                "dur": (end - start) / 1000,
                "args": {
                    "bytes": e.bytes,
                    "chunk": e.chunk,
                    "peer": e.peer,
                    "step": e.step,
                    "phase": e.phase,
                },
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": dict(metadata or {})}


def schedule_chrome_trace(s: Schedule, count: int, itemsize: int, link: Link) -> dict[str, Any]:
    """The predicted trace of ``s`` on ``link`` (see :mod:`ringtree.trace.predicted`)."""
    return to_chrome_trace(
        predicted_events(s, count, itemsize, link),
        run=f"predicted: {s.algorithm} {s.collective.value} on {link.name}",
        n_ranks=s.n_ranks,
        metadata={
            "collective": s.collective.value,
            "algorithm": s.algorithm,
            "n_ranks": s.n_ranks,
            "size_bytes": count * itemsize,
            "link": link.name,
            "bandwidth_Bps": link.bandwidth_Bps,
            "alpha_s": link.alpha_s,
            "gamma_s_per_byte": link.gamma_s_per_byte,
        },
    )


def write_chrome_trace(path: str, trace: Mapping[str, Any]) -> None:
    """Write ``trace`` as JSON to ``path`` (RingtreeError, one line, if it cannot)."""
    write_text(path, json.dumps(trace, allow_nan=False, ensure_ascii=False))
