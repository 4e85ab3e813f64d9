"""Where the choice flips: for every pair of algorithms, the payload sizes at which their
predicted times cross, and which one wins below and above.

Times come from the closed forms through :func:`ringtree.cost.select.tuned` (pipelined
algorithms at their best chunk count for each size). The sizes are scanned on a geometric grid
(``points_per_octave`` per doubling) between ``min_bytes`` and ``max_bytes``; every sign change
of t_a - t_b between two grid points is then bisected down to one element, so a crossover is
exact to the element for the model. Pairs whose times never cross in the range are reported with
their winner (or as a tie: ring, Rabenseifner and the double binary tree cost the same on two
ranks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from ringtree.algorithms import BuildSpec, get_algorithm
from ringtree.collectives import Collective
from ringtree.cost.links import LinkSpec, link_name
from ringtree.cost.models import DEFAULT_MODEL, get_model
from ringtree.cost.query import Query, check
from ringtree.cost.select import Candidate, candidates, fastest, tune
from ringtree.errors import RingtreeError


@dataclass(frozen=True)
class Crossover:
    """``a`` and ``b`` cost the same near ``size_bytes``: ``below`` wins under it, ``above``
    from it on (``size_bytes`` is the first size at which ``above`` is faster)."""

    a: str
    b: str
    size_bytes: int
    below: str
    above: str
    time_s: float

    def record(self) -> dict[str, Any]:
        """``{"a", "b", "size_bytes", "below", "above", "time_s"}``."""
        return {
            "a": self.a,
            "b": self.b,
            "size_bytes": self.size_bytes,
            "below": self.below,
            "above": self.above,
            "time_s": self.time_s,
        }


@dataclass
class CrossoverMap:
    """Every pair's crossovers over a size range, plus the curves they come from.

    sizes_bytes: the scan grid; times_s[alg][i]: alg's predicted time at sizes_bytes[i].
    never: pairs that do not cross in the range, with the winner ("tie" when equal throughout).
    winners: the automatic choice by size, as (algorithm, from_bytes, to_bytes) ranges.
    """

    collective: Collective
    n_ranks: int
    link: str
    model: str
    itemsize: int
    sizes_bytes: list[int]
    times_s: dict[str, list[float]]
    crossovers: list[Crossover] = field(default_factory=list)
    never: list[tuple[str, str, str]] = field(default_factory=list)
    winners: list[tuple[str, int, int]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """Plain data for ``ringtree crossover --json``."""
        return {
            "collective": self.collective.value,
            "workers": self.n_ranks,
            "link": self.link,
            "model": self.model,
            "itemsize": self.itemsize,
            "range_bytes": [self.sizes_bytes[0], self.sizes_bytes[-1]],
            "crossovers": [c.record() for c in self.crossovers],
            "no_crossover": [{"a": a, "b": b, "winner": w} for a, b, w in self.never],
            "auto_by_size": [
                {"algorithm": a, "from_bytes": lo, "to_bytes": hi} for a, lo, hi in self.winners
            ],
            "skipped": self.skipped,
        }


def _grid(lo: int, hi: int, points_per_octave: int) -> list[int]:
    """Element counts from lo to hi, about ``points_per_octave`` per doubling."""
    out, x = [lo], float(lo)
    step = 2 ** (1 / points_per_octave)
    while x * step < hi:
        x *= step
        if int(x) > out[-1]:
            out.append(int(x))
    if out[-1] != hi:
        out.append(hi)
    return out


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _flip(lo: int, hi: int, side: Callable[[int], int]) -> int:
    """The first count in (lo, hi] where ``side`` differs from its value at lo."""
    start = side(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if side(mid) == start:
            lo = mid
        else:
            hi = mid
    return hi


def crossover_map(
    collective: Collective | str,
    n_ranks: int,
    links: LinkSpec,
    model: str = DEFAULT_MODEL,
    *,
    itemsize: int = 4,
    spec: BuildSpec | None = None,
    min_bytes: int | None = None,
    max_bytes: int = 10**11,
    points_per_octave: int = 2,
) -> CrossoverMap:
    """Crossovers of every pair of algorithms of ``collective`` on ``n_ranks`` over ``links``,
    for sizes from ``min_bytes`` (default one element) to ``max_bytes``."""
    lo_count = max(1, (min_bytes or itemsize) // itemsize)
    hi_count = max_bytes // itemsize
    if hi_count <= lo_count:
        raise RingtreeError(
            f"size range {lo_count * itemsize} .. {max_bytes} B is empty: the largest size must "
            f"exceed the smallest (and one {itemsize}-byte element)"
        )
    spec = spec or BuildSpec()
    col = check(collective, n_ranks, lo_count * itemsize, itemsize, spec)
    m = get_model(model)
    first, skipped = candidates(col, n_ranks, lo_count, itemsize, spec, links, m)
    algs = [c.algorithm for c in first]
    if len(algs) < 1:
        raise RingtreeError(f"no algorithm of {col.value} can run here: {skipped}")
    queries = {a: Query.make(get_algorithm(col, a), n_ranks, lo_count, itemsize, spec)
               for a in algs}
    cache: dict[tuple[str, int], Candidate] = {}

    def cand(alg: str, count: int) -> Candidate:
        key = (alg, count)
        if key not in cache:
            cache[key] = tune(queries[alg].with_count(count), links, m)
        return cache[key]

    grid = _grid(lo_count, hi_count, points_per_octave)
    result = CrossoverMap(
        col, n_ranks, link_name(links), model, itemsize,
        [c * itemsize for c in grid],
        {a: [cand(a, c).time_s for c in grid] for a in algs},
        skipped=skipped,
    )
    for a, b in combinations(algs, 2):
        signs = [
            _sign(ta - tb) for ta, tb in zip(result.times_s[a], result.times_s[b], strict=True)
        ]
        marked = [(c, s) for c, s in zip(grid, signs, strict=True) if s]
        if not marked:
            result.never.append((a, b, "tie"))
            continue
        pairs = zip(marked[:-1], marked[1:], strict=True)
        flips = [(c0, c1, s0) for (c0, s0), (c1, s1) in pairs if s0 != s1]
        if not flips:
            result.never.append((a, b, a if marked[0][1] < 0 else b))
        for c0, c1, s0 in flips:

            def side(c: int, a: str = a, b: str = b) -> int:
                return _sign(cand(a, c).time_s - cand(b, c).time_s)

            at = _flip(c0, c1, lambda c, side=side, s0=s0: side(c) == s0)
            below, above = (a, b) if s0 < 0 else (b, a)
            result.crossovers.append(
                Crossover(a, b, at * itemsize, below, above, cand(a, at).time_s)
            )
    result.winners = _winners(grid, algs, lambda count: fastest(
        [cand(a, count) for a in algs], links, n_ranks, spec).algorithm, itemsize)
    return result


def _winners(
    grid: list[int], algs: list[str], pick: Callable[[int], str], itemsize: int
) -> list[tuple[str, int, int]]:
    """The automatic choice (``pick``: :func:`ringtree.cost.select.fastest` at a count) as
    size ranges, boundaries bisected."""
    bounds = [grid[0]]
    for c0, c1 in zip(grid[:-1], grid[1:], strict=True):
        w0 = pick(c0)
        if w0 != pick(c1):
            bounds.append(_flip(c0, c1, lambda c, w0=w0: pick(c) == w0))
    ranges = []
    for i, start in enumerate(bounds):
        end = bounds[i + 1] - 1 if i + 1 < len(bounds) else grid[-1]
        name = pick(start)
        if ranges and ranges[-1][0] == name:
            ranges[-1] = (name, ranges[-1][1], end * itemsize)
        else:
            ranges.append((name, start * itemsize, end * itemsize))
    return ranges
