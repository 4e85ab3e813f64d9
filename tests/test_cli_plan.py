"""``ringtree plan`` end to end: JSON shape, agreement with ``ringtree cost``, bad input."""

import json
import subprocess
import sys

import pytest

from conftest import refused
from ringtree.cli import main

BASE = ["plan", "--model", "7b", "--gpus", "64", "--intra", "nvlink4", "--inter", "ib-hdr"]
PLAN_KEYS = {
    "strategy", "collectives", "bytes_per_gpu", "comm_time_s", "exposed_s", "overhead",
    "usd_per_step", "usd_per_day",
}
COLLECTIVE_KEYS = {"op", "bytes_per_gpu", "time_s", "exposed_s"}


def plans(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["plans"]


def test_json_has_the_documented_keys(capsys):
    (p,) = plans(capsys, *BASE, "--strategy", "zero3", "--compute", "200ms",
                 "--price-gpu-hour", "30")
    assert set(p) >= PLAN_KEYS
    assert p["strategy"] == "zero3"
    assert [c["op"] for c in p["collectives"]] == [
        "all-gather params (fwd)", "all-gather params (bwd)", "reduce-scatter grads"
    ]
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
                 "--steps-per-second", "1")
    assert main(["cost", "all-reduce", "--params", "7e9", "--dtype", "fp16", "-n", "8",
                 "--link", "nvlink4", "--price-gpu-hour", "30", "--steps-per-second", "1",
                 "--json"]) == 0
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
    )
    assert main(["plan", "--model", "7b", "--cluster", str(toml), "--strategy", "zero3",
                 "--compute", "200ms"]) == 0
    out = capsys.readouterr().out
    assert "64 GPUs = 8 nodes x 8" in out and "ib-hdr between" in out
    assert "verdict: " in out and "per day" in out
    from_flags = plans(capsys, *BASE, "--strategy", "zero3", "--compute", "200ms")
    from_file = plans(capsys, "plan", "--model", "7b", "--cluster", str(toml), "--strategy",
                      "zero3", "--compute", "200ms")
    assert from_file[0]["comm_time_s"] == from_flags[0]["comm_time_s"]


@pytest.mark.multiproc
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
def test_bad_input_is_one_line_exit_2(argv, capsys):
    refused(capsys, argv)


