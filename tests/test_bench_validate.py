"""calibrate -> profile -> validate on saved sweeps (no processes): an exact model validates
with no error and auto always right; errors and picks computed by hand; plots drawn."""

from __future__ import annotations

import json

import pytest

from ringtree.algorithms import BuildSpec
from ringtree.cli import main
from ringtree.collectives import Collective
from ringtree.cost.host import HostLink, HostModel, under_load
from ringtree.cost.models import predict
from ringtree.cost.profile import load_profile
from ringtree.cost.select import tuned
from ringtree.errors import RingtreeError
from ringtree.measure.plots import plot_sweep
from ringtree.measure.result import BenchResult, Row
from ringtree.measure.validate import validate

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

TRUTH = HostLink("truth", bandwidth_Bps=1e9, alpha_s=2e-4,
                 host=HostModel(2, 40e-6, 150e-6, 2.2e9, 1 / 6e9))
ALGS = ("ring", "tree", "dbtree", "recursive", "rabenseifner")


def sweep_of(sizes, n=4, scale=1.0, link=TRUTH) -> BenchResult:  # noqa: ANN001
    """What a sweep on a machine that follows ``link`` exactly would report (times x scale)."""
    rows = []
    for size in sizes:
        for a in ALGS:
            chunks = tuned(Collective.ALL_REDUCE, a, n, size, link, itemsize=4).n_chunks
            spec = BuildSpec(n_chunks=chunks)
            t = predict("all-reduce", a, n, size, link, itemsize=4, spec=spec).time_s * scale
            rows.append(Row("all-reduce", a, size, size // 4, "float32", "sum", None, t * 1e6,
                            size / t / 1e9, 1.5 * size / t / 1e9, 0, 9, chunks))
    return BenchResult({"backend": "gloo", "n_ranks": n, "cores": 2}, rows)


CAL = [32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20]
VAL = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def test_an_exact_model_validates_with_no_error_and_auto_always_right():
    v = validate(sweep_of(VAL), TRUTH)
    assert v.worst_abs_error < 1e-9 and v.auto_right == (6, 6)
    # auto takes the first-registered within 1 % (its tie rule), else the fastest
    assert all(p.auto_measured_s <= p.fastest_s * 1.01 for p in v.picks)


def test_errors_and_picks_by_hand():
    result = sweep_of([1 << 20])
    ring = next(r for r in result.rows if r.algorithm == "ring")
    slow = Row(**{**ring.__dict__, "time_us": ring.time_us * 2})
    result.rows = [slow if r is ring else r for r in result.rows]
    v = validate(result, TRUTH)
    check = next(c for c in v.checks if c.algorithm == "ring")
    assert check.error == pytest.approx(-0.5)  # predicted half of what was measured
    (pick,) = v.picks
    fastest = min(result.rows, key=lambda r: r.time_us)
    assert pick.fastest == fastest.algorithm
    assert pick.ok == (pick.auto_measured_s <= 1.1 * fastest.time_us * 1e-6)


def test_sizes_the_fit_saw_are_left_out():
    v = validate(sweep_of([1 << 20, 4 << 20]), TRUTH, skip_sizes={1 << 20})
    assert v.skipped_sizes == [1 << 20] and {c.size_bytes for c in v.checks} == {4 << 20}


def test_nothing_left_to_compare_is_an_error_not_a_perfect_score():
    with pytest.raises(RingtreeError, match="every measured size was one the fit saw"):
        validate(sweep_of([1 << 20, 4 << 20]), TRUTH, skip_sizes={1 << 20, 4 << 20})


def test_calibrate_then_validate_from_saved_sweeps(tmp_path, capsys):
    cal, val = tmp_path / "cal.json", tmp_path / "val.json"
    cal.write_text(json.dumps(sweep_of(CAL).record()))
    val.write_text(json.dumps(sweep_of(VAL).record()))
    prof = tmp_path / "p.toml"
    assert main(["calibrate", "-n", "4", "-o", str(prof), "--from", str(cal), "--cores", "2",
                 "--json", "--plot", str(tmp_path / "c.png")]) == 0
    fits = json.loads(capsys.readouterr().out)["links"][0]
    assert fits["host"]["worst_abs_error"] < 1e-6
    link = load_profile(str(prof))
    assert link.host is not None
    assert link.host.message_s == pytest.approx(150e-6, rel=1e-6)
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["validate", "--profile", str(prof), "-n", "4", "--from", str(val),
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["worst_abs_error"] < 1e-6 and rec["auto_right"] == rec["auto_judged"] == 6
    assert main(["validate", "--profile", str(prof), "-n", "4", "--from", str(val)]) == 0
    out = capsys.readouterr().out
    assert "median |error| 0.0%, worst 0.0%" in out and "at 6 of 6 sizes (100%)" in out


def test_a_slower_machine_shows_as_errors(tmp_path, capsys):
    cal, val = tmp_path / "cal.json", tmp_path / "val.json"
    cal.write_text(json.dumps(sweep_of(CAL).record()))
    val.write_text(json.dumps(sweep_of(VAL, scale=1.25).record()))
    prof = tmp_path / "p.toml"
    assert main(["calibrate", "-n", "4", "-o", str(prof), "--from", str(cal), "-q"]) == 0
    capsys.readouterr()
    assert main(["validate", "--profile", str(prof), "-n", "4", "--from", str(val),
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["median_abs_error"] == pytest.approx(0.2)  # 1/1.25 - 1


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plots_with_and_without_a_model(tmp_path, suffix):
    for link in (None, TRUTH):
        path = tmp_path / f"p{suffix}"
        plot_sweep(sweep_of(VAL), path, link=link)
        head = path.read_bytes()[:200]
        assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in head
    assert main(["bench", "-n", "4", "--from", "x.json", "--plot", "x.jpg"]) == 2


def test_validate_predicts_for_the_cores_other_programs_left_free(tmp_path, capsys):
    cal, val = tmp_path / "cal.json", tmp_path / "val.json"
    cal.write_text(json.dumps(sweep_of(CAL).record()))
    busy = sweep_of(VAL, link=under_load(TRUTH, 1.0))  # half the machine taken
    busy.meta["load"] = {"other_cores": 1.0, "sweep_cores": 1.0, "timed_wall_s": 1.0}
    val.write_text(json.dumps(busy.record()))
    prof = tmp_path / "p.toml"
    assert main(["calibrate", "-n", "4", "-o", str(prof), "--from", str(cal), "-q",
                 "--cores", "2"]) == 0
    capsys.readouterr()
    assert main(["validate", "--profile", str(prof), "-n", "4", "--from", str(val),
                 "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["free_cores"] == 1.0 and rec["worst_abs_error"] < 1e-6
    assert rec["idle_machine"]["median_abs_error"] > 0.2  # the load does matter
