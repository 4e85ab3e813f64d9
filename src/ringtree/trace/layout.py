"""Where ranks sit in a schedule's picture: the layouts of :mod:`ringtree.trace.svg` (circle,
tree, nodes), the panel's geometry, and the bend of each arrow that keeps it off other ranks'
boxes and inside the panel."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ringtree.errors import RingtreeError
from ringtree.schedule import Schedule

TITLE_H = 44  # room for a panel's title and caption
PAD = 16
LAYOUTS = ("auto", "circle", "tree", "nodes")


def _neighbours(s: Schedule) -> list[set[int]]:
    adj: list[set[int]] = [set() for _ in range(s.n_ranks)]
    for _, t in s.transfers():
        adj[t.src].add(t.dst)
        adj[t.dst].add(t.src)
    return adj


def _bfs(adj: list[set[int]], root: int) -> dict[int, int | None]:
    """Parent of every rank reachable from ``root`` (root -> None), in BFS order."""
    parent: dict[int, int | None] = {root: None}
    queue = deque([root])
    while queue:
        u = queue.popleft()
        for v in sorted(adj[u]):
            if v not in parent:
                parent[v] = u
                queue.append(v)
    return parent


def _is_tree(adj: list[set[int]]) -> bool:
    edges = sum(len(a) for a in adj) // 2
    return edges == len(adj) - 1 and len(_bfs(adj, 0)) == len(adj)


def _tree_root(s: Schedule, adj: list[set[int]]) -> int:
    """The schedule's root, or else the centre of its graph (least eccentricity)."""
    if s.root is not None:
        return s.root

    def eccentricity(r: int) -> int:
        parent = _bfs(adj, r)
        depth = {r: 0}
        for v, p in parent.items():
            if p is not None:
                depth[v] = depth[p] + 1
        return max(depth.values()) if len(parent) == len(adj) else len(adj) + 1

    return min(range(s.n_ranks), key=lambda r: (eccentricity(r), r))


