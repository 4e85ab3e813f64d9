"""A Schedule as a picture: one panel per step, ranks as boxes holding their chunks.

Each rank is a box with one cell per chunk; a cell's fill is the share of the ranks' inputs
the chunk holds after the step (a quarter-full cell on 4 ranks: one input; full: complete --
fully reduced, or the gathered/broadcast data). Each transfer of the step is an arrow from
``src`` to ``dst`` in the colour of its chunk, labelled ``c<chunk>``: solid when the receiver
reduces the chunk into its own, dashed when it copies it; the cells a step writes are
outlined. A first panel shows the state before step 1.

Layouts: ``circle`` (rank 0 at the top, clockwise; ring algorithms and anything that is not
a tree), ``tree`` (layers from the root along the schedule's edges; tree algorithms) and
``nodes`` (one small circle per node in a dashed frame, for schedules with
``ranks_per_node``). ``auto`` picks ``nodes`` for schedules on several nodes, ``tree`` for
algorithms named ``*tree*`` and for schedules whose edges form a tree, except ``ring`` (a
chain is drawn on its ring), and ``circle`` otherwise. Arrows bend further, or to the other
side, to keep off other ranks' boxes and inside the panel.

Plain SVG 1.1 written with ElementTree: no CSS, no markers, no scripts, so any viewer (and
an HTML page, several panels at once) shows it the same.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule
from ringtree.simulate import initial_holdings, track
from ringtree.trace.files import write_text
from ringtree.trace.layout import (
    PAD,
    Geometry,
    bend,
    choose_layout,
    control,
    exit_point,
    geometry,
)
from ringtree.trace.words import caption, schedule_title

MAX_RANKS = 32
MAX_CHUNKS = 64
# Paul Tol's "bright" and "muted" qualitative schemes: distinct for colour-blind readers too.
CHUNK_COLOURS = (
    "#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#332288", "#117733",
    "#999933", "#882255", "#44AA99", "#DDCC77",
)
INK, MUTED, FONT = "#222222", "#666666", "Helvetica, Arial, sans-serif"
SVG_NS = "http://www.w3.org/2000/svg"


def chunk_colour(chunk: int) -> str:
    """The colour of chunk ``chunk`` (cycles after 12)."""
    return CHUNK_COLOURS[chunk % len(CHUNK_COLOURS)]


def _el(
    parent: ET.Element | None, tag: str, text: str | None = None, **attrs: object
) -> ET.Element:
    """An element with attributes (``stroke_width`` -> ``stroke-width``, ``class_`` -> class)."""
    a = {k.rstrip("_").replace("_", "-"): _fmt(v) for k, v in attrs.items() if v is not None}
    e = ET.Element(tag, a) if parent is None else ET.SubElement(parent, tag, a)
    if text is not None:
        e.text = text
    return e


def _fmt(v: object) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v)


# -- layout --------------------------------------------------------------------------------
# -- drawing -------------------------------------------------------------------------------
def _arrow(
    g: ET.Element, geo: Geometry, src: int, dst: int, chunk: int, action: Action, bend: float
) -> None:
    """A curved arrow ``src -> dst``, bulging to the left of its direction by ``bend``."""
    (x0, y0), (x2, y2) = geo.centres[src], geo.centres[dst]
    cx, cy = control(geo, src, dst, bend)
    a = exit_point((x0, y0), (cx, cy), geo, 3)
    b = exit_point((x2, y2), (cx, cy), geo, 3)
    ux, uy = b[0] - cx, b[1] - cy
    un = math.hypot(ux, uy) or 1.0
    ux, uy = ux / un, uy / un
    head, half = 10.0, 5.0
    end = (b[0] - ux * head * 0.9, b[1] - uy * head * 0.9)
    colour = chunk_colour(chunk)
    reduce = action is Action.REDUCE
    arrow = _el(g, "g", class_=f"transfer {action.value}")
    _el(arrow, "title", f"rank {src} -> rank {dst}: chunk {chunk}, {action.value}")
    _el(
        arrow,
        "path",
        d=f"M {_fmt(a[0])} {_fmt(a[1])} Q {_fmt(cx)} {_fmt(cy)} {_fmt(end[0])} {_fmt(end[1])}",
        fill="none",
        stroke=colour,
        stroke_width=2.6 if reduce else 2.2,
        stroke_dasharray=None if reduce else "6 4",
        stroke_linecap="round",
    )
    _el(
        arrow,
        "polygon",
        points=" ".join(
            f"{_fmt(px)},{_fmt(py)}"
            for px, py in (
                b,
                (b[0] - ux * head - uy * half, b[1] - uy * head + ux * half),
                (b[0] - ux * head + uy * half, b[1] - uy * head - ux * half),
            )
        ),
        fill=colour,
    )
    mx = 0.25 * a[0] + 0.5 * cx + 0.25 * end[0]
    my = 0.25 * a[1] + 0.5 * cy + 0.25 * end[1]
    label = f"c{chunk}"
    w = 8 + 7 * len(label)
    _el(arrow, "rect", x=mx - w / 2, y=my - 8.0, width=w, height=16, rx=8, fill="white",
        stroke=colour, stroke_width=1.4)
    _el(arrow, "text", label, x=mx, y=my + 4.0, text_anchor="middle", font_family=FONT,
        font_size=11, font_weight="bold", fill=colour)


def _rank_box(
    g: ET.Element, geo: Geometry, rank: int, held: list[int], full: int, written: set[int]
) -> None:
    """Rank ``rank``'s box: its name and one cell per chunk, filled by share of inputs."""
    cx, cy = geo.centres[rank]
    x0, y0 = cx - geo.box_w / 2, cy - geo.box_h / 2
    box = _el(g, "g", class_="rank")
    _el(box, "rect", x=x0, y=y0, width=geo.box_w, height=geo.box_h, rx=7, fill="#F7F7F7",
        stroke="#555555", stroke_width=1.3)
    _el(box, "text", f"rank {rank}", x=cx, y=y0 + 15.0, text_anchor="middle", font_family=FONT,
        font_size=12, font_weight="bold", fill=INK)
    n_bits = full.bit_count()
    cell_h, step = 20.0, geo.cell_w + 2
    left = cx - (len(held) * step - 2) / 2
    top = y0 + 22.0
    for c, mask in enumerate(held):
        x = left + c * step
        colour = chunk_colour(c)
        share = mask.bit_count() / n_bits
        cell = _el(box, "g", class_="cell")
        _el(cell, "title", f"rank {rank}, chunk {c}: {mask.bit_count()} of {n_bits} inputs")
        _el(cell, "rect", x=x, y=top, width=geo.cell_w, height=cell_h, fill="white",
            stroke=colour, stroke_width=1.0)
        if share:
            h = cell_h * share
            _el(cell, "rect", x=x, y=top + cell_h - h, width=geo.cell_w, height=h, fill=colour)
        if c in written:
            _el(cell, "rect", x=x - 1.5, y=top - 1.5, width=geo.cell_w + 3, height=cell_h + 3,
                fill="none", stroke=INK, stroke_width=1.6)


