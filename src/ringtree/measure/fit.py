"""Fit link constants to measured times by least squares.

Each measured line (an algorithm at a size) gives one equation: its time is a sum of
terms counted from the algorithm (steps, bytes, reduced bytes; messages on one machine)
times unknown constants (alpha, 1/bandwidth, gamma; CPU per message). Several algorithms
with different step/byte ratios make the system well determined. Two models are fitted:

* ``alpha-beta``: the plain model of :mod:`ringtree.cost.terms`, terms from the closed
  forms: ``steps alpha + wire_bytes / bandwidth + reduce_bytes gamma``;
* ``host``: the one-machine model of :mod:`ringtree.cost.host` (processes sharing ``cores``
  cores), terms from the schedules: ``steps alpha + messages o + wire / bandwidth +
  reduced gamma``.

The fit minimises the *relative* errors (each equation divided by its measured time, so a
64 KiB call weighs as much as a 64 MiB one) with every constant >= 0: the exact
non-negative least-squares solution, found by solving every subset of the (at most four)
constants with numpy.linalg.lstsq and keeping the best non-negative one. Optional constants
(gamma, o) are kept only where they help: when leaving one out raises the root-mean-square
relative error by less than ``HELPS`` of itself, it is left out (set to 0).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.forms import estimate
from ringtree.cost.host import HostLink, HostModel, algorithm_host_terms, available_cores
from ringtree.errors import RingtreeError
from ringtree.measure.result import BenchResult, Row
from ringtree.measure.worker import NATIVE

#: An optional constant stays only if dropping it raises the RMS relative error by this much.
HELPS = 0.05
PLAIN, HOST = "alpha-beta", "host"
#: The constants of each model, in column order; the optional ones may be dropped.
CONSTANTS = {
    PLAIN: ("alpha_s", "s_per_byte", "gamma_s_per_byte"),
    HOST: ("alpha_s", "message_s", "s_per_byte", "gamma_s_per_byte"),
}
OPTIONAL = frozenset({"gamma_s_per_byte", "message_s"})


@dataclass(frozen=True)
class Sample:
    """One measured line the fit can use."""

    collective: Collective
    algorithm: str
    n_ranks: int
    count: int
    itemsize: int
    n_chunks: int | None
    root: int
    time_s: float

    @property
    def size_bytes(self) -> int:
        """The buffer size of the line."""
        return self.count * self.itemsize

    def spec(self) -> BuildSpec:
        """The build settings the line ran with."""
        return BuildSpec(root=self.root, n_chunks=self.n_chunks)


def samples_from(result: BenchResult) -> list[Sample]:
    """The lines a fit can use: ringtree's algorithms (not native: its steps are unknown),
    correct results, non-empty buffers."""
    n = int(result.meta.get("n_ranks", 0))
    out = []
    for r in result.rows:
        if r.algorithm == NATIVE or r.wrong or r.count == 0 or r.time_us <= 0:
            continue
        out.append(sample_of(r, n))
    return out


def sample_of(r: Row, n_ranks: int) -> Sample:
    """One row as a Sample."""
    return Sample(
        Collective.parse(r.collective),
        r.algorithm,
        n_ranks,
        r.count,
        r.size_bytes // r.count,
        r.n_chunks,
        r.root or 0,
        r.time_us * 1e-6,
    )


def design_row(s: Sample, model: str, cores: float) -> list[float]:
    """The sample's terms, one per constant of ``model``."""
    if model == PLAIN:
        cost = estimate(s.collective, s.algorithm, s.n_ranks, s.count, s.itemsize, s.spec()).cost
        return [
            float(sum(t.steps for t in cost.values())),
            float(sum(t.wire_bytes for t in cost.values())),
            float(sum(t.reduce_bytes for t in cost.values())),
        ]
    t = algorithm_host_terms(
        s.collective, s.algorithm, s.n_ranks, s.count, s.itemsize, s.spec(), cores
    )
    return [float(t.steps), t.messages, t.wire_bytes, t.reduce_bytes]


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """argmin ||a x - b|| over x >= 0, exactly: the best non-negative unconstrained solution
    over every subset of columns (a has at most a handful of columns)."""
    k = a.shape[1]
    best, best_norm = np.zeros(k), float(np.linalg.norm(b))
    for m in range(1, k + 1):
        for cols in itertools.combinations(range(k), m):
            x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if (x < 0).any():
                continue
            full = np.zeros(k)
            full[list(cols)] = x
            norm = float(np.linalg.norm(a @ full - b))
            if norm < best_norm - 1e-15 * max(1.0, best_norm):
                best, best_norm = full, norm
    return best


@dataclass(frozen=True)
class Residual:
    """One sample's fitted time against its measured time; error = predicted/measured - 1."""

    sample: Sample
    predicted_s: float

    @property
    def error(self) -> float:
        """Relative error of the prediction (+0.1: predicted 10 % too slow)."""
        return self.predicted_s / self.sample.time_s - 1.0


