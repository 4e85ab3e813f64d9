"""Algorithm registry: ``(collective, name) -> builder``; every builder returns a Schedule.

Builders take ``(n_ranks, BuildSpec)`` so one call site serves every algorithm. Add an
algorithm by writing its builder in a family module and registering it in ``_register``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.schedule import Schedule


@dataclass(frozen=True)
class BuildSpec:
    """Settings a builder may read.

    root: root rank of broadcast/reduce (ignored otherwise).
    n_chunks: pipeline depth for chain/tree algorithms (None: the algorithm's default).
    ranks_per_node: node size for hierarchical algorithms (None: not hierarchical).
    fold: for power-of-two algorithms (recursive doubling/halving) on other N, fold the extra
        ranks into partners first (MPICH's way); False refuses such N.
    """

    root: int = 0
    n_chunks: int | None = None
    ranks_per_node: int | None = None
    fold: bool = True


Builder = Callable[[int, BuildSpec], Schedule]
_REGISTRY: dict[tuple[Collective, str], Builder] = {}
DEFAULT_PIPELINE_CHUNKS = 4


def register(collective: Collective, name: str) -> Callable[[Builder], Builder]:
    """Decorator: make ``builder`` the algorithm ``name`` for ``collective``."""

    def deco(builder: Builder) -> Builder:
        _REGISTRY[(collective, name)] = builder
        return builder

    return deco


def algorithms_for(collective: Collective) -> list[str]:
    """Names of the algorithms registered for ``collective``, in registration order."""
    return [name for (c, name) in _REGISTRY if c is collective]


def build(
    collective: Collective | str,
    algorithm: str,
    n_ranks: int,
    *,
    root: int = 0,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    fold: bool = True,
) -> Schedule:
    """The Schedule of ``algorithm`` for ``collective`` on ``n_ranks`` ranks.

    Raises RingtreeError for an unknown algorithm, N < 1, or a root outside 0..N-1.
    """
    col = Collective.parse(collective)
    if n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {n_ranks}")
    if col.has_root and not 0 <= root < n_ranks:
        raise RingtreeError(f"root {root} is not a rank of 0..{n_ranks - 1}")
    if n_chunks is not None and n_chunks < 1:
        raise RingtreeError(f"number of chunks must be >= 1, got {n_chunks}")
    key = algorithm.strip().lower()
    builder = _REGISTRY.get((col, key))
    if builder is None:
        known = ", ".join(algorithms_for(col))
        raise RingtreeError(
            f"unknown algorithm {algorithm!r} for {col.value}: expected one of {known}"
        )
    return builder(n_ranks, BuildSpec(root, n_chunks, ranks_per_node, fold))


def _register() -> None:
    from ringtree.algorithms import ring

    register(Collective.REDUCE_SCATTER, "ring")(
        lambda n, spec: ring.ring_reduce_scatter(n, shift=-1)
    )
    register(Collective.ALL_GATHER, "ring")(lambda n, spec: ring.ring_all_gather(n))
    register(Collective.ALL_REDUCE, "ring")(lambda n, spec: ring.ring_all_reduce(n))
    register(Collective.BROADCAST, "ring")(
        lambda n, spec: ring.ring_broadcast(
            n, root=spec.root, n_chunks=spec.n_chunks or DEFAULT_PIPELINE_CHUNKS
        )
    )
    register(Collective.REDUCE, "ring")(
        lambda n, spec: ring.ring_reduce(
            n, root=spec.root, n_chunks=spec.n_chunks or DEFAULT_PIPELINE_CHUNKS
        )
    )

    from ringtree.algorithms import dbtree, hierarchical, pairwise, recursive, tree

    register(Collective.BROADCAST, "tree")(
        lambda n, spec: tree.tree_broadcast(n, root=spec.root, n_chunks=spec.n_chunks or 1)
    )
    register(Collective.REDUCE, "tree")(
        lambda n, spec: tree.tree_reduce(n, root=spec.root, n_chunks=spec.n_chunks or 1)
    )
    register(Collective.ALL_REDUCE, "tree")(
        lambda n, spec: tree.tree_all_reduce(n, n_chunks=spec.n_chunks or DEFAULT_PIPELINE_CHUNKS)
    )
    register(Collective.ALL_REDUCE, "dbtree")(
        lambda n, spec: dbtree.dbtree_all_reduce(
            n, n_chunks=spec.n_chunks or DEFAULT_PIPELINE_CHUNKS
        )
    )
    register(Collective.ALL_GATHER, "recursive")(
        lambda n, spec: recursive.recursive_all_gather(n, fold=spec.fold)
    )
    register(Collective.REDUCE_SCATTER, "recursive")(
        lambda n, spec: recursive.recursive_reduce_scatter(n, fold=spec.fold)
    )
    register(Collective.ALL_REDUCE, "recursive")(
        lambda n, spec: recursive.recursive_all_reduce(n, fold=spec.fold)
    )
    register(Collective.ALL_REDUCE, "rabenseifner")(
        lambda n, spec: recursive.rabenseifner_all_reduce(n, fold=spec.fold)
    )
    register(Collective.ALL_REDUCE, "hierarchical")(
        lambda n, spec: hierarchical.hierarchical_all_reduce(n, spec.ranks_per_node)
    )
    register(Collective.REDUCE_SCATTER, "hierarchical")(
        lambda n, spec: hierarchical.hierarchical_reduce_scatter(n, spec.ranks_per_node)
    )
    register(Collective.ALL_GATHER, "hierarchical")(
        lambda n, spec: hierarchical.hierarchical_all_gather(n, spec.ranks_per_node)
    )
    register(Collective.REDUCE_SCATTER, "pairwise")(
        lambda n, spec: pairwise.pairwise_reduce_scatter(n)
    )
    register(Collective.ALL_GATHER, "pairwise")(lambda n, spec: pairwise.pairwise_all_gather(n))
    register(Collective.ALL_REDUCE, "pairwise")(lambda n, spec: pairwise.pairwise_all_reduce(n))


_register()
