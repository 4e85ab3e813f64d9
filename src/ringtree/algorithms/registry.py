"""The algorithm registry: one :class:`Algorithm` entry per ``(collective, name)``.

Each family module (ring, tree, dbtree, recursive, hierarchical, pairwise) registers its own
entries when imported; :mod:`ringtree.algorithms` imports them all. An entry holds every fact
the rest of ringtree needs about an algorithm: its builder, its default chunk count (which also
says whether it is pipelined: ``auto`` prices a pipelined algorithm at its best chunk count),
its constraints on N, and where it comes from. Its cost has a closed form under the same key in
:mod:`ringtree.cost.forms` (a test checks that both registries hold the same keys).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.schedule import Schedule

#: The chunk count of chain and tree all-reduce schedules when none is asked for.
DEFAULT_PIPELINE_CHUNKS = 4


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

    @property
    def chunks(self) -> int:
        """The chunk count of a pipelined algorithm's spec once :meth:`Algorithm.resolve` has
        filled it in (1 when unset)."""
        return self.n_chunks or 1


Builder = Callable[[int, BuildSpec], Schedule]


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of one collective.

    builder: ``(n_ranks, spec) -> Schedule``; it is given the spec with ``n_chunks`` filled
        in (:meth:`resolve`).
    default_chunks: the chunk count when the caller gives none; None for algorithms that are
        not pipelined (their schedules have a fixed number of chunks).
    needs_nodes: the schedule runs on nodes x ranks per node (``spec.ranks_per_node`` must
        divide N).
    power_of_two: the schedule is defined on a power-of-two N; other N fold the extra ranks
        into partners first, or are refused when ``spec.fold`` is False.
    source: where the algorithm comes from.
    """

    collective: Collective
    name: str
    builder: Builder
    default_chunks: int | None = None
    needs_nodes: bool = False
    power_of_two: bool = False
    source: str = ""

    @property
    def key(self) -> tuple[Collective, str]:
        """``(collective, name)``: the key of this entry and of its closed form."""
        return (self.collective, self.name)

    @property
    def pipelined(self) -> bool:
        """Whether a chunk count applies (auto prices it at its best one)."""
        return self.default_chunks is not None

    def resolve(self, spec: BuildSpec) -> BuildSpec:
        """``spec`` with the chunk count filled in: the caller's, else the default (None for
        an algorithm that is not pipelined)."""
        chunks = (spec.n_chunks or self.default_chunks) if self.pipelined else None
        return spec if chunks == spec.n_chunks else replace(spec, n_chunks=chunks)

    def accepts(self, n_ranks: int, spec: BuildSpec) -> bool:
        """Whether the schedule exists for ``n_ranks`` and ``spec`` (the builder raises a
        RingtreeError otherwise)."""
        if self.needs_nodes:
            g = spec.ranks_per_node
            if g is None or g < 1 or n_ranks % g:
                return False
        return spec.fold or not self.power_of_two or n_ranks & (n_ranks - 1) == 0

    def ranks_per_node_for(self, n_ranks: int) -> int | None:
        """A node size that fits ``n_ranks`` for an algorithm on nodes (2 when N is even,
        else 1), None for the others: what local runs and tests use."""
        if not self.needs_nodes:
            return None
        return 2 if n_ranks % 2 == 0 else 1

    def build(self, n_ranks: int, spec: BuildSpec) -> Schedule:
        """The schedule for ``n_ranks`` ranks (``spec`` validated by :func:`build`)."""
        return self.builder(n_ranks, self.resolve(spec))


_REGISTRY: dict[tuple[Collective, str], Algorithm] = {}


def register(*algorithms: Algorithm) -> None:
    """Add the entries to the registry, in order (ValueError when a key is taken)."""
    for a in algorithms:
        if a.key in _REGISTRY:
            raise ValueError(f"{a.name} {a.collective.value} is registered twice")
        _REGISTRY[a.key] = a


def registered() -> list[Algorithm]:
    """Every entry, in registration order."""
    return list(_REGISTRY.values())


def algorithms_for(collective: Collective) -> list[str]:
    """Names of the algorithms registered for ``collective``, in registration order."""
    return [name for (c, name) in _REGISTRY if c is collective]


def default_algorithm(collective: Collective | str) -> str:
    """The first algorithm registered for ``collective`` that runs without nodes (ring for
    the five collectives that have one): what ``trace`` shows when none is named."""
    col = Collective.parse(collective)
    return next(a.name for a in _REGISTRY.values() if a.collective is col and not a.needs_nodes)


def get_algorithm(collective: Collective | str, name: str) -> Algorithm:
    """The entry for ``name`` (any case, surrounding blanks ignored); RingtreeError listing the
    collective's algorithms when there is none."""
    col = Collective.parse(collective)
    entry = _REGISTRY.get((col, name.strip().lower()))
    if entry is None:
        known = ", ".join(algorithms_for(col))
        raise RingtreeError(f"unknown algorithm {name!r} for {col.value}: expected one of {known}")
    return entry


def check_call(collective: Collective, n_ranks: int, spec: BuildSpec) -> None:
    """RingtreeError for N < 1, a root outside 0..N-1 (rooted collectives) or a chunk count
    below 1: what every builder and closed form relies on."""
    if n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {n_ranks}")
    if collective.has_root and not 0 <= spec.root < n_ranks:
        raise RingtreeError(f"root {spec.root} is not a rank of 0..{n_ranks - 1}")
    if spec.n_chunks is not None and spec.n_chunks < 1:
        raise RingtreeError(f"number of chunks must be >= 1, got {spec.n_chunks}")


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

    Raises RingtreeError for an unknown algorithm, N < 1, a root outside 0..N-1, a chunk
    count below 1, or a shape the algorithm does not take.
    """
    col = Collective.parse(collective)
    spec = BuildSpec(root, n_chunks, ranks_per_node, fold)
    check_call(col, n_ranks, spec)
    return get_algorithm(col, algorithm).build(n_ranks, spec)
