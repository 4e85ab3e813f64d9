"""Fit a cluster's own constants of the NCCL model to its nccl-tests logs.

The fit is the one the team fits the model's global constants with (bench/fit_nccl_model.py
over :mod:`ringtree.measure.nccl_check`), run on one cluster's logs instead of the published
systems: first the floor calibration (the median time of the sizes up to 4 KiB sets the
cluster's ``launch_us`` from a one-node run, else its ``net_hop_us``), then each constant the
model keeps per system (:data:`CONSTANTS`) in turn by golden-section search within its
bounds, :data:`SWEEPS` sweeps, to the lowest mean |busbw error| of the fitted points. It runs
in two stages (:data:`STAGES`): one-node runs fit the constants that hold for every call
(NVLink's, the protocols' and NVLS's), then multi-node runs fit those that hold across nodes
(the network's, and the same protocol and NVLS constants as they behave there), each with
its own floor. A constant is fitted only where the logs can tell it: moving it across its
bounds must move a prediction by at least :data:`TELLS`.

Fitting and checking stay apart: every ``hold_back``-th size of each test (the 2nd, 2nd +
hold_back, ...; none when 0) is left out of the fit, and the error of the fitted model on
those sizes is what :class:`Calibration` reports. Cost: about 400 evaluations of the model
on the fitted points, ~2 ms each for 16 sizes (a few seconds).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl.p2p import P2P_COLLECTIVES
from ringtree.cost.nccl.tuner import NCCL_COLLECTIVES
from ringtree.errors import RingtreeError
from ringtree.measure import nccl_check, published
from ringtree.measure.nccl_tests import Test

#: (name, low, high, runs that tell it): the per-cluster constants and the bounds searched.
#: The scales, NVLink efficiency and per-peer cost keep bench/fit_nccl_model.py's bounds; a
#: network's efficiency is at most its line rate (1.0); NVLS's per-chunk overhead and latency
#: scale get wider bounds than the global fit's (96 KiB, 4x): the AWS p5 logs over EFA reach
#: them. "node": fitted from one-node runs only (NVLink alone on the path); "net": from
#: multi-node runs only; "any": from either, separately (:func:`fit`).
CONSTANTS = (
    ("intra_latency_scale", 0.3, 3.0, "node"), ("nvlink_efficiency", 0.5, 1.05, "node"),
    ("ll128_latency_scale", 0.3, 3.0, "any"), ("simple_latency_scale", 0.3, 3.0, "any"),
    ("nvls_chunk_overhead_bytes", 0.0, float(1 << 20), "any"),
    ("nvls_latency_scale", 0.5, 8.0, "any"), ("p2p_peer_us", 0.0, 30.0, "any"),
    ("net_efficiency", 0.3, 1.0, "net"), ("net_simple_step_us", 1.0, 2000.0, "net"),
)
#: The cluster file's tables the two stages write: what one-node runs tell holds for every
#: call; what multi-node runs tell, for calls that cross nodes (a 2-node log's costs would
#: otherwise slow a plan's tensor parallelism inside a node).
STAGES = (("nccl_model", ("node", "any")), ("nccl_model_multinode", ("net", "any")))
SWEEPS = 2
#: A constant is fitted when moving it across its bounds moves a prediction by this much.
TELLS = 0.01
#: The smallest share of the points a fit may be left with.
MIN_FITTED = 4


def golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 14) -> float:
    """The argmin of ``f`` on [lo, hi] by golden-section search (``steps`` evaluations
    after the first two; the bracket shrinks by 0.618 each)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(steps):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


@dataclass(frozen=True)
class Calibration:
    """A fitted cluster: ``cluster`` carries the constants; ``fitted`` names those the fit
    moved (the floor's field first), ``tried`` every one it searched; errors are mean/median
    |busbw error| (fractions)."""

    cluster: Cluster
    fitted: tuple[str, ...]
    tried: tuple[str, ...]
    fit_points: int
    fit_mean_abs_error: float
    held_back_sizes: tuple[int, ...]
    held_back: tuple[published.Point, ...]
    uncalibrated_mean_abs_error: float
    seconds: float

    @property
    def held_back_mean_abs_error(self) -> float | None:
        """Mean |error| on the sizes the fit did not see (None when none were held back)."""
        e = [p.error for p in self.held_back]
        return statistics.fmean(e) if e else None

    @property
    def held_back_median_abs_error(self) -> float | None:
        """Median |error| on the sizes the fit did not see."""
        e = [p.error for p in self.held_back]
        return statistics.median(e) if e else None

    def constants(self) -> dict[str, float]:
        """The values of every constant searched (the floor's too), by name."""
        c = self.cluster
        return {n: float(value_of(c, n)) for n in dict.fromkeys(self.fitted + self.tried)}