def step_panels(s: Schedule, layout: str = "auto") -> list[ET.Element]:
    """One ``<svg>`` element per panel: the state before step 1, then one per step.

    Each carries ``class="panel start"`` or ``class="panel step"`` and ``data-step``.
    """
    if s.n_ranks > MAX_RANKS or s.n_chunks > MAX_CHUNKS:
        raise RingtreeError(
            f"a picture of {s.n_ranks} ranks and {s.n_chunks} chunks would be unreadable: "
            f"pictures take up to {MAX_RANKS} ranks and {MAX_CHUNKS} chunks (use --json)"
        )
    kind = choose_layout(s, layout)
    geo = geometry(s, kind)
    full = (1 << s.n_ranks) - 1
    states = [initial_holdings(s), *track(s)]
    panels = []
    for k, held in enumerate(states):
        step = s.steps[k - 1] if k else None
        svg = _el(None, "svg", xmlns=SVG_NS, width=geo.width, height=geo.height,
                  viewBox=f"0 0 {_fmt(geo.width)} {_fmt(geo.height)}",
                  class_="panel step" if step else "panel start", data_step=k)
        _el(svg, "rect", width=geo.width, height=geo.height, rx=10, fill="white",
            stroke="#DDDDDD")
        title = (
            f"step {k} of {s.n_steps}"
            + (f" · {step.phase}" if step.phase else "")
            + (" · done" if k == s.n_steps else "")
            if step
            else "before step 1"
        )
        _el(svg, "text", title, x=14.0, y=22.0, font_family=FONT, font_size=14,
            font_weight="bold", fill=INK)
        _el(svg, "text", caption(s, k), x=14.0, y=39.0, font_family=FONT, font_size=12,
            fill=MUTED)
        written = {r: set() for r in range(s.n_ranks)}
        if step:
            seen: dict[tuple[int, int], int] = {}
            for t in step.transfers:
                written[t.dst].add(t.chunk)
        for x, y, w, h, label in geo.frames:
            _el(svg, "rect", x=x, y=y, width=w, height=h, rx=14, fill="none", stroke="#AAAAAA",
                stroke_dasharray="5 4", class_="node")
            _el(svg, "text", label, x=x + 10, y=y + 17, font_family=FONT, font_size=12,
                fill=MUTED)
        for r in range(s.n_ranks):
            _rank_box(svg, geo, r, held[r], full, written[r])
        if step:
            for t in step.transfers:
                j = seen[(t.src, t.dst)] = seen.get((t.src, t.dst), -1) + 1
                curve = bend(geo, t.src, t.dst, 0.16 + 0.12 * j)
                _arrow(svg, geo, t.src, t.dst, t.chunk, t.action, curve)
        panels.append(svg)
    return panels


