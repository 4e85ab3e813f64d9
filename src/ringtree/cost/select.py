"""Automatic choice of algorithm: NCCL's tuner in miniature.

``algorithm="auto"`` prices every algorithm the collective has (closed forms, so any N) and
picks the lowest predicted time. ``RINGTREE_ALGO`` in the environment overrides it as
``NCCL_ALGO`` does for NCCL, in its syntax (NCCL 2.24, ``parseList`` in src/graph/tuning.cc):
one name forces that algorithm, a comma-separated list restricts the choice to those names
(``RINGTREE_ALGO=ring,tree``), ``^name`` excludes, and ``;``-separated entries scope a list to
one collective (``allreduce:ring;allgather:bruck``; only the first entry may go without a
collective, and applies to the others). Where it leaves a collective no algorithm that can
run -- none of the names is one of its algorithms (``ring`` for the barrier), or none can run
with these ranks -- it is ignored for that collective, and the :class:`Choice` says so
(``note``). The :class:`Choice` keeps every competing time, so callers can say why.

Chunk counts. A pipelined algorithm (chain broadcast/reduce, binomial trees, the double binary
tree) is priced with its best chunk count C among the powers of two up to ``MAX_CHUNKS`` (and
no more chunks than elements), unless the caller fixes ``n_chunks``. More chunks fill the
pipeline sooner but pay alpha per extra step, so the best C grows like sqrt(S / alpha); NCCL
gets the same effect from a fixed chunk size per protocol (C = S / chunk). The chosen C is
reported with every prediction.

Ties. The model cannot resolve differences of a percent, so among candidates within
``TIE_TOLERANCE`` of the fastest, auto takes the one registered first (ring before the others):
on large buffers, where the ring and recursive halving/doubling differ only by a few alphas,
it keeps the ring. On one machine (a calibrated profile's one-machine model) ties go to the
fewest steps instead: each step there is a hand-off between processes that the scheduler can
delay, which the fitted constants average away (the measurement: docs/cost.md, "Ties").
:func:`fastest` is that rule, and the one pick behind ``ringtree cost`` and the crossover
map's automatic choice by size.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ringtree.algorithms import BuildSpec, algorithms_for, get_algorithm
from ringtree.collectives import Collective
from ringtree.cost.host import prices_on_host
from ringtree.cost.links import LinkSpec
from ringtree.cost.models import DEFAULT_MODEL, Model, get_model
from ringtree.cost.query import Prediction, Query, check
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.units import format_time

AUTO = "auto"
ENV_VAR = "RINGTREE_ALGO"
MAX_CHUNKS = 1024
TIE_TOLERANCE = 0.01


def is_auto(algorithm: str) -> bool:
    """Whether an algorithm argument asks for the automatic choice."""
    return algorithm.strip().lower() == AUTO


@dataclass(frozen=True)
class Candidate:
    """One algorithm's prediction, with the chunk count it was priced at (None: not
    pipelined)."""

    algorithm: str
    prediction: Prediction
    n_chunks: int | None

    @property
    def time_s(self) -> float:
        """The predicted time."""
        return self.prediction.time_s

    def record(self) -> dict[str, Any]:
        """``{"algorithm", "time_s", "n_chunks"}``."""
        return {"algorithm": self.algorithm, "time_s": self.time_s, "n_chunks": self.n_chunks}


def short_time(seconds: float) -> str:
    """Three significant figures in s, ms, us or ns: ``4.784e-3 -> '4.78 ms'``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _seconds(seconds: float) -> str:
    """A time as ``ringtree cost``'s table writes it, rounded the seed's way."""
    return format_time(seconds, exact=False)


def chunk_options(count: int) -> list[int]:
    """1, 2, 4, ... up to MAX_CHUNKS, never more chunks than elements (at least 1)."""
    out, c = [], 1
    while c <= min(MAX_CHUNKS, max(1, count)):
        out.append(c)
        c *= 2
    return out


def tuned(
    collective: Collective | str,
    algorithm: str,
    n_ranks: int,
    size_bytes: int,
    links: LinkSpec,
    model: str = DEFAULT_MODEL,
    *,
    itemsize: int = 1,
    spec: BuildSpec | None = None,
) -> Candidate:
    """The prediction of ``algorithm``, at its best chunk count when it is pipelined and
    ``spec.n_chunks`` is None (ties go to fewer chunks); else exactly :func:`predict`."""
    q = Query.of(collective, algorithm, n_ranks, size_bytes, itemsize=itemsize, spec=spec)
    return tune(q, links, get_model(model))


