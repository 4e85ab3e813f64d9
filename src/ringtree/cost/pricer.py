"""The pricing seam: what every cost model answers, whatever hardware it describes.

A :class:`Pricer` prices the three kinds of communication a training step or a benchmark
has, on a group of ranks (:class:`GroupShape`: how many, on how many nodes, how many on each):

- ``call(collective, shape, size_bytes, itemsize)``: one collective call, as the model's
  automatic choice runs it (``size_bytes``: the whole buffer, i.e. all-reduce and
  reduce-scatter input, all-gather output);
- ``point_to_point(shape, size_bytes)``: one send between neighbouring ranks of the group;
- ``all_to_all(shape, size_bytes)``: one all-to-all of ``size_bytes`` per rank.

Each answers a :class:`CallTime`: the algorithm used, the time, the most bytes one rank
sends, the latency part, whether the environment forced the choice, and the model's own
record of it (what ``ringtree cost --json`` prints). Implementations:

- :class:`ringtree.cost.link_pricer.LinkPricer`: the alpha-beta model (and the textbook one)
  on links: one link, or a link inside nodes and one between them; on a calibrated profile's
  link, the one-machine model (:mod:`ringtree.cost.host`);
- :class:`ringtree.cost.nccl.pricer.NcclPricer`: the NCCL model on a cluster as built.

``ringtree cost``, ``ringtree crossover`` and the planner (:mod:`ringtree.plan.planner`)
price through it; a new model (a profiler-trace importer, a calibrated NCCL) is a new
implementation of these three methods. Calls are pure: the same call returns the same
answer, so implementations cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ringtree.collectives import Collective

HIERARCHICAL = "hierarchical"


@dataclass(frozen=True)
class GroupShape:
    """How a group of ranks sits on the nodes.

    size: ranks in the group. nodes: nodes it touches (1: all inside one node).
    per_node: ranks on each node when every node holds the same number of contiguous members
    (a hierarchical algorithm applies); None when uneven or unknown.
    """

    size: int
    nodes: int
    per_node: int | None

    @property
    def intra(self) -> bool:
        """Whether the whole group is inside one node."""
        return self.nodes == 1

    @classmethod
    def of(cls, n_ranks: int, ranks_per_node: int | None = None) -> GroupShape:
        """``n_ranks`` in nodes of ``ranks_per_node`` (None: spread unevenly over nodes)."""
        if ranks_per_node is None or ranks_per_node < 1 or n_ranks % ranks_per_node:
            return cls(n_ranks, n_ranks, ranks_per_node)
        return cls(n_ranks, n_ranks // ranks_per_node, ranks_per_node)


class Record(Protocol):
    """A model's own account of one call."""

    def record(self) -> dict[str, Any]:
        """Plain data (one ``--json`` row)."""
        ...


@dataclass(frozen=True)
class CallTime:
    """One call as a model prices it: the algorithm used, its time, the most bytes one rank
    sends, the part of the time that is latency; ``forced``: the environment chose
    (RINGTREE_ALGO, NCCL_ALGO); ``detail``: the model's own record of the call."""

    algorithm: str
    time_s: float
    bytes_sent: float
    latency_s: float
    forced: bool = False
    detail: Record | None = field(default=None, compare=False, repr=False)

    @property
    def hierarchical(self) -> bool:
        """Whether the hierarchical algorithm was the cheapest (or forced)."""
        return self.algorithm == HIERARCHICAL

    def record(self) -> dict[str, Any]:
        """The model's record, or the four figures when it has none."""
        if self.detail is not None:
            return self.detail.record()
        return {"algorithm": self.algorithm, "time_s": self.time_s,
                "bytes_sent_per_worker": self.bytes_sent, "latency_s": self.latency_s}


#: A call that moves nothing (one rank, or no bytes).
NOTHING = CallTime("none", 0.0, 0, 0.0)


class Pricer(Protocol):
    """A cost model on one piece of hardware (module doc)."""

    @property
    def model(self) -> str:
        """The model's name (``alpha-beta``, ``textbook``, ``nccl``)."""
        ...

    def call(
        self, collective: Collective, shape: GroupShape, size_bytes: int, itemsize: int = 1
    ) -> CallTime:
        """One collective of ``size_bytes`` (elements of ``itemsize`` bytes) on ``shape``."""
        ...

    def point_to_point(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """One send of ``size_bytes`` between neighbouring ranks of ``shape``."""
        ...

    def all_to_all(self, shape: GroupShape, size_bytes: int) -> CallTime:
        """One all-to-all of ``size_bytes`` per rank on ``shape``."""
        ...
