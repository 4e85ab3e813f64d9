"""Alpha-beta-gamma time from a schedule's steps and bytes.

A step lasts ``alpha + B / bandwidth + gamma * R`` where B is the most bytes any rank sends or
receives in that step (links are full duplex, a rank's sends share its link) and R the most
bytes any rank reduces in it. A schedule's time is the sum over its steps (Hockney 1994;
Thakur, Rabenseifner & Gropp 2005 use the same model).

Costs are kept per *level*: ``"flat"`` for a single link, or ``"intra"``/``"inter"`` for a
schedule on ``nodes x ranks_per_node`` where a step that crosses nodes is priced on the
inter-node link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ringtree.schedule import Action, Schedule

FLAT, INTRA, INTER = "flat", "intra", "inter"


@dataclass(frozen=True)
class Link:
    """A link as the alpha-beta model sees it.

    bandwidth_Bps: effective bytes per second per direction that collectives reach.
    alpha_s: latency per step (per message on the critical path).
    gamma_s_per_byte: reduction cost per byte (0: ignored).
    nominal_Bps: the vendor/seed figure, used by the textbook model (default: bandwidth_Bps).
    nominal_both_directions: whether nominal_Bps adds both directions (NVLink, PCIe vendor
        figures do; network line rates are per direction).
    """

    name: str
    bandwidth_Bps: float
    alpha_s: float = 0.0
    gamma_s_per_byte: float = 0.0
    nominal_Bps: float | None = None
    nominal_both_directions: bool = False
    note: str = ""
    source: str = ""

    @property
    def nominal(self) -> float:
        """The nominal bandwidth (bytes/s), falling back to the effective one."""
        return self.nominal_Bps or self.bandwidth_Bps


@dataclass(frozen=True)
class Terms:
    """What an algorithm costs on one level, independent of the link.

    steps: number of steps (the latency term is ``steps * alpha``).
    wire_bytes: sum over steps of the busiest rank's bytes in the step (the bandwidth term).
    reduce_bytes: sum over steps of the busiest rank's reduced bytes (the gamma term).
    """

    steps: int
    wire_bytes: float
    reduce_bytes: float = 0.0

    def time_s(self, link: Link) -> float:
        """``steps * alpha + wire_bytes / bandwidth + reduce_bytes * gamma``."""
        return (
            self.steps * link.alpha_s
            + self.wire_bytes / link.bandwidth_Bps
            + self.reduce_bytes * link.gamma_s_per_byte
        )


Cost = dict[str, Terms]


def total_time_s(cost: Mapping[str, Terms], links: Mapping[str, Link] | Link) -> float:
    """Time of ``cost`` with one link per level (a single Link serves every level)."""
    if isinstance(links, Link):
        return sum(t.time_s(links) for t in cost.values())
    return sum(t.time_s(links[level]) for level, t in cost.items())


def schedule_terms(s: Schedule, count: int, itemsize: int) -> Cost:
    """Terms counted from the schedule itself, step by step, for ``count`` elements."""
    sizes = s.chunk_sizes(count)
    rpn = s.ranks_per_node
    acc: dict[str, list[float]] = {}
    for step in s.steps:
        sent: dict[int, int] = {}
        recv: dict[int, int] = {}
        red: dict[int, int] = {}
        crosses = False
        for t in step.transfers:
            b = sizes[t.chunk] * itemsize
            sent[t.src] = sent.get(t.src, 0) + b
            recv[t.dst] = recv.get(t.dst, 0) + b
            if t.action is Action.REDUCE:
                red[t.dst] = red.get(t.dst, 0) + b
            if rpn and t.src // rpn != t.dst // rpn:
                crosses = True
        level = FLAT if not rpn else (INTER if crosses else INTRA)
        a = acc.setdefault(level, [0, 0.0, 0.0])
        a[0] += 1
        a[1] += max([0, *sent.values(), *recv.values()])
        a[2] += max([0, *red.values()])
    return {level: Terms(int(a[0]), a[1], a[2]) for level, a in acc.items()} or {
        FLAT if not rpn else INTRA: Terms(0, 0.0, 0.0)
    }


def max_bytes_sent(s: Schedule, count: int, itemsize: int) -> int:
    """The most bytes any one rank sends over the whole schedule (the seed's "bytes sent
    per worker")."""
    return max(s.bytes_sent_per_rank(count, itemsize))


def step_times_s(s: Schedule, count: int, itemsize: int, link: Link) -> list[float]:
    """Each step's modelled time on a single link (for traces)."""
    sizes = s.chunk_sizes(count)
    out = []
    for b, step in zip(s.step_bytes(count, itemsize), s.steps, strict=True):
        red: dict[int, int] = {}
        for t in step.transfers:
            if t.action is Action.REDUCE:
                red[t.dst] = red.get(t.dst, 0) + sizes[t.chunk] * itemsize
        out.append(Terms(1, b, max([0, *red.values()])).time_s(link))
    return out
