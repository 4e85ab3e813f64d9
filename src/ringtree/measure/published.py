"""Published nccl-tests results (``bench/published/*.toml``) and a model's error on them.

Each file is one system: ``[system]`` (what it is, where the numbers come from), ``[cluster]``
(the machine as ringtree describes it: a preset of ``ringtree clusters`` plus what differs,
the keys of a cluster file) and one ``[[runs]]`` per table (collective, nodes, GPUs per node,
the command, versions and NCCL_* settings given, and the sizes, times and bandwidths as
printed). Two rules, applied when the data is loaded (:func:`anomalies`), set a run apart --
its points are scored but reported apart, not pooled -- because the run cannot check a model
of the machine the file describes:

* the source contradicts it: another run of the same system, collective, shape and NCCL_*
  settings reaches at least 1.3x its bus bandwidth at a size both have (>= 64 MiB);
* the run could not have used the network described: across nodes, measured up to 1 GiB or
  more, its best bus bandwidth is under a quarter of the line rate of the NICs its GPUs have
  (a misconfigured or shared fabric);
* the run used an NCCL older than 2.12, the oldest whose tuner docs/nccl-tuning-notes.md
  compares: its protocols' kernels and tuning differ from what the model follows (2.27-2.30).

A file may also set ``anomaly = "why"`` on a run by hand; none does. And a single point whose
time is more than twice both its neighbours' (an isolated spike: a 32-byte all-reduce taking
68 us between 13 and 15 us ones) is a glitch of the measurement, scored apart the same way.

Errors are those of the predicted bus bandwidth, ``|predicted / measured - 1|``, computed from
the time column where there is one (busbw is time-proportional) and from busbw otherwise (two
sources publish busbw only).
"""

from __future__ import annotations

import math
import re
import statistics
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ringtree.collectives import Collective, bus_factor
from ringtree.cost.clusters import Cluster, cluster_from_table
from ringtree.cost.nccl.p2p import P2P_COLLECTIVES
from ringtree.errors import RingtreeError

#: Size bands the error is reported by (bytes): latency-bound, the middle, the plateau.
BANDS = (("< 64 KiB", 0, 64 * 2**10), ("64 KiB - 64 MiB", 64 * 2**10, 64 * 2**20),
         (">= 64 MiB", 64 * 2**20, math.inf))
NCCL_VARIABLES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE",
                  "NCCL_PAT_ENABLE")


@dataclass(frozen=True)
class Run:
    """One published table: a collective on ``nodes`` x ``gpus_per_node`` GPUs."""

    system: str
    collective: Collective
    nodes: int
    gpus_per_node: int
    env: dict[str, str]
    sizes: tuple[int, ...]
    times_us: tuple[float, ...] | None
    busbw_gbps: tuple[float, ...]
    command: str = ""
    versions: str = ""
    anomaly: str = ""
    nccl_algorithm: tuple[str, ...] = ()
    nccl_protocol: tuple[str, ...] = ()

    @property
    def n_ranks(self) -> int:
        """Every GPU of the run."""
        return self.nodes * self.gpus_per_node

    @property
    def nccl_version(self) -> tuple[int, int, int] | None:
        """The NCCL release ``versions`` names ("NCCL 2.26.2", "nccl v2.21.5"), if any."""
        found = re.search(r"NCCL[ v]*(\d+)\.(\d+)\.(\d+)", self.versions)
        return (int(found[1]), int(found[2]), int(found[3])) if found else None


@dataclass(frozen=True)
class System:
    """One file: its name, source, the cluster it describes, its runs."""

    name: str
    source: str
    citation: str
    cluster: Cluster
    runs: tuple[Run, ...]
    path: Path


def _env(text: str) -> dict[str, str]:
    """The NCCL_* settings a run's ``env`` text states (``NAME=value`` words)."""
    out = {}
    for word in text.replace(",", " ").replace(";", " ").split():
        name, sep, value = word.partition("=")
        if sep and name in NCCL_VARIABLES:
            out[name] = value
    return out