def test_bad_cluster_file(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nnodes = 8\ncolour = 'blue'\n")
    assert "unknown key 'colour'" in refused(capsys, ["plan", "--model", "7b", "--cluster",
                                                      str(bad)])
    bad.write_text("[cluster\n")
    assert "malformed cluster file" in refused(capsys, ["plan", "--model", "7b", "--cluster",
                                                        str(bad)])


def test_table_says_when_hierarchical_was_used(capsys):
    assert main([*BASE, "--strategy", "ddp", "--gpu-memory", "141GB"]) == 0
    out = capsys.readouterr().out
    assert "hierarchical" in out
    assert "all-reduce grads: hierarchical (8 nodes x 8)" in out


HW = ["plan", "--model", "70b", "--cluster", "dgx-h100", "--nodes", "8", "--global-batch", "256"]


def test_cluster_preset_recompute_and_memory(capsys):
    (sel,) = plans(capsys, *HW, "--strategy", "tp=8,pp=2,sp", "--recompute", "selective")
    (full,) = plans(capsys, *HW, "--strategy", "tp=8,pp=2,sp", "--recompute", "full")
    for p in (sel, full):
        assert {
            "dp",
            "tp",
            "pp",
            "step_time_s",
            "mfu",
            "hfu",
            "memory_per_gpu_bytes",
            "fits",
        } <= set(p)
        assert 0.2 < p["mfu"] < 0.75 and p["hfu"] >= p["mfu"]
        assert p["collectives"][1]["algorithm"].startswith("nccl ")
    assert 1.15 <= full["step_time_s"] / sel["step_time_s"] <= 1.45  # an extra forward
    assert full["memory_per_gpu_bytes"] < sel["memory_per_gpu_bytes"]
    assert full["memory"]["activations_bytes"] < sel["memory"]["activations_bytes"]


def test_table_of_a_cluster_as_built(capsys):
    assert main([*HW, "--strategy", "zero1,tp=8,pp=2,sp", "--recompute", "selective"]) == 0
    out = capsys.readouterr().out
    assert "8 nodes of 8 (dgx-h100" in out and "MFU" in out and "memory per GPU" in out
    assert main([*HW, "--strategy", "tp=8,pp=2,sp"]) == 0
    out = capsys.readouterr().out
    assert "does not fit: needs" in out and "it fits with" in out


def test_search_json_and_table(capsys, tmp_path):
    argv = ["plan", "--model", "13b", "--cluster", "dgx-h100", "--nodes", "4",
            "--global-batch", "64"]
    assert main([*argv, "--search", "--top", "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["considered"] > 1000 and len(d["plans"]) == 3
    steps = [p["step_time_s"] for p in d["plans"]]
    assert steps == sorted(steps) and all(p["fits"] for p in d["plans"])
    chrome = tmp_path / "best.json"
    assert main([*argv, "--search", "--top", "2", "--price-gpu-hour", "3", "--chrome",
                 str(chrome)]) == 0
    out = capsys.readouterr().out
    assert "searched" in out and "what limits the best" in out and "$/M tokens" in out
    assert json.loads(chrome.read_text())["traceEvents"]


def test_search_sharding_keeps_only_those_stages(capsys):
    argv = ["plan", "--model", "13b", "--cluster", "dgx-h100", "--nodes", "2",
            "--global-batch", "32", "--search", "--top", "40", "--json"]
    assert main(argv) == 0
    every = json.loads(capsys.readouterr().out)
    assert main([*argv, "--sharding", "zero2,fsdp"]) == 0
    some = json.loads(capsys.readouterr().out)
    assert {p["strategy"].split(",")[0] for p in some["plans"]} <= {"zero2", "zero3"}
    assert 0 < some["considered"] < every["considered"]
    # its best is the best zero2/zero3 plan of the unrestricted search
    kept = [p for p in every["plans"] if p["strategy"].split(",")[0] in ("zero2", "zero3")]
    assert kept and some["plans"][0]["step_time_s"] == pytest.approx(kept[0]["step_time_s"])


def test_calibrate_step(capsys):
    argv = [*HW, "--strategy", "zero1,tp=8,pp=2,sp", "--recompute", "selective"]
    assert main([*argv, "--calibrate-step", "20s", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["plans"][0]["step_time_s"] == pytest.approx(20, rel=1e-4)
    assert "calibrated: GEMMs reach" in captured.err


def test_mixtral_expert_parallel_lists_the_all_to_alls(capsys):
    argv = ["plan", "--model", "mixtral-8x7b", "--gpus", "64", "--gpus-per-node", "8",
            "--intra", "nvlink4", "--inter", "ib-ndr", "--strategy", "ep=8,tp=1"]
    (p,) = plans(capsys, *argv)
    a2a = [c for c in p["collectives"] if c["kind"] == "all-to-all"]
    assert len(a2a) == 2
    per_call = 2 * 4096 * 4096 * 2  # k b s h p (docs/plan.md)
    for c in a2a:
        assert c["bytes_per_call"] == per_call
        assert c["bytes_per_gpu"] == 2 * 32 * per_call * 7 // 8  # (ep-1)/ep leaves the GPU


@pytest.mark.parametrize(
    "argv",
    [
        [*HW[:-2], "--search", "--compare"],
        [*HW, "--search", "--strategy", "tp=8"],
        ["plan", "--model", "70b", "--cluster", "dgx-z900", "--nodes", "2"],
        ["plan", "--model", "70b", "--cluster", "dgx-h100"],  # no --nodes
        ["plan", "--model", "70b", "--cluster", "dgx-h100", "--nodes", "2", "--intra", "nvlink4"],
        [*HW, "--recompute", "sometimes"],
        [*HW, "--efficiency", "1.5"],
        [*HW, "--calibrate-step", "2s"],  # which strategy was measured?
        [*HW, "--strategy", "ep=8"],  # a dense model
        [*HW[:-1], "12", "--strategy", "tp=8,pp=2,v=2"],  # 3 micro-batches: not a multiple
        [*HW, "--strategy", "pp=2,v=2,tp=8", "--chrome", "/nonexistent/dir/x.json"],
        ["plan", "--gpus", "8", "--params", "7e9", "--cluster", "dgx-h100", "--search"],
        [*HW, "--search", "--objective", "speed"],
        [*HW[:-2], "--search", "--sharding", "zero4"],
        [*HW, "--strategy", "tp=8", "--sharding", "zero2"],  # narrows nothing without --search
        [*HW, "--strategy", "tp=8", "--max-tp", "1"],  # limits nothing without --search
        [*HW, "--strategy", "zero3", "--framework", "jax"],
        [*HW, "--strategy", "hsdp"],  # no shard group
        [*HW, "--strategy", "hsdp,shard=3"],  # does not divide dp
        [*HW, "--strategy", "zero1,shard=8"],
        [*HW, "--strategy", "zero3", "--reduce-dtype", "fp7"],
    ],
)
def test_bad_plan_input_is_one_line_exit_2(argv, capsys):
    refused(capsys, argv)
