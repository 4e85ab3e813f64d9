"""A cluster's nccl-tests logs against what the NCCL model says the cluster should give.

Every measured size (out-of-place) gets the model's prediction on the cluster as described
(a preset or a calibrated file) and the error ``predicted busbw / measured busbw - 1``
(> 0: the measurement falls short). A size is *outside* what the cluster should give when
its time differs from the prediction by more than the model's own uncertainty there, which
the model's terms set: the predicted time is a launch/latency part and a bytes part
(:class:`~ringtree.cost.nccl.timing.NcclCall`), and each carries its allowance --
:data:`BANDWIDTH_ALLOWANCE` for the bytes' share (line rates are datasheet figures),
:data:`LATENCY_ALLOWANCE` for the rest (launch floors differ 3.5x between hosts with the same
GPUs) or :data:`CALIBRATED_LATENCY_ALLOWANCE` once the file sets the cluster's floor. So the
same 50 % shortfall is a finding at 1 GiB and not at 8 KiB of an uncalibrated preset.

Consecutive sizes outside make a finding (:class:`Finding`): latency-bound (the latency part
dominates) or bandwidth-bound, and for a bandwidth-bound shortfall the causes the model can
tell apart, each by pricing the cluster as that cause would leave it and comparing with the
measurement (:data:`MATCH`): fewer NICs per node than the preset has, NVLS not in use, the
GPUs talking over PCIe instead of NVLink, no GPUDirect RDMA (network data staged in host
memory). Tests of one shape over different hosts (pairwise runs) name the slow node: the host
in every slow run and in none of the others.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ringtree.collectives import bus_factor
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import timing, tuner
from ringtree.cost.nccl.topology import topology
from ringtree.errors import RingtreeError
from ringtree.measure import published
from ringtree.measure.nccl_fit import pairs_of
from ringtree.measure.nccl_tests import Test, size_label

#: Allowed excess of the bytes' part of the time: the largest mean error of one published
#: system at >= 64 MiB is 19.7 % (AWS p5 over EFA, docs/nccl-model.md).
BANDWIDTH_ALLOWANCE = 0.25
#: Allowed excess of the launch/latency part on a preset: 8-byte floors of 13 to 45 us with the
#: same GPUs (AWS p5, Azure ND A100 v4; docs/nccl-model.md), 45 / 13 - 1.
LATENCY_ALLOWANCE = 2.5
#: The same once the cluster file sets its own floor (launch_us or net_hop_us): the model's mean
#: error at 64 KiB - 64 MiB on systems it was not fitted on is 17 % (docs/nccl-model.md).
CALIBRATED_LATENCY_ALLOWANCE = 0.5
#: A cause matches when its busbw is within this of the measured one (median over the sizes).
MATCH = 0.15


@dataclass(frozen=True)
class Check:
    """One measured size against the model. ``error`` = predicted / measured busbw - 1;
    ``bytes_share``: the bytes' part of the predicted time; ``allowed``: the excess of
    either time over the other that is still within what the model can tell."""

    test: Test
    run: published.Run
    size_bytes: int
    measured_us: float
    predicted_us: float
    measured_busbw_gbps: float
    predicted_busbw_gbps: float
    choice: str
    bytes_share: float
    allowed: float

    @property
    def error(self) -> float:
        """predicted / measured busbw - 1 (> 0: the measurement falls short)."""
        return self.measured_us / self.predicted_us - 1

    @property
    def outside(self) -> int:
        """+1 slower than the cluster should be, -1 faster, 0 within the allowance."""
        if self.measured_us > self.predicted_us * (1 + self.allowed):
            return 1
        return -1 if self.predicted_us > self.measured_us * (1 + self.allowed) else 0

    def record(self) -> dict[str, Any]:
        """Plain data (``validate --nccl-tests --json`` rows)."""
        r = self.run
        return {
            "collective": r.collective.value, "test": f"{self.test.test}_perf",
            "nodes": r.nodes, "gpus_per_node": r.gpus_per_node, "size_bytes": self.size_bytes,
            "measured_time_us": self.measured_us, "predicted_time_us": self.predicted_us,
            "measured_busbw_gbps": self.measured_busbw_gbps,
            "predicted_busbw_gbps": self.predicted_busbw_gbps, "error": self.error,
            "nccl": self.choice, "bytes_share": self.bytes_share, "allowed": self.allowed,
            "outside": self.outside, "log": self.test.source, "line": self.test.line,
        }


@dataclass(frozen=True)
class Finding:
    """Sizes where a test falls outside what the cluster should give, and why."""

    sizes: tuple[int, ...]
    kind: str
    message: str

    def record(self) -> dict[str, Any]:
        """Plain data."""
        return {"sizes": list(self.sizes), "kind": self.kind, "message": self.message}


@dataclass(frozen=True)
class Validation:
    """Every check and finding of the logs on ``cluster``."""

    cluster: Cluster
    checks: tuple[Check, ...]
    findings: tuple[Finding, ...]

    @property
    def median_abs_error(self) -> float:
        """Median |error| over every check."""
        return statistics.median(abs(c.error) for c in self.checks)

    def record(self) -> dict[str, Any]:
        """Plain data (``validate --nccl-tests --json``)."""
        return {
            "cluster": self.cluster.key, "rows": [c.record() for c in self.checks],
            "median_abs_error": self.median_abs_error,
            "mean_abs_error": statistics.fmean(abs(c.error) for c in self.checks),
            "findings": [f.record() for f in self.findings],
        }


def predict(cluster: Cluster, run: published.Run, sizes: Sequence[int],
            env: dict[str, str] | None = None) -> list[timing.NcclCall]:
    """The model's calls for ``run``'s shape on ``cluster`` (``env`` over the run's)."""
    topo = topology(cluster, run.nodes, run.gpus_per_node)
    settings = tuner.Settings.for_cluster(cluster, {**run.env, **(env or {})})
    return [timing.predict_on(run.collective, s, topo, settings) for s in sizes]


def _latency_allowance(cluster: Cluster, nodes: int) -> float:
    calibrated = cluster.launch_us if nodes == 1 else cluster.net_hop_us
    return CALIBRATED_LATENCY_ALLOWANCE if calibrated is not None else LATENCY_ALLOWANCE


def checks_of(test: Test, run: published.Run, cluster: Cluster) -> list[Check]:
    """One :class:`Check` per size of ``run`` (published's isolated spikes left out)."""
    out = []
    lat_allowed = _latency_allowance(cluster, run.nodes)
    factor = bus_factor(run.collective, run.n_ranks)
    calls = predict(cluster, run, run.sizes)
    for size, t, call in zip(run.sizes, run.times_us or (), calls, strict=True):
        if published.spike(run, size):
            continue
        p_us = call.time_s * 1e6
        rest = max(call.host_s, call.latency_s) * 1e6
        share = call.bandwidth_s * 1e6 / (call.bandwidth_s * 1e6 + rest) if p_us > 0 else 0.0
        allowed = share * BANDWIDTH_ALLOWANCE + (1 - share) * lat_allowed
        out.append(Check(test, run, size, t, p_us, size * factor / (t * 1e3),
                         call.busbw_Bps / 1e9, call.nccl_name, share, allowed))
    return out


def validate(tests: Sequence[Test], cluster: Cluster,
             env: dict[str, str] | None = None) -> Validation:
    """Every test the model prices against ``cluster``: checks and findings (module doc);
    ``env``: the NCCL_* settings the tests ran with, where their logs do not say."""
    checks: list[Check] = []
    findings: list[Finding] = []
    per_run: list[list[Check]] = []
    for test, run in pairs_of(tests, cluster.key, env):
        mine = checks_of(test, run, cluster)
        checks += mine
        per_run.append(mine)
        for band in _bands(mine):
            findings.append(_finding(band, cluster))
    if not checks:
        raise RingtreeError("no size of the logs can be compared (sizes of 0 or spikes only)")
    findings += _slow_nodes(per_run)
    return Validation(cluster, tuple(checks), tuple(findings))


def _bands(checks: list[Check]) -> list[list[Check]]:
    """Runs of consecutive sizes outside the allowance on the same side."""
    bands: list[list[Check]] = []
    prev = 0
    for c in checks:
        side = c.outside
        if side and side == prev:
            bands[-1].append(c)
        elif side:
            bands.append([c])
        prev = side
    return bands


def _shape(c: Check) -> str:
    r = c.run
    return f"{c.test.test}_perf on {r.nodes} x {r.gpus_per_node} GPUs"


def _span(band: list[Check]) -> str:
    lo, hi = band[0].size_bytes, band[-1].size_bytes
    return size_label(lo) if lo == hi else f"{size_label(lo)} - {size_label(hi)}"


def _finding(band: list[Check], cluster: Cluster) -> Finding:
    """The finding of one band of consecutive sizes outside the allowance."""
    sizes = tuple(c.size_bytes for c in band)
    last = band[-1]
    gap = statistics.median(c.measured_us / c.predicted_us - 1 for c in band)
    where = f"{_shape(last)}, {_span(band)}"
    if band[0].outside < 0:
        return Finding(sizes, "faster-than-model", (
            f"{where}: {-gap / (1 + gap):.0%} faster than {cluster.key} should be (busbw "
            f"{last.measured_busbw_gbps:.1f} GB/s at {size_label(last.size_bytes)}, model "
            f"{last.predicted_busbw_gbps:.1f}): the cluster has more than its description "
            "says (NICs, SHARP, a faster launch), or the model is off here; fit it with "
            "'ringtree calibrate --nccl-tests'"))
    share = statistics.median(c.bytes_share for c in band)
    if share < 0.5:
        return Finding(sizes, "latency-bound", (
            f"{where} (latency-bound: launch and per-step latency are {1 - share:.0%} of the "
            f"model's time): {last.measured_us:.1f} us where {cluster.key} should take "
            f"{last.predicted_us:.1f} us (+{gap:.0%}): the host's launch cost or the network's "
            "per-step latency is higher than the cluster's description; if it is the cluster "
            "as it is, fit its floor with 'ringtree calibrate --nccl-tests'; otherwise check "
            "CPU frequency scaling and core affinity of the ranks, and NCCL_DEBUG=INFO for "
            "the transport NCCL chose (NET/Socket where IB or EFA was meant)"))
    head = (f"{where} (bandwidth-bound: the bytes are {share:.0%} of the model's time): busbw "
            f"{last.measured_busbw_gbps:.1f} GB/s at {size_label(last.size_bytes)}, "
            f"{gap / (1 + gap):.0%} below the {last.predicted_busbw_gbps:.1f} GB/s "
            f"{cluster.key} should give")
    causes = _causes(band, cluster)
    if not causes:
        return Finding(sizes, "bandwidth-bound", head + (
            ". No cause the model knows gives this busbw (fewer NICs, NVLS off, PCIe "
            "instead of NVLink, no GPUDirect RDMA): check for other jobs on the links, "
            "throttled GPUs (nvidia-smi -q -d PERFORMANCE), and NCCL_DEBUG=INFO's channels"))
    kind, text = causes[0]
    also = "; or " + "; or ".join(t for _, t in causes[1:]) if len(causes) > 1 else ""
    return Finding(sizes, kind, f"{head}. It matches {text}{also}")


def _causes(band: list[Check], cluster: Cluster) -> list[tuple[str, str]]:
    """The causes whose busbw matches the band's (best first): (kind, words)."""
    run, sizes = band[0].run, [c.size_bytes for c in band]
    measured = [c.measured_busbw_gbps for c in band]
    found: list[tuple[float, str, str]] = []
    for kind, variant, env, words in _variants(cluster, run, band):
        calls = predict(variant, run, sizes, env)
        bus = [c.busbw_Bps / 1e9 for c in calls]
        miss = statistics.median(abs(b / m - 1) for b, m in zip(bus, measured, strict=True))
        if miss <= MATCH:
            found.append((miss, kind, f"{words} ({bus[-1]:.1f} GB/s): {ADVICE[kind]}"))
    return [(k, t) for _, k, t in sorted(found)]


ADVICE = {
    "fewer-nics": "check that every NIC is up and used (ibstat, fi_info -p efa; NCCL_DEBUG="
                  "INFO's 'NET/' lines list the ones NCCL took), NCCL_IB_HCA or "
                  "NCCL_SOCKET_IFNAME, and that each GPU has a NIC on its PCIe switch",
    "nvls-off": "check NCCL_NVLS_ENABLE, that nvidia-fabricmanager runs (and IMEX on GB200), "
                "and that NCCL_DEBUG=INFO names NVLS among the algorithms",
    "pcie-bound": "check nvidia-smi topo -m and nvidia-smi nvlink -s for NVLink, "
                  "NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, and that the GPUs are not split "
                  "across VMs or containers without NVLink",
    "no-gpudirect-rdma": "check the nvidia-peermem (or dmabuf) module, NCCL_NET_GDR_LEVEL, "
                         "ACS on the PCIe switches, and that NCCL_DEBUG=INFO's channel "
                         "lines say GDRDMA",
}


def _variants(cluster: Cluster, run: published.Run,
              band: list[Check]) -> list[tuple[str, Cluster, dict[str, str], str]]:
    """The cluster as each cause would leave it: (kind, cluster, NCCL_* env, words)."""
    out: list[tuple[str, Cluster, dict[str, str], str]] = []
    if run.nodes > 1 and cluster.nics_per_node > 1:
        out += _fewer_nics(cluster, run, band)
    if cluster.nvls and any(c.choice.startswith("NVLS") for c in band):
        out.append(("nvls-off", cluster, {"NCCL_NVLS_ENABLE": "0"},
                    "NCCL without NVLS (NCCL_NVLS_ENABLE=0)"))
    if cluster.fabric in ("nvswitch", "nvlink") and run.gpus_per_node > 1:
        out.append(("pcie-bound", replace(cluster, fabric="pcie", nvls=False), {},
                    f"the GPUs of a node talking over PCIe Gen{cluster.gpu.pcie_gen}, not "
                    "NVLink"))
    if run.nodes > 1 and cluster.nics_per_node:
        # without GPUDirect RDMA every network byte is staged in host memory: the host's PCIe
        # links carry each GPU's sends in and the NICs' receives in, so a node moves at
        # most half its GPUs' PCIe bandwidth through the network
        cap = run.gpus_per_node * cluster.gpu.pcie_GBps / 2
        share = run.gpus_per_node / cluster.gpus_per_node
        if cap < cluster.node_network_GBps * share:
            nic = cap / (cluster.nics_per_node * share) * 8
            out.append(("no-gpudirect-rdma", replace(cluster, nic_gbps=nic), {},
                        "network data staged in host memory (no GPUDirect RDMA: at most "
                        f"{cap:.0f} GB/s per node through PCIe)"))
    return out


def _fewer_nics(cluster: Cluster, run: published.Run,
                band: list[Check]) -> list[tuple[str, Cluster, dict[str, str], str]]:
    """The node with the NIC count (1 .. all but one) whose busbw is nearest the band's."""
    measured = [c.measured_busbw_gbps for c in band]
    best: tuple[float, int] | None = None
    for k in range(1, cluster.nics_per_node):
        calls = predict(replace(cluster, nics_per_node=k), run, [c.size_bytes for c in band])
        miss = statistics.median(abs(math.log(c.busbw_Bps / 1e9 / m))
                                 for c, m in zip(calls, measured, strict=True))
        if best is None or miss < best[0]:
            best = (miss, k)
    if best is None:
        return []
    k = best[1]
    return [("fewer-nics", replace(cluster, nics_per_node=k), {},
             f"{k} of the {cluster.nics_per_node} NICs per node "
             f"({k * cluster.nic_gbps:g} of {cluster.nics_per_node * cluster.nic_gbps:g} Gb/s)")]


def _slow_nodes(per_run: list[list[Check]]) -> list[Finding]:
    """The host in every slow run of a shape and in none of its other runs, when tests of
    the same collective and shape ran over different hosts (pairwise sweeps)."""
    groups: dict[tuple, list[list[Check]]] = {}
    for checks in per_run:
        if checks and checks[0].run.nodes > 1:
            r = checks[0].run
            groups.setdefault((r.collective, r.nodes, r.gpus_per_node), []).append(checks)
    out = []
    for runs in groups.values():
        if len({c[0].test.hosts for c in runs}) < 3:
            continue
        slow = [c for c in runs if any(x.outside > 0 and x.bytes_share >= 0.5 for x in c)]
        fast = [c for c in runs if c not in slow]
        if not slow or not fast:
            continue
        suspects = set.intersection(*(set(c[0].test.hosts) for c in slow))
        suspects -= set().union(*(set(c[0].test.hosts) for c in fast))
        if suspects:
            sizes = sorted({x.size_bytes for c in slow for x in c if x.outside > 0})
            names = ", ".join(sorted(suspects))
            out.append(Finding(tuple(sizes), "slow-node", (
                f"{_shape(slow[0][0])}: {names} is in all {len(slow)} runs that fall short "
                f"at bandwidth-bound sizes and in none of the {len(fast)} that do not: check "
                "that node (its NICs and cables, GPU clocks and temperature, NVLink errors in "
                "nvidia-smi nvlink -e) or leave it out")))
    return out
