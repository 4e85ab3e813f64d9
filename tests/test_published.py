"""Published nccl-tests results (bench/published, ringtree.measure.published), the rules that set
runs apart (on small synthetic systems), the scoring (ringtree.measure.nccl_check) and the two
scripts: bench/model_vs_published.py --json with the model's acceptance bounds, and
bench/fit_nccl_model.py.

The data are checked against nccl-tests' own arithmetic (PERFORMANCE.md: busbw = size x
2(n-1)/n, (n-1)/n or 1 over the time), which also confirms each run's rank count."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import math
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from ringtree.collectives import Collective
from ringtree.cost.nccl.topology import topology
from ringtree.errors import RingtreeError
from ringtree.measure import nccl_check, published

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "bench" / "published"
FILES = sorted(FOLDER.glob("*.toml"))
MiB, GiB = 2**20, 2**30


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ the data


def test_there_is_data():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_file_parses_with_a_source_and_a_cluster(path):
    raw = tomllib.loads(path.read_text())
    assert "cluster" in raw and isinstance(raw["cluster"], dict)
    s = published.load_system(path)
    assert s.name == raw["system"]["name"]
    assert s.source.startswith("https://") and s.citation.strip()
    assert s.runs
    for run in s.runs:
        assert len(run.sizes) == len(run.busbw_gbps) >= 1
        assert list(run.sizes) == sorted(set(run.sizes)) and run.sizes[0] > 0
        if run.times_us is not None:
            assert len(run.times_us) == len(run.sizes) and min(run.times_us) > 0
        assert 1 <= run.gpus_per_node <= s.cluster.gpus_per_node
        topology(s.cluster, run.nodes, run.gpus_per_node)  # the model can price the run


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_busbw_is_nccl_tests_arithmetic_on_the_time(path):
    """busbw = size x factor / time, within the printed rounding (busbw to 0.01 GB/s, time to
    0.01 us or 1 us): checks the copy and the rank count of every run."""
    for run in published.load_system(path).runs:
        if run.times_us is None:
            continue
        n = run.n_ranks
        factor = {Collective.ALL_REDUCE: 2 * (n - 1) / n, Collective.ALL_GATHER: (n - 1) / n,
                  Collective.REDUCE_SCATTER: (n - 1) / n,
                  Collective.ALL_TO_ALL: (n - 1) / n}.get(run.collective, 1.0)
        for size, t, b in zip(run.sizes, run.times_us, run.busbw_gbps, strict=True):
            want = size * factor / (t * 1e3)
            unit = 1.0 if t == int(t) and t > 1000 else 0.01
            tol = 0.0051 + want * (unit / 2 / t + 1e-3)
            assert abs(want - b) <= tol, (run.collective.value, size, t, b, want)


def test_the_fit_set_is_in_the_data():
    names = {published.load_system(p).name for p in FILES}
    assert set(nccl_check.FIT_SYSTEMS) <= names
    assert len(nccl_check.FIT_SYSTEMS) < len(names)  # there is a check set


def test_the_real_data_sets_a_contradicted_run_apart():
    # OCI BM.GPU4.8, 2 nodes, 10 GiB: 57 GB/s on one page, 223 GB/s on another
    (oci,) = [s for s in published.load(FOLDER) if s.name.startswith("oci-bm-gpu4-8")]
    two = [r for r in oci.runs if r.nodes == 2]
    assert sorted(bool(r.anomaly) for r in two) == [False, True]
    (low,) = [r for r in two if r.anomaly]
    assert max(low.busbw_gbps) < min(max(r.busbw_gbps) for r in two if not r.anomaly) / 1.3


# ------------------------------------------------------------------ set-apart rules


def run(sizes, busbw, *, nodes=2, gpus=8, times=None, env="", versions="", collective="all-reduce",
        anomaly=None) -> dict:
    r = {"collective": collective, "nodes": nodes, "gpus_per_node": gpus, "env": env,
         "versions": versions, "size_bytes": sizes, "busbw_gbps": busbw,
         "time_us": times or []}
    if anomaly:
        r["anomaly"] = anomaly
    return r


def write(tmp_path: Path, runs: list[dict], name: str = "synthetic",
          cluster: str = 'preset = "dgx-a100"') -> Path:
    lines = ["[system]", f'name = "{name}"', 'source = "https://example.org/results"',
             'citation = "a test"', "", "[cluster]", cluster]
    for r in runs:
        lines += ["", "[[runs]]", *(f"{k} = {json.dumps(v)}" for k, v in r.items())]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def set_apart(tmp_path, runs, **kw) -> list[str]:
    (s,) = published.load(write(tmp_path, runs, **kw).parent)
    return [r.anomaly for r in s.runs]


SIZES = [64 * MiB, 256 * MiB, GiB]


def test_a_run_contradicted_by_the_same_settings_is_set_apart(tmp_path):
    why = set_apart(tmp_path, [run(SIZES, [100, 120, 150]), run(SIZES, [130, 140, 150])])
    assert why[1] == ""
    assert "130" in why[0] and str(64 * MiB) in why[0]


def test_a_smaller_gap_is_not_a_contradiction(tmp_path):
    assert set_apart(tmp_path, [run(SIZES, [100, 120, 150]), run(SIZES, [129.9, 150, 190])]) \
        == ["", ""]


def test_only_sizes_from_64_mib_count(tmp_path):
    small = [MiB, 32 * MiB, 64 * MiB]
    assert set_apart(tmp_path, [run(small, [10, 50, 100]), run(small, [40, 100, 120])]) == ["", ""]


def test_only_runs_of_the_same_shape_and_nccl_settings_compare(tmp_path):
    assert set_apart(
        tmp_path, [run(SIZES, [100, 120, 150]), run(SIZES, [200, 200, 200], env="NCCL_ALGO=Tree")]
    ) == ["", ""]
    assert set_apart(
        tmp_path, [run(SIZES, [100, 120, 150]), run(SIZES, [200, 200, 200], nodes=4)]
    ) == ["", ""]
    assert set_apart(
        tmp_path,
        [run(SIZES, [100, 120, 150], collective="all-gather"), run(SIZES, [200, 200, 200])],
    ) == ["", ""]
    # settings other than NCCL_ALGO/PROTO/NVLS/COLLNET/PAT do not make a run different
    why = set_apart(
        tmp_path,
        [
            run(SIZES, [100, 120, 150], env="NCCL_IB_GID_INDEX=3"),
            run(SIZES, [200, 200, 200], env="UCX_NET_DEVICES=eth0"),
        ],
    )
    assert why[0] and not why[1]


@pytest.mark.parametrize(
    ("versions", "apart"),
    [("NCCL 2.11.4", True), ("nccl-tests 2.13.9, NCCL 2.9.9", True), ("NCCL v2.7.8", True),
     ("NCCL 2.12.12", False), ("NCCL 2.26.2 (nccl-library=22602)", False), ("", False)],
)
def test_nccl_older_than_2_12_is_set_apart(tmp_path, versions, apart):
    (why,) = set_apart(tmp_path, [run([8, 1024], [0.01, 1.0], nodes=1, versions=versions)])
    assert bool(why) is apart
    if apart:
        assert "older" in why


@pytest.mark.parametrize(
    ("versions", "want"),
    [("NCCL 2.26.2 (README: 'The following runs used NCCL 2.26.2')", (2, 26, 2)),
     ("nccl-tests 2.13.9, NCCL v2.21.5", (2, 21, 5)), ("CUDA 12.8.1", None), ("", None)],
)
def test_a_runs_nccl_release_comes_from_its_versions(versions, want):
    r = published.Run("s", Collective.ALL_REDUCE, 1, 8, {}, (8,), None, (0.1,),
                      versions=versions)
    assert r.nccl_version == want


def test_the_scorer_prices_each_run_with_its_own_nccl_release():
    # CoreWeave's 20 GB200 racks ran NCCL 2.26.2: its tree, not 2.30's LL128 ring, at 16 GiB
    (system,) = [s for s in published.load(FOLDER) if "multirack" in s.name]
    run = next(r for r in system.runs if r.nodes == 20)
    predict = nccl_check.predictor()
    assert predict(system.cluster, run, 16 * GiB)[1] == "Tree/Simple"
    newer = replace(run, versions="NCCL 2.30.7")
    assert predict(system.cluster, newer, 16 * GiB)[1] == "Ring/LL128"


@pytest.mark.parametrize(
    ("nodes", "gpus", "top", "best", "apart"),
    # 8 x 200 Gb/s = 200 GB/s of NICs per node; a quarter is 50 (25 with 4 of 8 GPUs)
    [(2, 8, GiB, 40.0, True), (2, 8, GiB, 60.0, False), (2, 8, 512 * MiB, 40.0, False),
     (1, 8, GiB, 40.0, False), (2, 4, GiB, 30.0, False), (2, 4, GiB, 20.0, True)],
)
def test_a_run_that_could_not_have_used_the_network_is_set_apart(tmp_path, nodes, gpus, top,
                                                                  best, apart):
    (why,) = set_apart(tmp_path, [run([MiB, top], [best / 2, best], nodes=nodes, gpus=gpus)])
    assert bool(why) is apart


def test_a_hand_set_anomaly_is_kept(tmp_path):
    assert set_apart(tmp_path, [run(SIZES, [1, 2, 3], anomaly="the switch was shared")]) == [
        "the switch was shared"
    ]


def test_an_isolated_spike_is_a_glitch(tmp_path):
    spiky = run([8, 16, 32, 64], [0, 0, 0, 0], nodes=1, times=[13.0, 68.0, 15.0, 80.0])
    (s,) = published.load(write(tmp_path, [spiky]).parent)
    r = s.runs[0]
    assert [published.spike(r, x) for x in r.sizes] == [False, True, False, False]
    quiet = run([8, 16, 32], [0, 0, 0], nodes=1, times=[13.0, 25.0, 15.0])
    (calm,) = published.load(write(tmp_path, [quiet]).parent)
    assert not any(published.spike(calm.runs[0], x) for x in (8, 16, 32))


def test_a_file_without_a_cluster_is_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[system]\nname = "x"\n')
    with pytest.raises(RingtreeError, match=r"bad\.toml.*\[cluster\]"):
        published.load_system(bad)
    bad.write_text("[system\n")
    with pytest.raises(RingtreeError, match="cannot read"):
        published.load_system(bad)


# ------------------------------------------------------------------ scoring


def test_errors_are_from_the_time_or_the_busbw_and_set_apart_runs_are_not_pooled(tmp_path):
    runs = [run([MiB, GiB], [10.0, 100.0], nodes=1, times=[100.0, 1000.0]),
            run([MiB, GiB], [20.0, 0.0], nodes=1, collective="all-gather"),
            run([MiB], [1.0], nodes=1, versions="NCCL 2.8.4")]
    (s,) = published.load(write(tmp_path, runs).parent)

    def predictor(cluster, r, size):  # 200 us per MiB-sized call, 500 us for 1 GiB
        return (200.0 if size == MiB else 500.0), "Ring/Simple"

    pts = list(published.points([s], predictor))
    assert len(pts) == 4  # the busbw-only point of 0 GB/s has nothing to compare
    by = {(p.run.collective, p.size, bool(p.run.anomaly)): p for p in pts}
    assert by[(Collective.ALL_REDUCE, MiB, False)].error == pytest.approx(abs(100 / 200 - 1))
    assert by[(Collective.ALL_REDUCE, GiB, False)].error == pytest.approx(abs(1000 / 500 - 1))
    ag = by[(Collective.ALL_GATHER, MiB, False)]  # busbw-only: predicted busbw over measured
    assert ag.predicted_busbw == pytest.approx(MiB * 7 / 8 / (200.0 * 1e3))
    assert ag.error == pytest.approx(abs(ag.predicted_busbw / 20.0 - 1))
    score = published.Score()
    for p in pts:
        score.add(p)
    assert score.n_points == 3 and len(score.anomalous) == 1
    assert score.pooled == pytest.approx((0.5 + 1.0 + ag.error) / 3)
    assert score.band(">= 64 MiB") == pytest.approx(1.0)
    assert math.isnan(published.Score().pooled)


def test_calibration_meets_the_measured_floor_and_leaves_those_points_out(tmp_path):
    times = [30.0, 31.0, 32.0, 400.0]
    sizes = [8, 64, 1024, 64 * MiB]
    bus = [s * 14 / 8 / (t * 1e3) for s, t in zip(sizes, times, strict=True)]
    (s,) = published.load(write(tmp_path, [run(sizes, bus, nodes=1, times=times)]).parent)
    r, used, floor = nccl_check.calibration_point(s)
    assert used == (8, 64, 1024) and floor == 31.0  # the median time up to 4 KiB
    cal = nccl_check.calibrate(s)
    t, _ = nccl_check.predictor()(cal.cluster, r, 64)
    assert t == pytest.approx(31.0, rel=1e-3)
    every, _, _, pts = nccl_check.score([s])
    assert [p.size for p in pts] == [64 * MiB] and every.n_points == 1


# ------------------------------------------------------------------ the scripts


@pytest.fixture(scope="module")
def model_vs_published() -> dict:
    """``bench/model_vs_published.py --json``, run in-process (once for the module)."""
    mod = load_script("model_vs_published")
    out = io.StringIO()
    argv, sys.argv = sys.argv, ["model_vs_published.py", "--json"]
    try:
        with contextlib.redirect_stdout(out):
            mod.main()
    finally:
        sys.argv = argv
    return json.loads(out.getvalue())


def test_model_vs_published_json_schema(model_vs_published):
    d = model_vs_published
    assert set(d) >= {"systems", "set_apart_systems", "pooled"}
    names = [x["name"] for x in d["systems"] + d["set_apart_systems"]]
    assert sorted(names) == sorted(published.load_system(p).name for p in FILES)
    for x in d["systems"]:
        assert {"name", "source", "points", "mape", "role", "bands", "set_apart"} <= set(x)
        assert x["source"].startswith("https://") and x["points"] > 0
        assert x["role"] in ("fit", "check")
        assert (x["role"] == "fit") == (x["name"] in nccl_check.FIT_SYSTEMS)
    for x in d["set_apart_systems"]:
        assert x["points"] == 0 and x["source"] and x["set_apart"]["why"]
    p = d["pooled"]
    assert {"all", "plateau", "points", "bands", "fit", "check", "choices"} <= set(p)
    assert p["points"] == sum(x["points"] for x in d["systems"])


def test_model_meets_the_acceptance_bounds_on_published_data(model_vs_published):
    p = model_vs_published["pooled"]
    assert p["all"] <= 0.15  # mean |predicted / measured busbw - 1| over every point kept
    assert p["plateau"] <= 0.08  # >= 64 MiB
    worst = max(model_vs_published["systems"], key=lambda x: x["mape"])
    assert worst["mape"] <= 0.30, worst["name"]
    choices = p["choices"]
    assert choices["compared"] >= 1 and choices["agree"] == choices["compared"]


def test_fit_script_helpers():
    fit = load_script("fit_nccl_model")
    best = fit.golden(lambda x: (x - 3.25) ** 2, 0.0, 10.0, steps=40)
    assert best == pytest.approx(3.25, abs=1e-4)
    from ringtree.cost.nccl.timing import DEFAULT

    for name, value in (("kernel_us", 7.5), ("eff:efa", 0.5), ("simple:tcpxo", 123.0)):
        assert fit._get(fit._with(DEFAULT, name, value), name) == value
        assert fit._get(DEFAULT, name) != value


def test_fit_script_with_no_sweep_changes_nothing(capsys, monkeypatch):
    fit = load_script("fit_nccl_model")
    monkeypatch.setattr(sys, "argv", ["fit_nccl_model.py", "--sweeps", "0", "--json"])
    fit.main()
    d = json.loads(capsys.readouterr().out)
    assert d["fit_systems"] == sorted(nccl_check.FIT_SYSTEMS)
    assert d["fit_error_after"] == pytest.approx(d["fit_error_before"])
    assert set(d["constants"]) >= {"kernel_us", "nvlink_efficiency", "eff:ib"}
