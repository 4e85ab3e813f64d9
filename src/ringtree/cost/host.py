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
HOST_MAX_RANKS; more is a RingtreeError rather than the plain fit (docs/cost.md, "One
machine"). As one level of a two-level cluster a HostLink is
priced as the plain :class:`~ringtree.cost.terms.Link` it also is (its ``alpha_s``,
``bandwidth_Bps``, ``gamma_s_per_byte``: the plain alpha-beta fit of the same measurements).

That is the model when ranks that wait cost nothing. When they poll for their messages (the
engine's presets for local gloo and MPI processes were measured so), every step loads the
cores with all N ranks, whatever the schedule: a model with an :class:`Overload` prices a
step as the alpha-beta model does on cores to spare (the busiest rank's larger direction,
from the closed form, any N) and grows each term by (N/C)^exponent once N > C, the exponents
read from measurements at two N (:func:`on_cores`; the presets are
:data:`ringtree.cost.links.LOCAL_HOSTS`). Such a model may also split its step latency into
a part per step and a part per message (``message_s``): a step in which the busiest rank
sends one message and receives one costs the link's alpha, as measured; one in which it
talks to more peers (a linear all-to-all's N-1 each way) costs more, and both parts grow by
the latency's (N/C)^exponent (:func:`polling_latency_s`, messages from the schedule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import cached_property, lru_cache

import numpy as np

from ringtree.algorithms import BuildSpec, build
from ringtree.collectives import Collective
from ringtree.cost.query import Prediction, Query
from ringtree.cost.terms import FLAT, Link, Terms
from ringtree.errors import RingtreeError
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
    bandwidth is per direction, as on a link, and a step of one message each way costs
    ``alpha_s + 2 message_s``: see the module doc)."""

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
    def polling(
        cls, link: Link, cores: float, overload: Overload, message_s: float = 0.0
    ) -> HostLink:
        """``link``, measured with its processes on ``cores`` cores, as a one-machine model
        whose ranks poll: its own constants on cores to spare, grown by ``overload``; of its
        alpha (a step of one message each way), ``message_s`` per message."""
        if not 0 <= 2 * message_s <= link.alpha_s:
            raise ValueError(f"{link.name}: 2 x message_s must lie within alpha")
        model = HostModel(cores, link.alpha_s - 2 * message_s, message_s, link.bandwidth_Bps,
                          link.gamma_s_per_byte, overload=overload)
        return cls(**{f.name: getattr(link, f.name) for f in fields(Link)}, host=model)

    def with_cores(self, cores: float) -> HostLink:
        """The same model for a machine of ``cores`` cores."""
        assert self.host is not None
        return replace(self, host=replace(self.host, cores=cores))

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
        alpha_s=link.alpha_s * over**g.latency,
        bandwidth_Bps=host.bandwidth_Bps / over**g.bandwidth,
        gamma_s_per_byte=host.gamma_s_per_byte * over**g.reduce,
        note=f"{link.note}; {n_ranks} processes on {cores} cores",
    )


def polls_per_message(link: object, n_ranks: int, spec: BuildSpec, pipelined: bool) -> bool:
    """Whether ``link`` is a polling model with a per-message cost, priced for this call
    from the schedule's messages (:func:`polling_latency_s`): flat algorithms that are not
    pipelined, on up to HOST_MAX_RANKS ranks. A pipelined one (trees, chains) is priced per
    step, as on :func:`on_cores`'s link: its schedules grow with the chunk count that auto
    searches (up to 1024: seconds of building at N=64 for one call shape), and each of its
    steps sends a rank's chunk to at most its two or three tree neighbours."""
    return (
        not pipelined
        and isinstance(link, HostLink)
        and link.host is not None
        and link.host.overload is not None
        and link.host.message_s > 0
        and n_ranks <= HOST_MAX_RANKS
        and spec.ranks_per_node is None
    )


def polling_latency_s(
    link: HostLink, collective: Collective, algorithm: str, n_ranks: int, spec: BuildSpec
) -> tuple[int, float]:
    """``(steps, latency)`` of an algorithm on a polling model with a per-message cost:
    ``(steps alpha + messages o) (N/C)^latency``, messages summed over steps from the
    busiest rank of each (one per peer it sends to, one per peer it receives from: the engine
    sends what one peer gets in a step as one message)."""
    host = link.host
    assert host is not None and host.overload is not None
    s, shape = _shape(collective, algorithm, n_ranks, spec.root, spec.n_chunks)
    over = max(1.0, n_ranks / host.cores) ** host.overload.latency
    return s.n_steps, (s.n_steps * host.alpha_s + shape.peer_messages * host.message_s) * over


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

    @cached_property
    def peer_messages(self) -> int:
        """Sum over steps of the busiest rank's messages, one per peer and direction (the
        polling model's count; :func:`polling_latency_s`)."""
        pairs = np.unique(np.stack([self.step, self.src, self.dst], axis=1), axis=0)
        once = np.ones(len(pairs))
        per_peer = self._per_rank(once, once, pairs[:, 0], pairs[:, 1], pairs[:, 2])
        return int(per_peer.max(axis=1).sum()) if per_peer.size else 0

    def _per_rank(
        self, at_src: np.ndarray, at_dst: np.ndarray, step: np.ndarray | None = None,
        src: np.ndarray | None = None, dst: np.ndarray | None = None,
    ) -> np.ndarray:
        """(steps, ranks) sums of per-transfer amounts charged to the sender and receiver
        (of the schedule's transfers, or of the given ``step``, ``src``, ``dst`` rows)."""
        step = self.step if step is None else step
        src = self.src if src is None else src
        dst = self.dst if dst is None else dst
        # bincount, not np.add.at (10-50x slower); the amounts are whole bytes or counts, so
        # the sums are exact in any order
        cells = self.n_steps * self.n_ranks
        out = np.bincount(step * self.n_ranks + src, at_src, minlength=cells)
        out += np.bincount(step * self.n_ranks + dst, at_dst, minlength=cells)
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


def price_on_host(
    q: Query, link: HostLink, on_link: Callable[[Query, Link], Prediction]
) -> Prediction:
    """``q`` on ``link``'s one-machine model: from the schedule, step by step, when waiting
    ranks cost nothing (up to HOST_MAX_RANKS ranks, RingtreeError beyond); when they poll,
    ``on_link`` (the alpha-beta model) on the link they see (:func:`on_cores`), with the
    latency per step and message from the schedule where the model has a per-message cost
    (:func:`polling_latency_s`). Two levels (ranks per node given): ``on_link`` on ``link``."""
    host = link.host
    assert host is not None
    if host.overload is None and q.n_ranks > HOST_MAX_RANKS and q.spec.ranks_per_node is None:
        raise RingtreeError(
            f"{link.name} models processes sharing one machine's cores: it prices up to "
            f"{HOST_MAX_RANKS} of them, not N={q.n_ranks} (give a network link for more)"
        )
    # the model keeps the name its users ask for it by: --model alpha-beta on a profile
    e = q.estimate()
    if set(e.cost) == {FLAT} and polls_per_message(link, q.n_ranks, q.spec, q.algorithm.pipelined):
        steps, latency = polling_latency_s(link, q.collective, q.name, q.n_ranks, q.spec)
        seen, terms = on_cores(link, q.n_ranks), e.cost[FLAT]
        return Prediction.of(
            q, "alpha-beta", link.name, bytes_sent=e.max_bytes_sent, steps=steps,
            latency_s=latency, bandwidth_s=terms.wire_bytes / seen.bandwidth_Bps,
            reduce_s=terms.reduce_bytes * seen.gamma_s_per_byte, cost=e.cost,
        )
    if host.overload:
        return on_link(q, on_cores(link, q.n_ranks))
    if not prices_on_host(link, q.n_ranks, q.spec):
        return on_link(q, link)
    t = algorithm_host_terms(q.collective, q.name, q.n_ranks, q.count, q.itemsize, q.spec,
                             host.cores)
    return Prediction.of(
        q, "alpha-beta", link.name, bytes_sent=e.max_bytes_sent, steps=t.steps,
        latency_s=t.steps * host.alpha_s + t.messages * host.message_s,
        bandwidth_s=t.wire_bytes / host.bandwidth_Bps,
        reduce_s=t.reduce_bytes * host.gamma_s_per_byte,
        cost={FLAT: Terms(t.steps, t.wire_bytes, t.reduce_bytes)},
    )