LEGEND_W, LEGEND_H = 760.0, 70.0


def legend_svg(s: Schedule) -> ET.Element:
    """The key to the pictures of ``s``, as an ``<svg>`` of LEGEND_W x LEGEND_H."""
    g = _el(None, "svg", xmlns=SVG_NS, width=LEGEND_W, height=LEGEND_H, class_="legend",
            viewBox=f"0 0 {_fmt(LEGEND_W)} {_fmt(LEGEND_H)}")
    text = {"font_family": FONT, "font_size": 12, "fill": INK}
    _el(g, "path", d="M 0 8 L 34 8", stroke=INK, stroke_width=2.6)
    _el(g, "text", "reduce: the receiver combines the chunk into its own", x=42.0, y=12.0,
        **text)
    _el(g, "path", d="M 360 8 L 394 8", stroke=INK, stroke_width=2.2, stroke_dasharray="6 4")
    _el(g, "text", "copy: the receiver stores the chunk", x=402.0, y=12.0, **text)
    _el(g, "text", "chunks:", x=0.0, y=36.0, **text)
    for c in range(min(s.n_chunks, len(CHUNK_COLOURS))):
        _el(g, "rect", x=52.0 + 40 * c, y=25.0, width=12, height=14, fill=chunk_colour(c))
        _el(g, "text", f"c{c}", x=68.0 + 40 * c, y=36.0, **text)
    if s.n_chunks > len(CHUNK_COLOURS):
        _el(g, "text", "(colours repeat)", x=52.0 + 40 * len(CHUNK_COLOURS), y=36.0, **text)
    _el(g, "text", "a cell's fill: the share of the ranks' inputs that the chunk holds (full: "
        "complete); outlined: written in this step", x=0.0, y=60.0, **text)
    return g


def schedule_svg(s: Schedule, *, layout: str = "auto", columns: int | None = None) -> str:
    """The whole schedule as one SVG document: a title, the panels in a grid of ``columns``
    (default: up to 4), then the legend."""
    panels = step_panels(s, layout)
    cols = columns or min(4, len(panels))
    if cols < 1:
        raise RingtreeError(f"columns must be >= 1, got {cols}")
    pw, ph = float(panels[0].get("width", 0)), float(panels[0].get("height", 0))
    gap = 12.0
    rows = math.ceil(len(panels) / cols)
    width = max(cols * (pw + gap) - gap + 2 * PAD, LEGEND_W + 2 * PAD)
    top = 44.0
    legend_y = top + rows * (ph + gap) + 4
    height = legend_y + LEGEND_H + 6
    root = _el(None, "svg", xmlns=SVG_NS, width=width, height=height,
               viewBox=f"0 0 {_fmt(width)} {_fmt(height)}")
    _el(root, "rect", width=width, height=height, fill="#FCFCFC")
    _el(root, "text", schedule_title(s), x=PAD, y=28.0, font_family=FONT, font_size=18,
        font_weight="bold", fill=INK)
    for i, panel in enumerate(panels):
        panel.set("x", _fmt(PAD + (i % cols) * (pw + gap)))
        panel.set("y", _fmt(top + (i // cols) * (ph + gap)))
        root.append(panel)
    legend = legend_svg(s)
    legend.set("x", _fmt(PAD))
    legend.set("y", _fmt(legend_y))
    root.append(legend)
    return ET.tostring(root, encoding="unicode")


def write_svg(path: str, s: Schedule, *, layout: str = "auto") -> None:
    """Write :func:`schedule_svg` of ``s`` to ``path``."""
    write_text(path, schedule_svg(s, layout=layout))
