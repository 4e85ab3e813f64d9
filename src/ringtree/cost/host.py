"""N processes on one machine: what the alpha-beta model lacks there, and a link that has it.

The alpha-beta model prices a step by its busiest rank on its own full-duplex link: what a
rank sends and what it receives overlap, and ranks that are idle in a step cost nothing.
Processes that talk over loopback TCP or shared memory on one machine break both
assumptions. Bytes move through the CPU (the sender copies into the kernel, the receiver
copies out), so a rank pays for its sends *and* its receives; and every rank runs on the
same C cores, so a step in which all N ranks work lasts as long as the machine needs for all
of their work, spread over C cores (N > C: oversubscribed), while a step with one sender and
one receiver costs only theirs. Each message also costs CPU (the engine's bookkeeping, the
transport's hand-offs, a wake-up), separately from its bytes.

So on a :class:`HostLink` a step costs, with ``m_r``, ``b_r``, ``g_r`` the messages, bytes
(sent + received) and reduced bytes of rank r in the step::

    alpha + o * max(max_r m_r, sum_r m_r / C) + max(max_r b_r, sum_r b_r / C) / bandwidth
          + gamma * max(max_r g_r, sum_r g_r / C)

-- each resource priced at the larger of the busiest rank's share and the machine's share
(a linear model, so the four constants are fitted by least squares; ``ringtree calibrate``
does it). The terms come from the schedule itself, step by step (messages: one per transfer),
so this model needs schedules, which are cheap for the few processes one machine holds: up to
HOST_MAX_RANKS. Beyond that, or as one level of a two-level cluster, a HostLink is priced as
the plain :class:`~ringtree.cost.model.Link` it also is (its ``alpha_s``, ``bandwidth_Bps``,
``gamma_s_per_byte``: the plain alpha-beta fit of the same measurements).

That is the model when ranks that wait cost nothing. When they poll for their messages (the
engine's presets for local gloo and MPI processes were measured so), every step loads the
cores with all N ranks, whatever the schedule: a model with an :class:`Overload` prices a
step as the alpha-beta model does on cores to spare (the busiest rank's larger direction,
from the closed form, any N) and grows each term by (N/C)^exponent once N > C, the exponents
read from measurements at two N (:func:`on_cores`; the presets are
:data:`ringtree.cost.links.LOCAL_HOSTS`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache

import numpy as np

from ringtree.algorithms import BuildSpec, build
from ringtree.collectives import Collective
from ringtree.cost.model import Link
from ringtree.schedule import Action, Schedule

#: The most ranks the one-machine model prices (it builds the schedule).
HOST_MAX_RANKS = 256


@dataclass(frozen=True)
class HostTerms:
    """What an algorithm costs on one machine, independent of the constants.

    steps: the latency term's count. messages, wire_bytes, reduce_bytes: summed over steps,
    each step's figure being max(busiest rank, all ranks / cores), bytes counting sends and
    receives.
    """

    steps: int
    messages: float
    wire_bytes: float
    reduce_bytes: float

    def time_s(self, host: HostModel) -> float:
        """``steps alpha + messages o + wire_bytes / bandwidth + reduce_bytes gamma``."""
        return (
            self.steps * host.alpha_s
            + self.messages * host.message_s
            + self.wire_bytes / host.bandwidth_Bps
            + self.reduce_bytes * host.gamma_s_per_byte
        )


@dataclass(frozen=True)
class Overload:
    """How a step's cost grows with N ranks on C < N cores when every rank takes CPU in every
    step (ranks that wait poll): latency x (N/C)^latency, bytes / bandwidth x
    (N/C)^bandwidth, reduced bytes x gamma x (N/C)^reduce. ``source``: the measurements the
    exponents come from."""

    latency: float
    bandwidth: float
    reduce: float = 1.0
    source: str = ""


@dataclass(frozen=True)
class HostModel:
    """The one-machine constants: ``cores`` the ranks share (the machine's; a fraction when
    other programs take part of it, see :func:`available_cores`); per-step latency alpha,
    CPU per message o, bytes per second through the CPU (a rank's sends plus receives),
    reduction cost gamma. ``n_ranks``: the number of processes it was fitted on (0:
    unknown). ``overload``: None when waiting ranks cost nothing (the work of a step is
    shared, :func:`host_terms`); else how the polling ranks' step grows past the cores (then
    bandwidth is per direction, as on a link, and ``message_s`` is 0: see the module
    doc)."""

    cores: float
    alpha_s: float
    message_s: float
    bandwidth_Bps: float
    gamma_s_per_byte: float = 0.0
    n_ranks: int = 0
    overload: Overload | None = None


@dataclass(frozen=True)
class HostLink(Link):
    """A Link (the plain alpha-beta figures) that also carries the one-machine model, used
    for flat algorithms on up to HOST_MAX_RANKS ranks."""

    host: HostModel | None = None

    @classmethod
    def polling(cls, link: Link, cores: float, overload: Overload) -> HostLink:
        """``link``, measured with its processes on ``cores`` cores, as a one-machine model
        whose ranks poll: its own constants on cores to spare, grown by ``overload``."""
        model = HostModel(cores, link.alpha_s, 0.0, link.bandwidth_Bps, link.gamma_s_per_byte,
                          overload=overload)  # fmt: skip
        return cls(**{f.name: getattr(link, f.name) for f in fields(Link)}, host=model)

    @property
    def plain(self) -> Link:
        """The plain alpha-beta link (without the one-machine model)."""
        return Link(**{f.name: getattr(self, f.name) for f in fields(Link)})


def on_cores(link: HostLink, n_ranks: int, cores: float | None = None) -> Link:
    """The plain link that ``n_ranks`` processes on ``cores`` cores (default: the model's)
    see, for a model whose ranks poll (:class:`Overload`): the link itself while N <= cores,
    else alpha x (N/C)^latency, bandwidth / (N/C)^bandwidth, gamma x (N/C)^reduce."""
    host = link.host
    assert host is not None and host.overload is not None, "not a polling host model"
    cores = cores or host.cores
    over = max(1.0, n_ranks / cores)
    if over == 1.0:
        return link.plain
    g = host.overload
    return replace(
        link.plain,
        alpha_s=host.alpha_s * over**g.latency,
        bandwidth_Bps=host.bandwidth_Bps / over**g.bandwidth,
        gamma_s_per_byte=host.gamma_s_per_byte * over**g.reduce,
        note=f"{link.note}; {n_ranks} processes on {cores} cores",
    )


def available_cores(cores: float, other_cores: float) -> float:
    """The cores left to the ranks while other programs used ``other_cores`` on average
    (measured, e.g. from /proc/stat): ``cores - other_cores``, never under a quarter of the
    machine. A fit on a busy machine uses it so that its constants are those of an idle one;
    a prediction for a busy machine uses it too."""
    return max(cores - max(other_cores, 0.0), cores / 4)


def under_load(link: Link, other_cores: float) -> Link:
    """``link`` for a machine on which other programs use ``other_cores`` (a HostLink's
    cores become :func:`available_cores`; any other link is returned as is)."""
    if not isinstance(link, HostLink) or link.host is None or other_cores <= 0:
        return link
    free = available_cores(link.host.cores, other_cores)
    return replace(link, host=replace(link.host, cores=free))


def host_terms(s: Schedule, count: int, itemsize: int, cores: float) -> HostTerms:
    """The one-machine terms of ``s`` for ``count`` elements on ``cores`` cores."""
    return _Shape(s).terms(s.chunk_sizes(count), itemsize, max(cores, 1e-3))


class _Shape:
    """A schedule's transfers as arrays (step, src, dst, chunk, reduces), so that its terms
    for any size are a few numpy operations."""

    def __init__(self, s: Schedule) -> None:
        rows = [
            (k, t.src, t.dst, t.chunk, t.action is Action.REDUCE)
            for k, step in enumerate(s.steps)
            for t in step.transfers
        ]
        arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
        self.n_steps, self.n_ranks = s.n_steps, s.n_ranks
        self.step, self.src, self.dst, self.chunk = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
        self.reduces = arr[:, 4].astype(bool)
        ones = np.ones(len(arr))
        self.messages = self._per_rank(ones, ones)

    def _per_rank(self, at_src: np.ndarray, at_dst: np.ndarray) -> np.ndarray:
        """(steps, ranks) sums of per-transfer amounts charged to the sender and receiver."""
        # bincount, not np.add.at (10-50x slower); the amounts are whole bytes or counts, so
        # the sums are exact in any order
        cells = self.n_steps * self.n_ranks
        out = np.bincount(self.step * self.n_ranks + self.src, at_src, minlength=cells)
        out += np.bincount(self.step * self.n_ranks + self.dst, at_dst, minlength=cells)
        return out.reshape(self.n_steps, self.n_ranks)

    @staticmethod
    def _shared(per_rank: np.ndarray, cores: float) -> float:
        """Sum over steps of max(busiest rank, all ranks / cores)."""
        if per_rank.size == 0:
            return 0.0
        return float(np.maximum(per_rank.max(axis=1), per_rank.sum(axis=1) / cores).sum())

    def terms(self, chunk_sizes: list[int], itemsize: int, cores: float) -> HostTerms:
        nbytes = np.asarray(chunk_sizes, dtype=float)[self.chunk] * itemsize
        none = np.zeros_like(nbytes)
        return HostTerms(
            self.n_steps,
            self._shared(self.messages, cores),
            self._shared(self._per_rank(nbytes, nbytes), cores),
            self._shared(self._per_rank(none, np.where(self.reduces, nbytes, 0.0)), cores),
        )


@lru_cache(maxsize=512)
def _shape(
    col: Collective, algorithm: str, n: int, root: int, n_chunks: int | None
) -> tuple[Schedule, _Shape]:
    s = build(col, algorithm, n, root=root, n_chunks=n_chunks)
    return s, _Shape(s)


def algorithm_host_terms(
    collective: Collective,
    algorithm: str,
    n_ranks: int,
    count: int,
    itemsize: int,
    spec: BuildSpec,
    cores: int,
) -> HostTerms:
    """:func:`host_terms` of the algorithm's schedule (built once per shape, cached)."""
    s, shape = _shape(collective, algorithm, n_ranks, spec.root, spec.n_chunks)
    return shape.terms(s.chunk_sizes(count), itemsize, max(cores, 1e-3))


def prices_on_host(link: object, n_ranks: int, spec: BuildSpec) -> bool:
    """Whether ``link`` is priced with the one-machine model of shared work (from the
    schedule, step by step) for this call."""
    return (
        isinstance(link, HostLink)
        and link.host is not None
        and link.host.overload is None
        and n_ranks <= HOST_MAX_RANKS
        and spec.ranks_per_node is None
    )