def choose_layout(s: Schedule, layout: str = "auto") -> str:
    """``circle``, ``tree`` or ``nodes`` for ``s`` (see the module docstring for ``auto``)."""
    if layout not in LAYOUTS:
        raise RingtreeError(f"unknown layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    multi_node = s.ranks_per_node is not None and s.ranks_per_node < s.n_ranks
    if layout == "nodes" and not multi_node:
        raise RingtreeError(
            f"layout 'nodes' needs a schedule on several nodes; {s.algorithm} {s.collective.value}"
            f" has ranks_per_node={s.ranks_per_node} on {s.n_ranks} ranks"
        )
    if layout != "auto":
        return layout
    if multi_node:
        return "nodes"
    if "tree" in s.algorithm or (s.algorithm != "ring" and _is_tree(_neighbours(s))):
        return "tree"
    return "circle"


@dataclass(frozen=True)
class Geometry:
    """Where the ranks sit in a panel, and the sizes of a rank's box."""

    centres: list[tuple[float, float]]
    box_w: float
    box_h: float
    cell_w: float
    width: float
    height: float
    frames: list[tuple[float, float, float, float, str]]  # x, y, w, h, label of each node


def _circle(n: int, radius: float, x0: float = 0.0) -> list[tuple[float, float]]:
    """``n`` points clockwise on a circle from the top, centred at (x0, 0)."""
    return [
        (x0 + radius * math.cos(2 * math.pi * i / n - math.pi / 2),
         radius * math.sin(2 * math.pi * i / n - math.pi / 2))
        for i in range(n)
    ]


def _tree_positions(
    s: Schedule, box_w: float, box_h: float
) -> tuple[list[tuple[float, float]], float]:
    """Tidy layered layout of the BFS tree from the root: leaves side by side in order,
    parents centred over their children. Also the room to leave below the last layer (for
    arcs between ranks of one layer, which also get wider gaps)."""
    n, adj = s.n_ranks, _neighbours(s)
    parent = _bfs(adj, _tree_root(s, adj))
    for r in range(n):  # ranks the first tree does not reach: more roots
        if r not in parent:
            parent.update(_bfs(adj, r))
    depth: dict[int, int] = {}
    children: dict[int, list[int]] = {r: [] for r in range(n)}
    for v, p in parent.items():  # BFS order: parents first
        depth[v] = 0 if p is None else depth[p] + 1
        if p is not None:
            children[p].append(v)
    same_layer = any(depth[u] == depth[v] for u in range(n) for v in adj[u])
    slot, gap_y = box_w + (70 if same_layer else 26), box_h + 74
    x: dict[int, float] = {}
    leaves = 0

    def place(u: int) -> None:
        nonlocal leaves
        for v in sorted(children[u]):
            place(v)
        if children[u]:
            x[u] = sum(x[v] for v in children[u]) / len(children[u])
        else:
            x[u], leaves = leaves * slot, leaves + 1

    for r in range(n):
        if parent[r] is None:
            place(r)
    return [(x[r], depth[r] * gap_y) for r in range(n)], gap_y * 0.7 if same_layer else 0.0


def geometry(s: Schedule, layout: str) -> Geometry:
    """Where each rank's box sits in a panel of ``s`` drawn with ``layout``, and the sizes."""
    cell_w = max(5.0, min(16.0, 120.0 / s.n_chunks))
    box_w = max(64.0, s.n_chunks * (cell_w + 2) + 14)
    box_h = 50.0
    n, bottom, top = s.n_ranks, 0.0, 12.0
    nodes: list[list[int]] = []
    if layout == "circle":
        raw = _circle(n, max(118.0, n * (box_w + 56) / (2 * math.pi)) if n > 1 else 0.0)
    elif layout == "nodes":  # one small ring per node, the nodes side by side
        rpn = s.ranks_per_node or n
        nodes = [list(range(j, min(j + rpn, n))) for j in range(0, n, rpn)]
        radius = max(80.0, rpn * (box_w + 40) / (2 * math.pi)) if rpn > 1 else 0.0
        raw = []
        for j, ranks in enumerate(nodes):
            raw += _circle(len(ranks), radius, j * (2 * radius + box_w + 90))
        top += 24  # room for the node's frame and name
    else:
        raw, bottom = _tree_positions(s, box_w, box_h)
    min_x = min(p[0] for p in raw) - box_w / 2 - PAD - 24
    min_y = min(p[1] for p in raw) - box_h / 2 - top
    centres = [(px - min_x, py - min_y + TITLE_H) for px, py in raw]
    width = max(p[0] for p in centres) + box_w / 2 + PAD + 24
    height = max(p[1] for p in centres) + box_h / 2 + PAD + bottom
    frames = []
    for j, ranks in enumerate(nodes):
        xs, ys = [centres[r][0] for r in ranks], [centres[r][1] for r in ranks]
        x0, y0 = min(xs) - box_w / 2 - 14, min(ys) - box_h / 2 - 30
        frames.append((x0, y0, max(xs) + box_w / 2 + 14 - x0, max(ys) + box_h / 2 + 12 - y0,
                       f"node {j}"))
    return Geometry(centres, box_w, box_h, cell_w, max(width, 220.0), height, frames)


def exit_point(
    centre: tuple[float, float], towards: tuple[float, float], geo: Geometry, margin: float
) -> tuple[float, float]:
    """Where the ray from a box's centre towards ``towards`` leaves the box, plus ``margin``."""
    dx, dy = towards[0] - centre[0], towards[1] - centre[1]
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    hw, hh = geo.box_w / 2, geo.box_h / 2
    t = min(hw / abs(ux) if ux else math.inf, hh / abs(uy) if uy else math.inf)
    return centre[0] + ux * (t + margin), centre[1] + uy * (t + margin)


def control(geo: Geometry, src: int, dst: int, bend: float) -> tuple[float, float]:
    """The control point of the arrow ``src -> dst``: ``bend`` x its length to its left."""
    (x0, y0), (x2, y2) = geo.centres[src], geo.centres[dst]
    return (x0 + x2) / 2 + (y2 - y0) * bend, (y0 + y2) / 2 - (x2 - x0) * bend


def _crosses_a_box(geo: Geometry, src: int, dst: int, bend: float) -> bool:
    """Whether the arrow ``src -> dst`` would pass over another rank's box or off the panel."""
    (x0, y0), (x2, y2) = geo.centres[src], geo.centres[dst]
    cx, cy = control(geo, src, dst, bend)
    hw, hh = geo.box_w / 2 + 6, geo.box_h / 2 + 6
    for i in range(1, 24):
        t = i / 24
        x = (1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t * t * x2
        y = (1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t * t * y2
        if not (8 < x < geo.width - 8 and TITLE_H < y < geo.height - 8):
            return True
        for r, (bx, by) in enumerate(geo.centres):
            if r != src and r != dst and abs(x - bx) < hw and abs(y - by) < hh:
                return True
    return False


def bend(geo: Geometry, src: int, dst: int, base: float) -> float:
    """The least bend from ``base`` up that keeps the arrow off other boxes (if any does)."""
    options = [base + extra for extra in (0.0, 0.2, 0.4, 0.65)]
    options += [-b for b in options]  # the other side, if the left one is blocked
    return next((b for b in options if not _crosses_a_box(geo, src, dst, b)), base)
