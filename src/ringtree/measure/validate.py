"""Predicted against measured: how far a calibrated link's predictions are from times the
fit did not see, and whether the automatic choice picked the fastest algorithm.

For every measured line (collective, size, algorithm): the prediction on the link with the
chunk count the line ran with, and its error ``predicted / measured - 1``. For every size:
the algorithm ``auto`` picks on the link (:func:`ringtree.cost.select.choose`, ignoring
RINGTREE_ALGO) and whether its measured time is within ``AUTO_TOLERANCE`` of the fastest
measured one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ringtree.algorithms import BuildSpec
from ringtree.cost.host import HostLink
from ringtree.cost.models import predict
from ringtree.cost.select import choose
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.measure.result import BenchResult, Row
from ringtree.measure.worker import NATIVE

#: auto's pick counts as right when measured within this fraction of the fastest.
AUTO_TOLERANCE = 0.10


@dataclass(frozen=True)
class Check:
    """One line: measured, predicted, error (+0.1: predicted 10 % too slow)."""

    collective: str
    algorithm: str
    size_bytes: int
    n_chunks: int | None
    measured_s: float
    predicted_s: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_s / self.measured_s - 1.0


@dataclass(frozen=True)
class Pick:
    """One size: auto's pick and the measured fastest. ``ok``: auto's pick was measured
    within AUTO_TOLERANCE of the fastest (None: auto picked an algorithm not measured)."""

    collective: str
    size_bytes: int
    auto: str
    auto_measured_s: float | None
    fastest: str
    fastest_s: float

    @property
    def ok(self) -> bool | None:
        """Whether auto's pick is the fastest or within AUTO_TOLERANCE of it."""
        if self.auto_measured_s is None:
            return None
        return self.auto_measured_s <= self.fastest_s * (1 + AUTO_TOLERANCE)


@dataclass
class Validation:
    """Every line's check, every size's pick, and the summary figures."""

    link: str
    n_ranks: int
    checks: list[Check]
    picks: list[Pick]
    skipped_sizes: list[int] = field(default_factory=list)
    #: the cores the one-machine model was told were free (None: not a one-machine link)
    free_cores: float | None = None

    @property
    def median_abs_error(self) -> float:
        """Median |error| over the lines."""
        return statistics.median(abs(c.error) for c in self.checks) if self.checks else 0.0

    @property
    def worst(self) -> Check | None:
        """The line with the largest |error|."""
        return max(self.checks, key=lambda c: abs(c.error), default=None)

    @property
    def worst_abs_error(self) -> float:
        """Largest |error|."""
        return abs(self.worst.error) if self.worst else 0.0

    @property
    def auto_right(self) -> tuple[int, int]:
        """(sizes where auto's pick was within tolerance of the fastest, sizes judged)."""
        judged = [p for p in self.picks if p.ok is not None]
        return sum(1 for p in judged if p.ok), len(judged)

    def record(self) -> dict[str, Any]:
        """What ``validate --json`` prints."""
        right, judged = self.auto_right
        return {
            "link": self.link,
            "n_ranks": self.n_ranks,
            "median_abs_error": self.median_abs_error,
            "worst_abs_error": self.worst_abs_error,
            "auto_right": right,
            "auto_judged": judged,
            "auto_tolerance": AUTO_TOLERANCE,
            "skipped_sizes": self.skipped_sizes,
            "free_cores": self.free_cores,
            "checks": [
                {
                    "collective": c.collective,
                    "algorithm": c.algorithm,
                    "size": c.size_bytes,
                    "n_chunks": c.n_chunks,
                    "measured_s": c.measured_s,
                    "predicted_s": c.predicted_s,
                    "error": c.error,
                }
                for c in self.checks
            ],
            "picks": [
                {
                    "collective": p.collective,
                    "size": p.size_bytes,
                    "auto": p.auto,
                    "auto_measured_s": p.auto_measured_s,
                    "fastest": p.fastest,
                    "fastest_s": p.fastest_s,
                    "ok": p.ok,
                }
                for p in self.picks
            ],
        }


def validate(result: BenchResult, link: Link, skip_sizes: set[int] | None = None) -> Validation:
    """Compare ``result``'s lines with ``link``'s predictions (native lines and sizes in
    ``skip_sizes`` -- those the fit saw -- are left out)."""
    n = int(result.meta["n_ranks"])
    skip = skip_sizes or set()
    rows = [r for r in result.rows if r.algorithm != NATIVE and r.time_us > 0 and r.count > 0]
    skipped = sorted({r.size_bytes for r in rows if r.size_bytes in skip})
    rows = [r for r in rows if r.size_bytes not in skip]
    if not rows:
        raise RingtreeError(
            "nothing to validate: every measured size was one the fit saw"
            if skipped
            else "nothing to validate: the results hold no timed ringtree lines"
        )
    checks = [_check(r, n, link) for r in rows]
    picks = []
    for col in result.collectives():
        for size in dict.fromkeys(r.size_bytes for r in rows if r.collective == col):
            here = [r for r in rows if r.collective == col and r.size_bytes == size]
            picks.append(_pick(here, n, link))
    host = getattr(link, "host", None)
    free = host.cores if isinstance(link, HostLink) and host is not None else None
    return Validation(link.name, n, checks, picks, skipped_sizes=skipped, free_cores=free)


def _check(r: Row, n: int, link: Link) -> Check:
    spec = BuildSpec(root=r.root or 0, n_chunks=r.n_chunks)
    p = predict(
        r.collective,
        r.algorithm,
        n,
        r.size_bytes,
        link,
        itemsize=r.size_bytes // r.count,
        spec=spec,
    )
    return Check(r.collective, r.algorithm, r.size_bytes, r.n_chunks, r.time_us * 1e-6, p.time_s)


def _pick(here: list[Row], n: int, link: Link) -> Pick:
    r0 = here[0]
    choice = choose(
        r0.collective,
        n,
        r0.size_bytes,
        link,
        itemsize=r0.size_bytes // r0.count,
        spec=BuildSpec(root=r0.root or 0),
        env={},
    )
    auto = choice.automatic.algorithm
    measured = {r.algorithm: r.time_us * 1e-6 for r in here}
    fastest = min(here, key=lambda r: r.time_us)
    return Pick(
        r0.collective,
        r0.size_bytes,
        auto,
        measured.get(auto),
        fastest.algorithm,
        fastest.time_us * 1e-6,
    )