@dataclass(frozen=True)
class Fit:
    """A fitted model: its constants (unused optional ones 0), the residual of every sample,
    and which optional constants were dropped because they did not help."""

    model: str
    constants: dict[str, float]
    residuals: list[Residual]
    dropped: tuple[str, ...] = ()
    cores: float = 0.0

    @property
    def bandwidth_Bps(self) -> float:
        """1 / the fitted seconds per byte (inf if the bytes were free)."""
        spb = self.constants["s_per_byte"]
        return 1.0 / spb if spb > 0 else float("inf")

    def errors(self) -> list[float]:
        """Relative error of every sample."""
        return [r.error for r in self.residuals]

    @property
    def median_abs_error(self) -> float:
        """Median of |predicted/measured - 1| over the samples."""
        return statistics.median(abs(e) for e in self.errors()) if self.residuals else 0.0

    @property
    def worst_abs_error(self) -> float:
        """Largest |predicted/measured - 1|."""
        return max((abs(e) for e in self.errors()), default=0.0)

    @property
    def rms_error(self) -> float:
        """Root-mean-square relative error (what the fit minimises)."""
        errs = self.errors()
        return float(np.sqrt(np.mean(np.square(errs)))) if errs else 0.0

    def record(self) -> dict[str, Any]:
        """The fit as plain data: constants, summary errors, residual per sample."""
        return {
            "model": self.model,
            "constants": self.constants,
            "bandwidth_Bps": self.bandwidth_Bps,
            "dropped": list(self.dropped),
            "cores": self.cores,
            "median_abs_error": self.median_abs_error,
            "worst_abs_error": self.worst_abs_error,
            "rms_error": self.rms_error,
            "residuals": [
                {
                    "collective": r.sample.collective.value,
                    "algorithm": r.sample.algorithm,
                    "size": r.sample.size_bytes,
                    "n_chunks": r.sample.n_chunks,
                    "measured_s": r.sample.time_s,
                    "predicted_s": r.predicted_s,
                    "error": r.error,
                }
                for r in self.residuals
            ],
        }


def _solve(a: np.ndarray, t: np.ndarray, cols: Sequence[int]) -> tuple[np.ndarray, float]:
    """Constants for the chosen columns (others 0) and the RMS relative error."""
    w = a[:, cols] / t[:, None]
    x = np.zeros(a.shape[1])
    x[list(cols)] = nonnegative_lstsq(w, np.ones(len(t)))
    rel = a @ x / t - 1.0
    return x, float(np.sqrt(np.mean(rel**2)))


def fit(
    samples: Sequence[Sample], model: str = HOST, *, cores: int = 1, optional: bool = True
) -> Fit:
    """Fit ``model``'s constants to ``samples`` (RingtreeError when there are too few, or
    when every size was measured with the same algorithm shape: nothing to tell the
    constants apart). ``optional=False`` keeps every constant."""
    names = CONSTANTS[model]
    if len(samples) < len(names):
        raise RingtreeError(
            f"{len(samples)} measured lines are too few to fit {len(names)} constants: "
            "measure more sizes or algorithms"
        )
    a = np.array([design_row(s, model, cores) for s in samples], dtype=float)
    t = np.array([s.time_s for s in samples], dtype=float)
    cols = list(range(len(names)))
    x, rms = _solve(a, t, cols)
    dropped = []
    for i, name in enumerate(names):
        if not optional or name not in OPTIONAL:
            continue
        trial = [c for c in cols if c != i]
        x2, rms2 = _solve(a, t, trial)
        if rms2 <= rms * (1 + HELPS):
            cols, x, rms = trial, x2, rms2
            dropped.append(name)
    per_byte = names.index("s_per_byte")
    if x[per_byte] <= 0 and "gamma_s_per_byte" not in dropped:  # gamma took all the bytes
        cols = [c for c in cols if names[c] != "gamma_s_per_byte"]
        x, rms = _solve(a, t, cols)
        dropped.append("gamma_s_per_byte")
    if x[per_byte] <= 0:
        raise RingtreeError("the fit found no cost per byte: measure larger sizes (up to MiBs)")
    constants = {name: float(v) for name, v in zip(names, x, strict=True)}
    residuals = [Residual(s, float(p)) for s, p in zip(samples, a @ x, strict=True)]
    return Fit(model, constants, residuals, tuple(dropped), cores if model == HOST else 0)


@dataclass
class Calibration:
    """Both fits of one transport's measurements, and the link they make."""

    backend: str
    n_ranks: int
    plain: Fit
    host: Fit
    meta: dict[str, Any] = field(default_factory=dict)
    #: the machine's cores (the host fit's ``cores`` are those left free while timing)
    cores: int = 1

    def link(self, name: str | None = None) -> HostLink:
        """The fitted link: the plain constants, and the one-machine model."""
        p, h = self.plain.constants, self.host.constants
        return HostLink(
            name=name or f"{self.backend}-{self.n_ranks}x{self.cores}cores",
            bandwidth_Bps=self.plain.bandwidth_Bps,
            alpha_s=p["alpha_s"],
            gamma_s_per_byte=p["gamma_s_per_byte"],
            note=f"fitted on {self.n_ranks} {self.backend} processes on a {self.cores}-core "
            "machine",
            source="ringtree calibrate",
            host=HostModel(
                cores=self.cores,
                alpha_s=h["alpha_s"],
                message_s=h["message_s"],
                bandwidth_Bps=self.host.bandwidth_Bps,
                gamma_s_per_byte=h["gamma_s_per_byte"],
                n_ranks=self.n_ranks,
            ),
        )


def calibrate(result: BenchResult, cores: int) -> Calibration:
    """Both fits of one sweep (RingtreeError if it has too few usable lines). The
    one-machine fit counts only the cores other programs left free while timing
    (:func:`~ringtree.cost.host.available_cores`), so its constants are an idle machine's."""
    samples = samples_from(result)
    other = float((result.meta.get("load") or {}).get("other_cores", 0.0))
    return Calibration(
        backend=str(result.meta.get("backend", "gloo")),
        n_ranks=int(result.meta.get("n_ranks", 0)),
        plain=fit(samples, PLAIN),
        host=fit(samples, HOST, cores=available_cores(cores, other)),
        meta=result.meta,
        cores=cores,
    )
