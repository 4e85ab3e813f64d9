"""The NCCL model fitted to a cluster's nccl-tests logs: half of a published log's sizes
predict the other half; constants known to the test (it made the measurements) are
recovered; constants a log cannot tell are left alone; the cluster file's overrides are
what the model uses."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ringtree.collectives import Collective, bus_factor
from ringtree.cost.clusters import cluster_from_table, get_cluster
from ringtree.cost.nccl import timing
from ringtree.errors import RingtreeError
from ringtree.measure import nccl_diagnose, nccl_fit
from ringtree.measure import nccl_tests as nt
from ringtree.measure.nccl_lines import Device, Row, Timing
from ringtree.measure.nccl_tests import parse_file

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

DATA = Path(__file__).parent / "data" / "nccl_tests"
P5 = DATA / "keitaw-p5-2x8-h100-all_reduce-info-tagged.log"


def halves(path: Path) -> tuple[nt.Test, nt.Test]:
    (t,) = parse_file(path)
    return replace(t, rows=t.rows[0::2]), replace(t, rows=t.rows[1::2])


def test_half_the_sizes_of_a_published_log_predict_the_other_half_within_10_percent():
    even, odd = halves(P5)
    cal = nccl_fit.fit([even], get_cluster("aws-p5"))
    after = nccl_diagnose.validate([odd], cal.cluster).median_abs_error
    before = nccl_diagnose.validate([odd], get_cluster("aws-p5")).median_abs_error
    assert after <= 0.10 and after < before
    assert cal.held_back_median_abs_error is not None and cal.held_back_median_abs_error < 0.15
    assert len(cal.held_back) == 4 and cal.fit_points == 12
    assert cal.fit_mean_abs_error < cal.uncalibrated_mean_abs_error


def synthetic(cluster, nodes: int, exps: range) -> nt.Test:  # noqa: ANN001
    """An all_reduce_perf log whose times are the model's on ``cluster`` (the truth)."""
    gpn = cluster.gpus_per_node
    n = nodes * gpn
    rows = []
    for i, e in enumerate(exps):
        size = 1 << e
        call = timing.predict("all-reduce", size, cluster, nodes)
        t = call.time_s * 1e6
        bus = size / (t * 1e3) * bus_factor(Collective.ALL_REDUCE, n)
        rows.append(Row(i + 1, size, size // 4, "float", "sum", -1,
                        Timing(t, size / (t * 1e3), bus, 0), None))
    devices = tuple(Device(r, r, f"node{r // gpn}", r % gpn, "NVIDIA H100 80GB HBM3")
                    for r in range(n))
    return nt.Test("synthetic.log", 1, "all_reduce", Collective.ALL_REDUCE, n, tuple(rows), devices)


def test_the_fit_recovers_what_made_the_measurements():
    base = get_cluster("dgx-h100")
    truth = replace(base, net_hop_us=20.0, nccl_model=(("net_efficiency", 0.4),))
    log = synthetic(truth, 2, range(3, 34, 1))
    cal = nccl_fit.fit([log], base)
    assert cal.held_back_median_abs_error < 0.02  # sizes the fit did not see
    assert cal.cluster.net_hop_us == pytest.approx(20.0, rel=0.05)
    got = nccl_fit.value_of(cal.cluster, "nccl_model_multinode.net_efficiency")
    assert got == pytest.approx(0.4, rel=0.05)


def test_a_multi_node_log_leaves_one_node_calls_alone_and_a_one_node_log_the_network():
    even, _ = halves(P5)
    preset = get_cluster("aws-p5")
    two = nccl_fit.fit([even], preset)
    assert two.tried and all(k.startswith("nccl_model_multinode.") for k in two.tried)
    assert not any(k.endswith(("nvlink_efficiency", "intra_latency_scale")) for k in two.tried)
    for size in (8, 1 << 16, 1 << 24, 1 << 30):  # one node: the preset's prediction
        assert timing.predict("all-reduce", size, two.cluster, 1).time_s == timing.predict(
            "all-reduce", size, preset, 1).time_s
    assert timing.predict("all-reduce", 1 << 24, two.cluster, 2).time_s != timing.predict(
        "all-reduce", 1 << 24, preset, 2).time_s
    one = nccl_fit.fit(parse_file(DATA / "issue290-1x8-h100-one-process.log"),
                       get_cluster("dgx-h100"), hold_back=0)
    assert all(k.startswith("nccl_model.") and ".net_" not in k for k in one.tried)
    assert one.held_back == () and one.held_back_median_abs_error is None


