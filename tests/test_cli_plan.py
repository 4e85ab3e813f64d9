"""``ringtree plan`` end to end: JSON shape, agreement with ``ringtree cost``, bad input."""

import json
import subprocess
import sys

import pytest

from ringtree.cli import main

BASE = ["plan", "--model", "7b", "--gpus", "64", "--intra", "nvlink4", "--inter", "ib-hdr"]
PLAN_KEYS = {
    "strategy", "collectives", "bytes_per_gpu", "comm_time_s", "exposed_s", "overhead",
    "usd_per_step", "usd_per_day",
}  # fmt: skip
COLLECTIVE_KEYS = {"op", "bytes_per_gpu", "time_s", "exposed_s"}


def run_cli(*argv, env=None):
    return subprocess.run(
        [sys.executable, "-m", "ringtree.cli", *argv],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def plans(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["plans"]


def test_json_has_the_documented_keys(capsys):
    (p,) = plans(capsys, *BASE, "--strategy", "zero3", "--compute", "200ms",
                 "--price-gpu-hour", "30")  # fmt: skip
    assert set(p) >= PLAN_KEYS
    assert p["strategy"] == "zero3"
    assert [c["op"] for c in p["collectives"]] == [
        "all-gather params (fwd)", "all-gather params (bwd)", "reduce-scatter grads"
    ]  # fmt: skip
    for c in p["collectives"]:
        assert set(c) >= COLLECTIVE_KEYS
    assert p["bytes_per_gpu"] == sum(c["bytes_per_gpu"] for c in p["collectives"])
    assert p["exposed_s"] == pytest.approx(sum(c["exposed_s"] for c in p["collectives"]))
    assert p["overhead"] == pytest.approx(p["exposed_s"] / 0.2)
    assert p["usd_per_step"] == pytest.approx(p["exposed_s"] * 30 / 3600 * 64)


def test_seed_case_agrees_with_ringtree_cost(capsys, monkeypatch):
    monkeypatch.setenv("RINGTREE_ALGO", "ring")
    argv = ["--params", "7e9", "--gpus", "8", "--intra", "nvlink4", "--bucket", "0"]
    (p,) = plans(capsys, "plan", *argv, "--strategy", "ddp", "--price-gpu-hour", "30",
                 "--steps-per-second", "1")  # fmt: skip
    assert main(["cost", "all-reduce", "--params", "7e9", "--dtype", "fp16", "-n", "8",
                 "--link", "nvlink4", "--price-gpu-hour", "30", "--steps-per-second", "1",
                 "--json"]) == 0  # fmt: skip
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert p["bytes_per_gpu"] == row["bytes_sent_per_worker"]
    assert p["comm_time_s"] == pytest.approx(row["time_s"], rel=1e-12)
    assert p["usd_per_step"] == pytest.approx(row["usd_per_step"], rel=1e-12)
    assert p["usd_per_day"] == pytest.approx(row["usd_per_day"], rel=1e-12)


def test_compare_ranks_side_by_side(capsys):
    got = plans(capsys, *BASE, "--compute", "200ms", "--compare", "ddp", "zero3", "tp=8")
    assert sorted(p["strategy"] for p in got) == ["ddp", "tp=8", "zero3"]
    assert got[-1]["strategy"] == "ddp"  # 108 GB of model states: does not fit
    assert main([*BASE, "--compute", "200ms", "--compare", "zero1", "zero3"]) == 0
    out = capsys.readouterr().out
    assert "1. " in out and "2. " in out


def test_compare_without_strategies_tries_the_grid(capsys):
    got = plans(capsys, *BASE, "--compute", "200ms", "--compare")
    layouts = {(p["layout"]["dp"], p["layout"]["tp"], p["layout"]["pp"]) for p in got}
    assert (64, 1, 1) in layouts and (1, 8, 8) in layouts
    steps = [p["step_time_s"] for p in got if p["fits_memory"]]
    assert steps == sorted(steps)


def test_table_and_cluster_file(capsys, tmp_path):
    toml = tmp_path / "cluster.toml"
    toml.write_text(
        '[cluster]\nnodes = 8\ngpus_per_node = 8\nintra = "nvlink4"\ninter = "ib-hdr"\n'
        'price_gpu_hour = 30\n'
    )  # fmt: skip
    assert main(["plan", "--model", "7b", "--cluster", str(toml), "--strategy", "zero3",
                 "--compute", "200ms"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "64 GPUs = 8 nodes x 8" in out and "ib-hdr between" in out
    assert "verdict: " in out and "per day" in out
    from_flags = plans(capsys, *BASE, "--strategy", "zero3", "--compute", "200ms")
    from_file = plans(capsys, "plan", "--model", "7b", "--cluster", str(toml), "--strategy",
                      "zero3", "--compute", "200ms")  # fmt: skip
    assert from_file[0]["comm_time_s"] == from_flags[0]["comm_time_s"]


def test_plan_does_not_import_torch():
    code = (
        "import sys; from ringtree.cli import main; "
        "main(['plan', '--model', '70b', '--gpus', '16384', '--strategy', 'zero3', '--json']); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [*BASE, "--strategy", "tp=3"],  # 64 GPUs not divisible by tp x pp
        [*BASE, "--strategy", "pp=64"],  # more stages than the 32 layers
        ["plan", "--model", "llama-9", "--gpus", "8"],  # unknown preset
        ["plan", "--gpus", "8"],  # no model
        [*BASE, "--strategy", "zero9"],
        [*BASE, "--inter", "warp-drive"],
        [*BASE, "--compute", "fast"],
        [*BASE, "--compute", "1s", "--tflops", "989", "--mfu", "0.4"],
        [*BASE, "--tflops", "989"],
        ["plan", "--model", "7b", "--gpus", "12", "--gpus-per-node", "8"],
        ["plan", "--model", "7b", "--gpus", "0"],
        ["plan", "--model", "7b", "--gpus", "8", "--cluster", "/nonexistent.toml"],
        [*BASE, "--bucket", "-5MB"],
        [*BASE, "--strategy", "ddp", "--compare", "zero3"],
    ],
)
def test_bad_input_is_one_line_exit_2(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("ringtree: error:")


def test_bad_cluster_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nnodes = 8\ncolour = 'blue'\n")
    proc = run_cli("plan", "--model", "7b", "--cluster", str(bad))
    assert proc.returncode == 2 and "unknown key 'colour'" in proc.stderr
    bad.write_text("[cluster\n")
    proc = run_cli("plan", "--model", "7b", "--cluster", str(bad))
    assert proc.returncode == 2 and "malformed cluster file" in proc.stderr


def test_table_says_when_hierarchical_was_used(capsys):
    assert main([*BASE, "--strategy", "ddp", "--gpu-memory", "141GB"]) == 0
    out = capsys.readouterr().out
    assert "hierarchical" in out
    assert "all-reduce grads: hierarchical (8 nodes x 8)" in out