def load_system(path: Path) -> System:
    """One data file (RingtreeError naming the file and what is wrong)."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RingtreeError(f"cannot read {path}: {e}") from None
    s = data.get("system", {})
    if "cluster" not in data:
        raise RingtreeError(f"{path} has no [cluster] table: say which machine it is")
    cluster = cluster_from_table(str(s.get("name", path.stem)), data["cluster"], str(path))
    runs = []
    for r in data.get("runs", []):
        times = tuple(float(t) for t in r.get("time_us", ())) or None
        runs.append(Run(
            system=str(s.get("name", path.stem)), collective=Collective.parse(r["collective"]),
            nodes=int(r["nodes"]), gpus_per_node=int(r["gpus_per_node"]),
            env=_env(str(r.get("env", ""))), sizes=tuple(int(x) for x in r["size_bytes"]),
            times_us=times, busbw_gbps=tuple(float(b) for b in r["busbw_gbps"]),
            command=str(r.get("command", "")), versions=str(r.get("versions", "")),
            anomaly=str(r.get("anomaly", "")),
            nccl_algorithm=tuple(r.get("nccl_algorithm", ())),
            nccl_protocol=tuple(r.get("nccl_protocol", ())),
        ))
    return System(str(s.get("name", path.stem)), str(s.get("source", "")),
                  str(s.get("citation", "")), cluster, tuple(runs), path)


def load(folder: Path) -> list[System]:
    """Every ``*.toml`` system in ``folder``, by name, with :func:`anomalies` marked."""
    return [_marked(load_system(p)) for p in sorted(folder.glob("*.toml"))]


CONTRADICTED_BY = 1.3
OLDEST_NCCL = (2, 12)
MIN_NETWORK_SHARE = 0.25


def anomalies(system: System) -> dict[int, str]:
    """Index of each run the module doc's rules set apart, with why."""
    out: dict[int, str] = {}
    for i, run in enumerate(system.runs):
        if run.anomaly:
            out[i] = run.anomaly
            continue
        mine = dict(zip(run.sizes, run.busbw_gbps, strict=True))
        for other in system.runs:
            if other is run or (other.collective, other.nodes, other.gpus_per_node, other.env) != (
                run.collective, run.nodes, run.gpus_per_node, run.env):
                continue
            for size, b in zip(other.sizes, other.busbw_gbps, strict=True):
                if size >= 64 * 2**20 and size in mine and b >= CONTRADICTED_BY * mine[size] > 0:
                    shape = f"{run.nodes}x{run.gpus_per_node} {run.collective.value}"
                    out[i] = (f"another run of {shape} reaches {b:g} GB/s busbw at {size} B, "
                              f"this one {mine[size]:g}")
                    break
            if i in out:
                break
        old = run.nccl_version
        if i not in out and old and old[:2] < OLDEST_NCCL:
            out[i] = (
                f"measured with NCCL {'.'.join(map(str, old))}, older than the tuners the "
                "model follows"
            )
        c = system.cluster
        line_rate = c.nics_per_node * c.nic_gbps / 8 * run.gpus_per_node / c.gpus_per_node
        # a GPU's own NVLink line bounds busbw too: a 72-GPU node's 72 NICs do not raise it
        nvlink = c.gpu.nvlink_links * c.gpu.nvlink_GBps_per_link
        if c.fabric in ("nvswitch", "nvlink") and nvlink:
            line_rate = min(line_rate, nvlink)
        # all-to-all, gather, scatter: each GPU's traffic leaves through its share of the NICs
        # ((N-g)/N of every buffer), not a ring's through the node's: that share, in busbw terms
        if run.collective in P2P_COLLECTIVES:
            n, g = run.n_ranks, run.gpus_per_node
            line_rate = line_rate / g * (n - 1) / max(n - g, 1)
        best = max(run.busbw_gbps, default=0.0)
        if (i not in out and run.nodes > 1 and max(run.sizes) >= 2**30
                and best < MIN_NETWORK_SHARE * line_rate):
            out[i] = (
                f"best busbw {best:g} GB/s is under a quarter of the {line_rate:g} GB/s of "
                "NICs each node is described with: the run did not use that network"
            )
    return out