def tune(q: Query, links: LinkSpec, model: Model) -> Candidate:
    """:func:`tuned` for a canonical query."""
    alg = q.algorithm
    if not alg.pipelined or q.fixed_chunks:
        return Candidate(
            alg.name, model.price(q, links), q.spec.n_chunks if alg.pipelined else None
        )
    best: Candidate | None = None
    for c in chunk_options(q.count):
        p = model.price(q.with_chunks(c), links)
        if best is None or p.time_s < best.time_s:
            best = Candidate(alg.name, p, c)
    assert best is not None
    return best


def candidates(
    collective: Collective, n_ranks: int, count: int, itemsize: int, spec: BuildSpec,
    links: LinkSpec, model: Model, names: list[str] | None = None,
) -> tuple[list[Candidate], dict[str, str]]:
    """Every algorithm of ``collective`` (or those in ``names``) priced with :func:`tune`, in
    registration order, for a call already checked (:func:`ringtree.cost.query.check`); and
    the ones that cannot run here with the reason (e.g. hierarchical without ranks per node,
    a power-of-two algorithm without folding)."""
    out, skipped = [], {}
    for name in names or algorithms_for(collective):
        try:
            q = Query.make(get_algorithm(collective, name), n_ranks, count, itemsize, spec)
            out.append(tune(q, links, model))
        except RingtreeError as e:
            skipped[name] = str(e)
    return out, skipped


def fastest(
    cands: list[Candidate], links: LinkSpec, n_ranks: int, spec: BuildSpec
) -> Candidate:
    """Auto's pick among ``cands`` (priced on ``links`` for ``n_ranks`` ranks): the
    first-registered candidate within TIE_TOLERANCE of the lowest time; on one machine (a
    link priced by the one-machine model), the one of those with the fewest steps (then the
    first registered). :func:`choose` and the crossover map's auto ranges both pick with it."""
    low = min(c.time_s for c in cands)
    tied = [c for c in cands if c.time_s <= low * (1 + TIE_TOLERANCE)]
    if prices_on_host(links, n_ranks, spec):
        return min(tied, key=lambda c: c.prediction.steps)
    return tied[0]


@dataclass(frozen=True)
class Choice:
    """What auto picked and why.

    chosen: the algorithm used (forced by the environment when ``forced``).
    automatic: what auto picks on its own (== chosen unless forced).
    candidates: every algorithm that could run, registration order; skipped: name -> reason.
    env: the RINGTREE_ALGO value that constrained the choice ("" when none).
    note: why RINGTREE_ALGO was ignored for this collective ("" when it was not).
    """

    chosen: Candidate
    automatic: Candidate
    candidates: list[Candidate]
    skipped: dict[str, str]
    forced: bool
    env: str = ""
    note: str = ""

    @property
    def algorithm(self) -> str:
        """The algorithm used."""
        return self.chosen.algorithm

    def reason(self) -> str:
        """One line: what was picked, against what (times as ``ringtree cost``'s table writes
        them, :func:`ringtree.units.format_time`)."""
        auto = self.automatic
        others = ", ".join(
            f"{c.algorithm} {_seconds(c.time_s)}"
            for c in sorted(self.candidates, key=lambda c: c.time_s)
            if c is not auto
        )
        low = min(c.time_s for c in self.candidates)
        tie = (
            f"; within {TIE_TOLERANCE:.0%} of the fastest, ties go to {auto.algorithm}"
            if auto.time_s > low
            else ""
        )
        line = f"lowest predicted time: {auto.algorithm} {_seconds(auto.time_s)}{tie}" + (
            f" (vs {others})" if others else ""
        )
        if not self.forced:
            return f"{line}; {self.note}" if self.note else line
        ch = self.chosen
        ratio = ch.time_s / auto.time_s if auto.time_s else 1.0
        return (
            f"{ENV_VAR}={self.env} forced {ch.algorithm}: "
            f"{_seconds(ch.time_s)}, {ratio:.3g}x the automatic choice "
            f"{auto.algorithm} ({_seconds(auto.time_s)})"
        )

    def record(self) -> dict[str, Any]:
        """The choice as plain data (added to a ``ringtree cost --json`` row)."""
        return {
            "forced": self.forced,
            "n_chunks": self.chosen.n_chunks,
            "auto_algorithm": self.automatic.algorithm,
            "auto_time_s": self.automatic.time_s,
            "candidates": [c.record() for c in self.candidates],
            "skipped": self.skipped,
            "reason": self.reason(),
        }


