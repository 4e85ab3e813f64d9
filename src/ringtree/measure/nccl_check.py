"""ringtree's NCCL model against published nccl-tests results: calibration, fit and check sets.

What is measured where (docs/nccl-model.md says it in prose):

* **fit set** (:data:`FIT_SYSTEMS`): the systems the model's global constants were fitted on
  (``bench/fit_nccl_model.py``); the other systems are the **check set**, which no constant saw.
* **floor calibration** (:func:`calibrate`): a cluster's launch floor depends on its host,
  driver and NCCL build (13-45 us for an 8-byte all-reduce on one node of the same GPUs), so
  each system's latency floor -- the median time of one run's sizes up to 4 KiB, or its
  smallest size up to 1 MiB when it has none that small -- sets one constant
  (``launch_us`` from a one-node run, else the network's hop latency ``net_hop_us``). The
  points it used are not scored; every other one is. ``calibrated=False`` scores every point
  with the presets' defaults instead.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from ringtree.collectives import bus_factor
from ringtree.cost.clusters import Cluster
from ringtree.cost.nccl import timing, tuner
from ringtree.cost.nccl.topology import topology
from ringtree.measure.published import Point, Predictor, Run, Score, System, points

#: Systems the model's fitted constants were fitted on (bench/fit_nccl_model.py).
FIT_SYSTEMS = frozenset({
    "h100-single-node-together-nccl-tests",  # one H100 node: Ring, NVLS, all-gather, reduce-scatter
    "dgx-h100-dgxc-benchmarking",  # one DGX H100, NCCL's own choice, a fast host
    "alcf-sophia-dgx-a100-alcf-nccl-tests",  # 2 DGX A100 nodes over HDR InfiniBand
    "aws-p5-eks-keitaw-nccl-test",  # 2 H100 nodes over EFA
    "gcp-a3mega-tcpxo-lessizzmore",  # 2 H100 nodes over GPUDirect-TCPXO
    "coreweave-gb200-nvl72-1rack-nccl-tests",  # one GB200 NVL72 rack: the MNNVL ring's NVLink
})
#: Only sizes up to this are used to calibrate a latency (larger ones measure bandwidth).
CALIBRATION_MAX_BYTES = 1 << 20


def predictor(params: timing.Params = timing.DEFAULT) -> Predictor:
    """The scorer's view of the model: (cluster, run, size) -> (time us, "Algo/Proto"), with
    NCCL's tuner as the run's NCCL release has it where releases differ (tuner.Settings)."""
    cache: dict[tuple, tuple] = {}

    def predict(cluster: Cluster, run: Run, size: int) -> tuple[float, str]:
        version = run.nccl_version[:2] if run.nccl_version else None
        key = (cluster, run.collective, run.nodes, run.gpus_per_node,
               tuple(sorted(run.env.items())), version)
        if key not in cache:
            topo = topology(cluster, run.nodes, run.gpus_per_node)
            settings = tuner.Settings.for_cluster(cluster, run.env, version)
            entries = (tuner.table(run.collective, topo, settings)
                       if run.collective in tuner.NCCL_COLLECTIVES else None)
            cache[key] = (topo, settings, entries)
        topo, settings, entries = cache[key]
        call = timing.predict_on(run.collective, size, topo, settings, params, entries)
        return call.time_s * 1e6, call.nccl_name

    return predict


#: The sizes whose median time is a run's latency floor (none larger: they measure bandwidth).
FLOOR_MAX_BYTES = 4096


def calibration_point(system: System) -> tuple[Run, tuple[int, ...], float] | None:
    """What :func:`calibrate` uses: a run (one node if there is one), its sizes up to
    FLOOR_MAX_BYTES (the smallest size alone when none is that small, if it is at most
    CALIBRATION_MAX_BYTES), and the median time over them -- the run's latency floor; None
    when no run has such sizes. Times are the run's, or from busbw (two sources publish busbw
    only)."""
    best = None
    for run in system.runs:
        if run.anomaly:
            continue
        times = run.times_us or tuple(
            s * bus_factor(run.collective, run.n_ranks) / (b * 1e3) if b > 0 else math.inf
            for s, b in zip(run.sizes, run.busbw_gbps, strict=True)
        )
        pairs = [(s, t) for s, t in zip(run.sizes, times, strict=True) if math.isfinite(t)]
        if not pairs:
            continue
        floor = [(s, t) for s, t in pairs if s <= FLOOR_MAX_BYTES] or [min(pairs)]
        if floor[0][0] > CALIBRATION_MAX_BYTES:
            continue
        rank = (run.nodes != 1, -len(floor), floor[0][0])
        if best is None or rank < best[0]:
            sizes = tuple(s for s, _ in floor)
            best = (rank, run, sizes, statistics.median(t for _, t in floor))
    return None if best is None else best[1:]


def calibrate(system: System, params: timing.Params = timing.DEFAULT) -> System:
    """``system`` with its cluster's ``launch_us`` (a one-node run's floor) or ``net_hop_us``
    set so that the model meets the floor at its median size (unchanged without a floor)."""
    point = calibration_point(system)
    if point is None:
        return system
    run, sizes, measured = point
    size = sizes[len(sizes) // 2]
    field = "launch_us" if run.nodes == 1 else "net_hop_us"
    predict = predictor(params)
    lo, hi = 0.5, 5000.0
    for _ in range(50):  # bisection on a log scale: the time grows with either constant
        mid = (lo * hi) ** 0.5
        t, _ = predict(replace(system.cluster, **{field: mid}), run, size)
        lo, hi = (mid, hi) if t < measured else (lo, mid)
    return replace(system, cluster=replace(system.cluster, **{field: (lo * hi) ** 0.5}))


def score(systems: list[System], params: timing.Params = timing.DEFAULT,
          calibrated: bool = True) -> tuple[Score, Score, Score, list[Point]]:
    """(all, fit set, check set) scores and every point, after calibration if asked."""
    every, fit, check = Score(), Score(), Score()
    scored: list[Point] = []
    predict = predictor(params)
    for s in systems:
        used = calibration_point(s) if calibrated else None
        s2 = calibrate(s, params) if calibrated else s

        def skip(run: Run, size: int, used: tuple | None = used) -> bool:
            return used is not None and run is used[0] and size in used[1]

        for p in points([s2], predict, skip):
            every.add(p)
            (fit if s.name in FIT_SYSTEMS else check).add(p)
            scored.append(p)
    return every, fit, check, scored