def _marked(system: System) -> System:
    found = anomalies(system)
    if not found:
        return system
    runs = tuple(replace(r, anomaly=found[i]) if i in found else r
                 for i, r in enumerate(system.runs))
    return replace(system, runs=runs)


@dataclass(frozen=True)
class Point:
    """One measured size of a run, with the prediction and its error."""

    run: Run
    size: int
    measured_us: float | None
    measured_busbw: float
    predicted_us: float
    predicted_busbw: float
    choice: str
    error: float
    glitch: bool = False

    @property
    def band(self) -> str:
        """The size band (see BANDS)."""
        return next(name for name, lo, hi in BANDS if lo <= self.size < hi)


def spike(run: Run, size: int) -> bool:
    """Whether the time at ``size`` is more than twice both its neighbours' (module doc)."""
    if run.times_us is None:
        return False
    i = run.sizes.index(size)
    t = run.times_us
    return 0 < i < len(t) - 1 and t[i] > 2 * t[i - 1] and t[i] > 2 * t[i + 1]


#: A model as the scorer sees it: (cluster, run, size) -> (time in us, "Algo/Proto" chosen)
Predictor = Callable[[Cluster, Run, int], tuple[float, str] | None]


def points(systems: list[System], predict: Predictor,
           skip: Callable[[Run, int], bool] | None = None) -> Iterator[Point]:
    """Every measured point scored (``skip(run, size)``: points left out, e.g. those a
    calibration used)."""

    for sys_ in systems:
        for run in sys_.runs:
            times = run.times_us or (None,) * len(run.sizes)
            for size, t, b in zip(run.sizes, times, run.busbw_gbps, strict=True):
                if skip is not None and skip(run, size):
                    continue
                if t is None and b <= 0:
                    continue  # a busbw-only point rounded to 0: nothing to compare
                got = predict(sys_.cluster, run, size)
                if got is None:  # the predictor does not price this collective
                    continue
                pt, choice = got
                glitch = spike(run, size)
                pb = size * bus_factor(run.collective, run.n_ranks) / (pt * 1e3)
                err = abs(t / pt - 1) if t is not None else abs(pb / b - 1)
                yield Point(run, size, t, b, pt, pb, choice, err, glitch)


@dataclass
class Score:
    """Mean absolute errors: per system, pooled, by band (anomalous runs apart)."""

    per_system: dict[str, list[float]] = field(default_factory=dict)
    bands: dict[str, list[float]] = field(default_factory=dict)
    anomalous: list[float] = field(default_factory=list)

    def add(self, p: Point) -> None:
        """Count one point."""
        if p.run.anomaly or p.glitch:
            self.anomalous.append(p.error)
            return
        self.per_system.setdefault(p.run.system, []).append(p.error)
        self.bands.setdefault(p.band, []).append(p.error)

    @property
    def pooled(self) -> float:
        """Mean error over every non-anomalous point."""
        every = [e for v in self.per_system.values() for e in v]
        return statistics.fmean(every) if every else math.nan

    @property
    def n_points(self) -> int:
        """Non-anomalous points scored."""
        return sum(len(v) for v in self.per_system.values())

    def band(self, name: str) -> float:
        """Mean error in one band (nan when empty)."""
        v = self.bands.get(name, [])
        return statistics.fmean(v) if v else math.nan

    def system(self, name: str) -> float:
        """One system's mean error."""
        return statistics.fmean(self.per_system[name])

    def record(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "all": self.pooled, "points": self.n_points,
            "bands": {name: self.band(name) for name, _, _ in BANDS},
            "anomalous": {"points": len(self.anomalous),
                          "mean": statistics.fmean(self.anomalous) if self.anomalous else None},
        }
