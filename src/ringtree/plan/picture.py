"""The step's picture as a Chrome/Perfetto trace (``plan --chrome step.json``: one process
per pipeline stage, one thread per track) or an SVG (``plan --svg step.svg``: one row per
stage, its communication under it)."""

from __future__ import annotations

import json
from html import escape

from ringtree.plan.record import Plan
from ringtree.plan.timeline import COMM, COMPUTE, DATA, SEND, Event, step_events
from ringtree.units import format_time

TRACKS = (COMPUTE, COMM, SEND, DATA)
TRACK_NAMES = {COMPUTE: "compute", COMM: "TP/CP/EP waits", SEND: "pipeline sends",
               DATA: "data-parallel"}
COLOURS = {
    "forward": "#4e79a7", "backward": "#59a14f", "comm": "#f28e2b", "send": "#b07aa1",
    "dp": "#e15759", "optimizer": "#9c755f", "bubble": "#d9d9d9",
}


def chrome_trace(p: Plan) -> dict:
    """``{"traceEvents": [...]}``: complete events in microseconds, names for the stages and
    tracks."""
    events = step_events(p)
    out: list[dict] = []
    stages = sorted({e.stage for e in events})
    for s in stages:
        out.append({"ph": "M", "pid": s, "name": "process_name",
                    "args": {"name": f"pipeline stage {s}"}})
        for k, track in enumerate(TRACKS):
            out.append({"ph": "M", "pid": s, "tid": k, "name": "thread_name",
                        "args": {"name": TRACK_NAMES[track]}})
    for e in events:
        out.append({
            "ph": "X", "pid": e.stage, "tid": TRACKS.index(e.track), "name": e.name,
            "cat": e.kind, "ts": round(e.start_s * 1e6, 3), "dur": round(e.dur_s * 1e6, 3),
        })
    return {"traceEvents": out, "displayTimeUnit": "ms",
            "otherData": {"strategy": p.strategy, "step_time_s": p.step_time_s}}


def write_chrome(p: Plan, path: str) -> None:
    """Write :func:`chrome_trace` to ``path``."""
    with open(path, "w") as f:
        json.dump(chrome_trace(p), f)


ROW, SUB, LEFT, WIDTH = 26, 9, 90, 1200


def svg(p: Plan) -> str:
    """The step as an SVG: per stage a compute row and a thin row of its communication."""
    events = step_events(p)
    end = max((e.start_s + e.dur_s for e in events), default=1.0) or 1.0
    stages = max((e.stage for e in events), default=0) + 1
    per_stage = ROW + 3 * SUB + 8
    height = 40 + stages * per_stage + 30
    scale = (WIDTH - LEFT - 10) / end
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<text x="{LEFT}" y="16">{escape(p.strategy)}: one step of '
        f"{escape(format_time(end, exact=False))}, {p.micro_batches} micro-batches</text>",
    ]
    offsets = {COMPUTE: 0, COMM: ROW, SEND: ROW + SUB, DATA: ROW + 2 * SUB}
    heights = {COMPUTE: ROW - 2, COMM: SUB - 1, SEND: SUB - 1, DATA: SUB - 1}
    for s in range(stages):
        y = 30 + s * per_stage
        parts.append(f'<text x="4" y="{y + 16}">stage {s}</text>')
    for e in events:
        parts.append(_rect(e, 30 + e.stage * per_stage + offsets[e.track], heights[e.track],
                           scale))
    y = height - 12
    x = LEFT
    for name, colour in COLOURS.items():
        parts.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="{y}">{name}</text>')
        x += 90
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _rect(e: Event, y: float, h: float, scale: float) -> str:
    x = LEFT + e.start_s * scale
    w = max(e.dur_s * scale, 0.3)
    title = f"{e.name}: {format_time(e.dur_s, exact=False)}"
    fill = COLOURS.get(e.kind, "#888")
    return (f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{h}" fill="{fill}">'
            f"<title>{escape(title)}</title></rect>")


def write_svg(p: Plan, path: str) -> None:
    """Write :func:`svg` to ``path``."""
    with open(path, "w") as f:
        f.write(svg(p))
