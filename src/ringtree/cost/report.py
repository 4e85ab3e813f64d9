"""The rows ``ringtree cost`` prints, as plain data: a prediction per link, its overhead over
the compute time, and its dollars."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.link_pricer import LinkPricer
from ringtree.cost.links import LinkSpec, link_name
from ringtree.cost.money import Price, comm_money
from ringtree.cost.pricer import GroupShape


@dataclass(frozen=True)
class Question:
    """What to cost: one collective of ``size_bytes`` (elements of ``itemsize`` bytes) on
    ``n_ranks`` workers, and optionally the compute time per step and prices.

    comm_time_s, when set, replaces the modelled time in the money figures (not in the
    overhead). steps_per_second (default 1, the seed's) turns per-step dollars into per-day
    and per-job ones.
    """

    collective: Collective
    algorithm: str
    n_ranks: int
    size_bytes: int
    itemsize: int = 1
    model: str = "alpha-beta"
    spec: BuildSpec | None = None
    compute_s: float | None = None
    price: Price | None = None
    steps_per_second: float = 1.0
    hours: float | None = None
    comm_time_s: float | None = None


def cost_rows(q: Question, links: Sequence[LinkSpec]) -> list[dict[str, Any]]:
    """One row per link, each priced by a :class:`~ringtree.cost.link_pricer.LinkPricer`:
    the prediction's record (``algorithm`` is the one used: with ``auto``, the pick of
    :func:`ringtree.cost.select.choose`, whose record adds ``forced``, the competing times and
    the reason; pipelined algorithms at their best chunk count unless the spec fixes it, in
    ``n_chunks``), plus ``overhead`` (time / compute, a fraction) when compute time is given,
    plus ``usd_per_step``/``usd_per_day`` (and ``usd_per_job``, ``usd_comm_per_job`` with
    hours) when a price is given."""
    spec = q.spec or BuildSpec()
    shape = GroupShape.of(q.n_ranks, spec.ranks_per_node)
    rows = []
    for link in links:
        pricer = LinkPricer(link, q.model, algorithm=q.algorithm, spec=spec)
        call = pricer.call(q.collective, shape, q.size_bytes, q.itemsize)
        row = {**call.record(), "link": link_name(link)}
        if q.compute_s is not None:
            row["overhead"] = call.time_s / q.compute_s
        if q.price is not None:
            comm_s = call.time_s if q.comm_time_s is None else q.comm_time_s
            money = comm_money(comm_s, q.price, q.steps_per_second, q.hours)
            row["usd_per_step"] = money.usd_per_step
            row["usd_per_day"] = money.usd_per_day
            if money.usd_per_job is not None:
                row["usd_per_job"] = money.usd_per_job
                row["usd_comm_per_job"] = money.usd_comm_per_job
        rows.append(row)
    return rows