def runs_of(tests: Sequence[Test], name: str = "logs",
            env: dict[str, str] | None = None) -> list[published.Run]:
    """The tests the NCCL model prices, as published runs (:func:`pairs_of`)."""
    return [r for _, r in pairs_of(tests, name, env)]


def pairs_of(tests: Sequence[Test], name: str = "logs",
             env: dict[str, str] | None = None) -> list[tuple[Test, published.Run]]:
    """The tests the NCCL model prices, each with its published runs: one per test and
    (type, op, root), out-of-place times, sizes of 0 left out; NCCL_* settings ``env``
    (what the user says the tests ran with) under those the log reports. RingtreeError when
    a test's ranks do not split evenly over its hosts, or none can be priced."""
    runs: list[tuple[Test, published.Run]] = []
    for t in tests:
        if t.collective not in NCCL_COLLECTIVES and t.collective not in P2P_COLLECTIVES:
            continue
        nodes, gpn = shape_of(t)
        groups: dict[tuple, list] = {}
        for r in t.rows:
            if r.size_bytes and r.out_of_place.time_us > 0:
                groups.setdefault((r.dtype, r.redop, r.root), []).append(r)
        for rows in groups.values():
            rows = sorted({r.size_bytes: r for r in rows}.values(), key=lambda r: r.size_bytes)
            runs.append((t, published.Run(
                system=name, collective=t.collective, nodes=nodes, gpus_per_node=gpn,  # type: ignore[arg-type]
                env={**(env or {}), **dict(t.env)}, sizes=tuple(r.size_bytes for r in rows),
                times_us=tuple(r.out_of_place.time_us for r in rows),
                busbw_gbps=tuple(r.out_of_place.busbw_gbps for r in rows),
                command=f"{t.test}_perf", versions=t.nccl_version)))
    if not runs:
        names = ", ".join(sorted({f"{t.test}_perf" for t in tests}))
        raise RingtreeError(f"no test the NCCL model prices in the logs ({names}): give "
                            "all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                            "alltoall_perf, broadcast_perf or reduce_perf output")
    return runs


def shape_of(t: Test) -> tuple[int, int]:
    """(nodes, GPUs per node) of a test, from its device list."""
    if not t.devices:
        raise RingtreeError(f"{t.source}, line {t.line}: {t.test}_perf's output has no "
                            "'Using devices' list, so its nodes are unknown: give the whole "
                            "output, from its '# nThread' line")
    gpn = t.gpus_per_node
    if gpn is None:
        per = sorted({sum(d.host == h for d in t.devices) for h in t.hosts})
        raise RingtreeError(f"{t.source}, line {t.line}: its hosts run {per} ranks each: the "
                            "model takes nodes of as many GPUs each")
    return len(t.hosts), gpn


def value_of(c: Cluster, key: str) -> float:
    """A constant's value on ``c``: ``launch_us``/``net_hop_us`` (a field, else the model's
    default), or ``TABLE.NAME`` for a model constant as calls on one node (``nccl_model``) or
    across nodes (``nccl_model_multinode``) see it, for the cluster's network."""
    from ringtree.cost.nccl import timing

    if key in ("launch_us", "net_hop_us"):
        v = getattr(c, key)
        if v is not None:
            return float(v)
        return timing.DEFAULT.host_us if key == "launch_us" else timing.DEFAULT.hop_us(c.network)
    table, name = key.split(".")
    p = timing.for_cluster(timing.DEFAULT, c, 1 if table == "nccl_model" else 2)
    v = getattr(p, name)
    return float(dict(v).get(c.network, 0.0)) if isinstance(v, tuple) else float(v)


def with_value(c: Cluster, key: str, value: float) -> Cluster:
    """``c`` with one constant set (a field, or ``TABLE.NAME``: an entry of that table)."""
    if key in ("launch_us", "net_hop_us"):
        return replace(c, **{key: value})
    table, name = key.split(".")
    model = dict(getattr(c, table)) | {name: value}
    return replace(c, **{table: tuple(sorted(model.items()))})


def split(runs: Sequence[published.Run], hold_back: int) -> tuple[list, list, tuple[int, ...]]:
    """(fitted runs, held-back runs, held-back sizes): every ``hold_back``-th size of each
    run from its second is held back."""
    if hold_back < 2:
        return list(runs), [], ()
    fit, held, sizes = [], [], set()
    for r in runs:
        keep = [i for i in range(len(r.sizes)) if i % hold_back != 1]
        out = [i for i in range(len(r.sizes)) if i % hold_back == 1]
        for part, idx in ((fit, keep), (held, out)):
            if idx:
                part.append(_subset(r, idx))
        sizes.update(r.sizes[i] for i in out)
    return fit, held, tuple(sorted(sizes))


def _subset(r: published.Run, idx: list[int]) -> published.Run:
    pick = lambda xs: tuple(xs[i] for i in idx)  # noqa: E731
    return replace(r, sizes=pick(r.sizes), times_us=pick(r.times_us or ()),
                   busbw_gbps=pick(r.busbw_gbps))


def _system(cluster: Cluster, runs: Sequence[published.Run]) -> published.System:
    return published.System(cluster.key, "", "", cluster, tuple(runs), Path("."))


def error(cluster: Cluster, runs: Sequence[published.Run]) -> float:
    """Mean |busbw error| over the runs' points after the floor calibration (the points it
    used not scored), as nccl_check scores the published systems."""
    every, _, _, _ = nccl_check.score([_system(cluster, runs)])
    return every.pooled


def tells(cluster: Cluster, runs: Sequence[published.Run], key: str, lo: float,
          hi: float) -> bool:
    """Whether the runs' predictions move by TELLS as ``key`` goes from ``lo`` to ``hi``."""
    predict = nccl_check.predictor()
    for r in runs:
        for s in r.sizes:
            a, _ = predict(with_value(cluster, key, lo), r, s)
            b, _ = predict(with_value(cluster, key, hi), r, s)
            if abs(b / a - 1) >= TELLS:
                return True
    return False


def fit(tests: Sequence[Test], cluster: Cluster, hold_back: int = 4,
        env: dict[str, str] | None = None) -> Calibration:
    """Fit ``cluster``'s constants to the tests (module doc; ``env``: as :func:`pairs_of`);
    RingtreeError when nothing in them can be priced or too few points are left to fit."""
    t0 = time.perf_counter()
    runs = runs_of(tests, cluster.key, env)
    fitted_runs, held_runs, held_sizes = split(runs, hold_back)
    if sum(len(r.sizes) for r in fitted_runs) < MIN_FITTED:
        raise RingtreeError(f"the logs have {sum(len(r.sizes) for r in runs)} sizes the model "
                            f"prices: too few to fit on (at least {MIN_FITTED} after holding "
                            "back every hold-back-th)")
    before = error(cluster, fitted_runs)
    c, tried = cluster, []
    for table, wheres in STAGES:
        part = [r for r in fitted_runs if (r.nodes > 1) == (table != "nccl_model")]
        if not part:
            continue
        keys = [(f"{table}.{n}", lo, hi) for n, lo, hi, where in CONSTANTS
                if where in wheres and tells(c, part, f"{table}.{n}", lo, hi)]
        c = nccl_check.calibrate(_system(_search(c, part, keys), part)).cluster
        tried += [k for k, _, _ in keys]
    moved = [k for k in ("launch_us", "net_hop_us", *tried)
             if value_of(c, k) != value_of(cluster, k)]
    held = tuple(published.points([_system(c, held_runs)], nccl_check.predictor()))
    return Calibration(c, tuple(moved), tuple(tried), sum(len(r.sizes) for r in fitted_runs),
                       error(c, fitted_runs), held_sizes, held, before,
                       time.perf_counter() - t0)


def _search(c: Cluster, runs: list[published.Run], keys: list[tuple[str, float, float]]
            ) -> Cluster:
    """``c`` with each key in turn at its golden-section best, SWEEPS sweeps."""
    for _ in range(SWEEPS):
        for key, lo, hi in keys:
            best = golden(lambda v, k=key, c0=c: error(with_value(c0, k, v), runs), lo, hi)
            if error(with_value(c, key, best), runs) < error(c, runs):
                c = with_value(c, key, best)
    return c


__all__ = ["CONSTANTS", "Calibration", "fit", "golden", "runs_of", "split"]
