"""The least-squares fit: known constants recovered exactly from synthetic times, the
non-negative solver against brute force, optional constants kept only where they help."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.host import HostLink, HostModel, under_load
from ringtree.cost.models import predict
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.measure.fit import HOST, PLAIN, Sample, calibrate, fit, nonnegative_lstsq
from ringtree.measure.result import BenchResult, Row

ALGS = ("ring", "tree", "dbtree", "recursive", "rabenseifner")
SIZES = (32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20)
CHUNKS = {"tree": 4, "dbtree": 2}


def synthetic(link: Link, n: int, sizes=SIZES, algs=ALGS) -> list[Sample]:  # noqa: ANN001
    """Samples whose times are exactly ``link``'s predictions."""
    out = []
    for size in sizes:
        for a in algs:
            spec = BuildSpec(n_chunks=CHUNKS.get(a))
            t = predict(Collective.ALL_REDUCE, a, n, size, link, itemsize=4, spec=spec).time_s
            out.append(Sample(Collective.ALL_REDUCE, a, n, size // 4, 4, spec.n_chunks, 0, t))
    return out


@pytest.mark.parametrize("n", [2, 4, 8])
def test_plain_fit_recovers_alpha_beta_gamma_exactly(n):
    truth = Link("truth", bandwidth_Bps=1.3e9, alpha_s=128e-6, gamma_s_per_byte=1 / 4e9)
    f = fit(synthetic(truth, n), PLAIN)
    assert f.constants["alpha_s"] == pytest.approx(128e-6, rel=1e-9)
    assert f.bandwidth_Bps == pytest.approx(1.3e9, rel=1e-9)
    assert f.constants["gamma_s_per_byte"] == pytest.approx(1 / 4e9, rel=1e-9)
    assert f.worst_abs_error < 1e-9 and f.dropped == ()


@pytest.mark.parametrize(("n", "cores"), [(2, 2), (4, 2), (8, 4), (3, 1)])
def test_host_fit_recovers_all_four_constants_exactly(n, cores):
    model = HostModel(cores, alpha_s=60e-6, message_s=180e-6, bandwidth_Bps=1.9e9,
                      gamma_s_per_byte=1 / 5e9)
    truth = HostLink("truth", bandwidth_Bps=1e9, alpha_s=1e-4, host=model)
    f = fit(synthetic(truth, n), HOST, cores=cores)
    k = f.constants
    assert k["alpha_s"] == pytest.approx(60e-6, rel=1e-7, abs=1e-12)
    assert k["message_s"] == pytest.approx(180e-6, rel=1e-7)
    assert f.bandwidth_Bps == pytest.approx(1.9e9, rel=1e-7)
    assert k["gamma_s_per_byte"] == pytest.approx(1 / 5e9, rel=1e-7)
    assert f.worst_abs_error < 1e-7


def test_gamma_is_dropped_where_it_does_not_help():
    truth = Link("truth", bandwidth_Bps=1e9, alpha_s=100e-6)  # no reduction cost
    f = fit(synthetic(truth, 4), PLAIN)
    assert "gamma_s_per_byte" in f.dropped and f.constants["gamma_s_per_byte"] == 0
    assert f.constants["alpha_s"] == pytest.approx(100e-6, rel=1e-9)
    kept = fit(synthetic(truth, 4), PLAIN, optional=False)
    assert kept.dropped == ()


def test_noisy_times_give_residuals_that_report_the_noise():
    truth = Link("truth", bandwidth_Bps=1e9, alpha_s=100e-6, gamma_s_per_byte=1e-10)
    samples = synthetic(truth, 4)
    rng = np.random.default_rng(0)
    noisy = [Sample(**{**s.__dict__, "time_s": s.time_s * (1 + rng.uniform(-0.1, 0.1))})
             for s in samples]
    f = fit(noisy, PLAIN)
    assert 0 < f.median_abs_error < 0.1 and f.worst_abs_error < 0.2
    assert len(f.record()["residuals"]) == len(samples)
    for r in f.residuals:
        assert r.error == pytest.approx(r.predicted_s / r.sample.time_s - 1)


def test_nonnegative_lstsq_matches_brute_force_over_a_grid():
    rng = np.random.default_rng(1)
    for _ in range(8):
        a = rng.uniform(0, 1, (12, 3))
        b = a @ rng.uniform(-1, 1, 3) + rng.normal(0, 0.1, 12)
        x = nonnegative_lstsq(a, b)
        assert (x >= 0).all()
        best = min(
            np.linalg.norm(a @ np.array(g) - b)
            for g in itertools.product(np.linspace(0, 2, 31), repeat=3)
        )
        assert np.linalg.norm(a @ x - b) <= best + 1e-12


def test_too_few_lines_is_an_error():
    truth = Link("truth", bandwidth_Bps=1e9, alpha_s=1e-4)
    with pytest.raises(RingtreeError, match="too few"):
        fit(synthetic(truth, 4, sizes=(1 << 20,), algs=("ring",)), HOST, cores=2)


def test_calibrate_skips_native_and_wrong_lines_and_makes_a_link():
    truth = HostLink("truth", bandwidth_Bps=1e9, alpha_s=1e-4,
                     host=HostModel(2, 50e-6, 100e-6, 2e9, 0.0))
    rows = []
    for s in synthetic(truth, 4):
        rows.append(Row("all-reduce", s.algorithm, s.size_bytes, s.count, "float32", "sum",
                        None, s.time_s * 1e6, 0.0, 0.0, 0, 9, s.n_chunks))
    rows.append(Row("all-reduce", "native", 1 << 20, 1 << 18, "float32", "sum", None, 1.0,
                    0.0, 0.0, 0, 9))
    rows.append(Row("all-reduce", "ring", 1 << 20, 1 << 18, "float32", "sum", None, 1e9, 0.0,
                    0.0, 5, 9))
    cal = calibrate(BenchResult({"backend": "gloo", "n_ranks": 4}, rows), cores=2)
    link = cal.link()
    assert link.host is not None and link.host.cores == 2 and link.host.n_ranks == 4
    assert link.host.message_s == pytest.approx(100e-6, rel=1e-6)
    assert link.host.bandwidth_Bps == pytest.approx(2e9, rel=1e-6)
    assert len(cal.host.residuals) == len(ALGS) * len(SIZES)


def test_a_calibration_on_a_busy_machine_gives_the_idle_machines_constants():
    truth = HostLink("truth", bandwidth_Bps=1e9, alpha_s=1e-4,
                     host=HostModel(2, 50e-6, 100e-6, 2e9, 1 / 4e9))
    busy = under_load(truth, 0.5)  # 1.5 cores left
    rows = [
        Row("all-reduce", s.algorithm, s.size_bytes, s.count, "float32", "sum", None,
            s.time_s * 1e6, 0.0, 0.0, 0, 9, s.n_chunks)
        for s in synthetic(busy, 4)
    ]
    meta = {"backend": "gloo", "n_ranks": 4, "load": {"other_cores": 0.5}}
    cal = calibrate(BenchResult(meta, rows), cores=2)
    assert cal.host.cores == 1.5
    host = cal.link().host
    assert host.cores == 2 and host.message_s == pytest.approx(100e-6, rel=1e-6)
    assert host.bandwidth_Bps == pytest.approx(2e9, rel=1e-6)
