"""Which layout a schedule's picture takes (:mod:`ringtree.trace.svg`): ``circle``, ``tree``
(the schedule's edges form a tree, or the algorithm is named after one) or ``nodes`` (a
schedule on several nodes)."""

from __future__ import annotations

from collections import deque

from ringtree.errors import RingtreeError
from ringtree.schedule import Schedule

LAYOUTS = ("auto", "circle", "tree", "nodes")


def neighbours(s: Schedule) -> list[set[int]]:
    """Per rank, the ranks it exchanges anything with."""
    adj: list[set[int]] = [set() for _ in range(s.n_ranks)]
    for _, t in s.transfers():
        adj[t.src].add(t.dst)
        adj[t.dst].add(t.src)
    return adj


def bfs(adj: list[set[int]], root: int) -> dict[int, int | None]:
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
    """Whether the graph is connected and has N-1 edges."""
    edges = sum(len(a) for a in adj) // 2
    return edges == len(adj) - 1 and len(bfs(adj, 0)) == len(adj)


def tree_root(s: Schedule, adj: list[set[int]]) -> int:
    """The schedule's root, or else the centre of its graph (least eccentricity)."""
    if s.root is not None:
        return s.root

    def eccentricity(r: int) -> int:
        parent = bfs(adj, r)
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
    if "tree" in s.algorithm or (s.algorithm != "ring" and _is_tree(neighbours(s))):
        return "tree"
    return "circle"