def test_every_kth_size_from_the_second_is_held_back():
    (run,) = nccl_fit.runs_of(parse_file(DATA / "issue290-2x8-h100-srun-label.log"))
    fit, held, sizes = nccl_fit.split([run], 4)
    assert sizes == tuple(8388608 << i for i in (1, 5, 9))
    assert held[0].sizes == sizes and len(fit[0].sizes) == 8
    assert set(fit[0].sizes).isdisjoint(sizes)


def test_too_little_to_fit_and_nothing_the_model_prices_are_refused():
    (t,) = parse_file(DATA / "issue290-1x8-h100-one-process.log")
    with pytest.raises(RingtreeError, match="too few to fit"):
        nccl_fit.fit([replace(t, rows=t.rows[:3])], get_cluster("dgx-h100"))
    sendrecv = [x for x in parse_file(DATA / "xxrjun-10x8-h100-five-tests.log")
                if x.test == "sendrecv"]
    with pytest.raises(RingtreeError, match=r"no test the NCCL model prices .*sendrecv_perf"):
        nccl_fit.fit(sendrecv, get_cluster("dgx-h100"))


def test_a_cluster_file_s_nccl_model_is_what_the_model_uses():
    c = cluster_from_table("mine", {"preset": "dgx-h100", "nccl_model": {
        "net_efficiency": 0.5, "nvls_latency_scale": 2.0}}, "test")
    p = replace(timing.DEFAULT, net_efficiency=(("ib", 0.5),), nvls_latency_scale=2.0)
    base = get_cluster("dgx-h100")
    for size in (8, 1 << 20, 1 << 30):
        got = timing.predict("all-reduce", size, c, 2)
        want = timing.predict("all-reduce", size, base, 2, params=p)
        assert got.time_s == want.time_s
    assert timing.predict("all-reduce", 1 << 30, c, 2).time_s > timing.predict(
        "all-reduce", 1 << 30, base, 2).time_s
    across = cluster_from_table("across", {"preset": "dgx-h100", "nccl_model_multinode": {
        "net_efficiency": 0.5, "nvls_latency_scale": 2.0}}, "test")
    assert timing.predict("all-reduce", 1 << 30, across, 2).time_s == timing.predict(
        "all-reduce", 1 << 30, c, 2).time_s
    assert timing.predict("all-reduce", 1 << 26, across, 1).time_s == timing.predict(
        "all-reduce", 1 << 26, base, 1).time_s != timing.predict(
        "all-reduce", 1 << 26, c, 1).time_s  # NVLS on one node: c's latency scale
    for bad in ({"nvlink_links": 1.0}, {"net_efficiency": "fast"}, {"net_efficiency": -1}):
        with pytest.raises(RingtreeError, match=r"^test: nccl_model and nccl_model_multinode"):
            cluster_from_table("bad", {"preset": "dgx-h100", "nccl_model": bad}, "test")


def test_each_type_of_a_d_all_run_is_a_run_of_its_own():
    """``-d all`` prints a row per type at each size: one run per (type, op, root)."""
    (t,) = parse_file(DATA / "issue290-1x8-h100-one-process.log")
    halves_ = tuple(replace(r, dtype="half", count=r.count * 2) for r in t.rows)
    mixed = replace(t, rows=tuple(x for pair in zip(t.rows, halves_, strict=True) for x in pair))
    runs = nccl_fit.runs_of([mixed])
    assert len(runs) == 2 and runs[0].sizes == runs[1].sizes == tuple(r.size_bytes
                                                                       for r in t.rows)
