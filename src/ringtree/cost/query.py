"""What a cost model is asked (:class:`Query`) and what it answers (:class:`Prediction`).

A Query is built once, at the boundary (:meth:`Query.of`): the collective parsed, the
algorithm looked up in the registry (any case), N, the size, the element size and the build
settings checked, and the spec resolved as the algorithm's builder would resolve it (its
default chunk count filled in). Everything after it -- the models, the automatic choice, the
crossover scan -- works on the canonical Query and never parses or checks again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ringtree.algorithms import Algorithm, BuildSpec, check_call, get_algorithm
from ringtree.collectives import Collective
from ringtree.cost.forms import Estimate, form_of
from ringtree.cost.terms import Cost
from ringtree.errors import RingtreeError

# The seed's "bytes sent per worker" in units of the buffer size S: ~2S for all-reduce (a
# reduce-scatter then an all-gather), ~S for the others (all-to-all: S is one rank's input,
# (N-1)/N of which leaves it), nothing for the barrier.
TEXTBOOK_FACTOR = {
    Collective.ALL_REDUCE: 2,
    Collective.REDUCE_SCATTER: 1,
    Collective.ALL_GATHER: 1,
    Collective.BROADCAST: 1,
    Collective.REDUCE: 1,
    Collective.ALL_TO_ALL: 1,
    Collective.GATHER: 1,
    Collective.SCATTER: 1,
    Collective.BARRIER: 0,
}


def textbook_bytes(collective: Collective, n_ranks: int, size_bytes: int) -> int:
    """The seed's rounded bytes per worker: 2S for all-reduce, none for the barrier, S
    otherwise (0 on one rank)."""
    return 0 if n_ranks == 1 else TEXTBOOK_FACTOR[collective] * size_bytes


def check(
    collective: Collective | str, n_ranks: int, size_bytes: int, itemsize: int,
    spec: BuildSpec,
) -> Collective:
    """The collective, parsed; RingtreeError on N < 1, a negative size, a size that is not
    whole elements, a root outside 0..N-1 or a chunk count below 1."""
    col = Collective.parse(collective)
    if n_ranks < 1:
        raise RingtreeError(f"number of workers must be >= 1, got {n_ranks}")
    if size_bytes < 0:
        raise RingtreeError(f"size must be >= 0 bytes, got {size_bytes}")
    if itemsize < 1 or size_bytes % itemsize:
        raise RingtreeError(
            f"size {size_bytes} B is not a whole number of {itemsize}-byte elements"
        )
    check_call(col, n_ranks, spec)
    return col


@dataclass(frozen=True)
class Query:
    """One collective call to price: ``algorithm`` (a registry entry) for ``count`` elements of
    ``itemsize`` bytes on ``n_ranks`` ranks; ``spec`` is resolved for the algorithm (its
    default chunk count filled in), ``asked`` is the caller's."""

    algorithm: Algorithm
    n_ranks: int
    count: int
    itemsize: int
    spec: BuildSpec
    asked: BuildSpec

    @classmethod
    def of(
        cls,
        collective: Collective | str,
        algorithm: str,
        n_ranks: int,
        size_bytes: int,
        *,
        itemsize: int = 1,
        spec: BuildSpec | None = None,
    ) -> Query:
        """The canonical Query: :func:`check` and the algorithm looked up (RingtreeError for
        an unknown one)."""
        spec = spec or BuildSpec()
        col = check(collective, n_ranks, size_bytes, itemsize, spec)
        return cls.make(get_algorithm(col, algorithm), n_ranks, size_bytes // itemsize,
                        itemsize, spec)

    @classmethod
    def make(
        cls, algorithm: Algorithm, n_ranks: int, count: int, itemsize: int, spec: BuildSpec
    ) -> Query:
        """A Query from parts already checked (:func:`check`)."""
        return cls(algorithm, n_ranks, count, itemsize, algorithm.resolve(spec), spec)

    @property
    def collective(self) -> Collective:
        """The collective."""
        return self.algorithm.collective

    @property
    def name(self) -> str:
        """The algorithm's registered name."""
        return self.algorithm.name

    @property
    def size_bytes(self) -> int:
        """count x itemsize."""
        return self.count * self.itemsize

    @property
    def fixed_chunks(self) -> bool:
        """Whether the caller fixed the chunk count (else :func:`ringtree.cost.select.tune`
        may try others for a pipelined algorithm)."""
        return self.asked.n_chunks is not None

    def with_chunks(self, n_chunks: int) -> Query:
        """The same call pipelined over ``n_chunks`` chunks."""
        return Query.make(self.algorithm, self.n_ranks, self.count, self.itemsize,
                          replace(self.asked, n_chunks=n_chunks))

    def with_count(self, count: int) -> Query:
        """The same call on ``count`` elements."""
        return replace(self, count=count)

    def estimate(self) -> Estimate:
        """The algorithm's closed form for this call (RingtreeError above its rank limit)."""
        form = form_of(self.collective, self.name, self.n_ranks)
        return form(self.n_ranks, self.count, self.itemsize, self.spec)


@dataclass(frozen=True)
class Prediction:
    """One collective's predicted cost.

    bytes_sent_per_worker: the most bytes one rank sends (exact under alpha-beta; the seed's
        ~2S or ~S under textbook). textbook_bytes: the seed's figure, for comparison.
    steps: steps on the critical path. latency_s = sum of steps x alpha; bandwidth_s = sum of
        the busiest rank's bytes per step / bandwidth; reduce_s = reduced bytes x gamma.
    cost: the link-independent Terms per level ("flat", or "intra"/"inter").
    """

    collective: Collective
    algorithm: str
    model: str
    link: str
    n_ranks: int
    size_bytes: int
    bytes_sent_per_worker: float
    textbook_bytes: float
    steps: int
    latency_s: float
    bandwidth_s: float
    reduce_s: float
    cost: Cost

    @classmethod
    def of(
        cls, q: Query, model: str, link: str, *, bytes_sent: float, steps: int,
        latency_s: float, bandwidth_s: float, reduce_s: float, cost: Cost,
    ) -> Prediction:
        """A model's answer to ``q`` (the fields that only restate the query filled in)."""
        return cls(
            q.collective, q.name, model, link, q.n_ranks, q.size_bytes, bytes_sent,
            textbook_bytes(q.collective, q.n_ranks, q.size_bytes), steps, latency_s,
            bandwidth_s, reduce_s, cost,
        )

    @property
    def time_s(self) -> float:
        """latency + bandwidth + reduction terms."""
        return self.latency_s + self.bandwidth_s + self.reduce_s

    def record(self) -> dict[str, Any]:
        """Plain data, with the keys ``ringtree cost --json`` prints."""
        return {
            "link": self.link,
            "algorithm": self.algorithm,
            "model": self.model,
            "collective": self.collective.value,
            "workers": self.n_ranks,
            "size_bytes": self.size_bytes,
            "bytes_sent_per_worker": self.bytes_sent_per_worker,
            "textbook_bytes": self.textbook_bytes,
            "steps": self.steps,
            "latency_s": self.latency_s,
            "bandwidth_s": self.bandwidth_s,
            "reduce_s": self.reduce_s,
            "time_s": self.time_s,
        }