def env_algorithms(collective: Collective, env: Mapping[str, str]) -> tuple[str, list[str], str]:
    """The RINGTREE_ALGO value, the names it allows for ``collective`` ([]: no constraint)
    and, when it is ignored for ``collective`` (it names none of its algorithms), why.

    RingtreeError when it names an unknown algorithm or collective, when a later entry has
    no collective, or when an entry scoped to a collective names none of its algorithms."""
    raw = env.get(ENV_VAR, "").strip()
    if not raw:
        return "", [], ""
    every = sorted({a for c in Collective for a in algorithms_for(c)})
    mine = algorithms_for(collective)
    entry: tuple[bool, list[str]] | None = None  # (excluding, names) for this collective
    scoped = False
    for i, part in enumerate(p.strip() for p in raw.split(";")):
        prefix, _, names = part.rpartition(":")
        if not prefix and i > 0:
            raise RingtreeError(f"{ENV_VAR}={raw!r}: only the first entry may go without a "
                                f"collective (as in NCCL_ALGO): write collective:{part}")
        excluding = names.strip().startswith("^")
        listed = [x.strip().lower() for x in names.strip().lstrip("^").split(",") if x.strip()]
        unknown = [x for x in listed if x not in every] or ([] if listed else [names])
        if unknown:
            raise RingtreeError(
                f"{ENV_VAR}={raw!r} names unknown algorithm {unknown[0]!r}: expected one or "
                f"more of {', '.join(every)}, comma-separated"
            )
        if not prefix:
            entry = (excluding, listed)
            continue
        col = Collective.parse(prefix)
        if not excluding and not set(listed) & set(algorithms_for(col)):
            raise RingtreeError(f"{ENV_VAR}={raw!r}: {col.value} has none of "
                                f"{', '.join(listed)}: it has {', '.join(algorithms_for(col))}")
        if col is collective:
            entry, scoped = (excluding, listed), True
    if entry is None:
        return raw, [], ""
    excluding, listed = entry
    allowed = [a for a in mine if (a in listed) != excluding]
    if not allowed:
        what = "leaves none" if excluding or scoped else "names none"
        return raw, [], (f"{ENV_VAR}={raw} {what} of the {collective.value} algorithms "
                         f"({', '.join(mine)}): ignored for it")
    return raw, allowed, ""


def choose(
    collective: Collective | str,
    n_ranks: int,
    size_bytes: int,
    links: LinkSpec,
    model: str = DEFAULT_MODEL,
    *,
    itemsize: int = 1,
    spec: BuildSpec | None = None,
    env: Mapping[str, str] | None = None,
) -> Choice:
    """Pick the algorithm with the lowest predicted time; RINGTREE_ALGO (in ``env``, default
    the process environment) forces or restricts the pick. RingtreeError when nothing can run.
    """
    spec = spec or BuildSpec()
    col = check(collective, n_ranks, size_bytes, itemsize, spec)
    raw, allowed, note = env_algorithms(col, os.environ if env is None else env)
    cands, skipped = candidates(col, n_ranks, size_bytes // itemsize, itemsize, spec, links,
                                get_model(model))
    if not cands:
        raise RingtreeError(
            f"no algorithm of {col.value} can run here: "
            + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        )
    automatic = fastest(cands, links, n_ranks, spec)
    runnable = [c for c in cands if c.algorithm in allowed]
    if allowed and not runnable:
        name = allowed[0]
        note = f"{ENV_VAR}={raw} cannot run here ({skipped.get(name, name)}): ignored"
    if not runnable:
        return Choice(automatic, automatic, cands, skipped, forced=False, env=raw, note=note)
    chosen = fastest(runnable, links, n_ranks, spec)
    return Choice(chosen, automatic, cands, skipped, forced=True, env=raw)


def engine_choice(
    collective: Collective, n_ranks: int, nbytes: int, link: Link, itemsize: int, root: int,
    env: str,
) -> Choice:
    """What :func:`choose` picks on ``link`` for the engine: the alpha-beta model, root
    ``root``, ``RINGTREE_ALGO`` = ``env`` ("": unset)."""
    return choose(collective, n_ranks, nbytes, link, itemsize=itemsize,
                  spec=BuildSpec(root=root), env={ENV_VAR: env} if env else {})
