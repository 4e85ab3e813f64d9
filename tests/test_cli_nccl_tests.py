"""``ringtree calibrate --nccl-tests`` and ``ringtree validate --nccl-tests``: the file written
is taken by cost, plan and validate; the JSON contract; flags that do not go with the mode and
bad logs are one-line errors with exit 2; the local modes still ask for what they need."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ringtree.cli import main

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

DATA = Path(__file__).parent / "data" / "nccl_tests"
P5 = str(DATA / "keitaw-p5-2x8-h100-all_reduce-info-tagged.log")


@pytest.fixture(autouse=True)
def no_nccl_env(monkeypatch):
    """The commands read NCCL_* from the environment: start every test without any."""
    import os

    for k in [k for k in os.environ if k.startswith("NCCL_")]:
        monkeypatch.delenv(k)


def out_json(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def error(capsys, *argv: str) -> str:
    """A command that must fail on its input: exit 2, one line on stderr, nothing on stdout."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("ringtree: error: ") and err.count("\n") == 1, err
    return err


def test_calibrate_writes_a_cluster_file_that_cost_plan_and_validate_take(capsys, tmp_path):
    path = tmp_path / "my-p5.toml"
    rec = out_json(capsys, "calibrate", "--nccl-tests", P5, "--cluster", "aws-p5", "-q",
                   "-o", str(path))
    data = tomllib.loads(path.read_text())
    assert data["cluster"]["preset"] == "aws-p5"
    assert data["cluster"]["net_hop_us"] == pytest.approx(rec["constants"]["net_hop_us"],
                                                          rel=1e-4)
    cal = data["calibration"]
    assert cal["logs"] == [Path(P5).name] and "2 x 8 NVIDIA H100" in cal["tests"]
    assert cal["held_back_sizes"] == rec["held_back_sizes"] and len(rec["held_back"]) == 8
    assert cal["held_back_median_abs_error"] == pytest.approx(
        rec["held_back_median_abs_error"], abs=1e-4)
    one = out_json(capsys, "cost", "all-reduce", "--cluster", str(path), "--nodes", "2",
                   "--size", "1GiB")["rows"][0]
    preset = out_json(capsys, "cost", "all-reduce", "--cluster", "aws-p5", "--nodes", "2",
                      "--size", "1GiB")["rows"][0]
    assert one["time_s"] != preset["time_s"]
    assert out_json(capsys, "plan", "--model", "7b", "--cluster", str(path), "--nodes", "2",
                    "--strategy", "zero3")["plans"]
    v = out_json(capsys, "validate", "--nccl-tests", P5, "--cluster", str(path))
    assert len(v["rows"]) == 32 and v["median_abs_error"] < 0.10


def test_validate_prints_the_contract(capsys):
    v = out_json(capsys, "validate", "--nccl-tests", P5, "--cluster", "aws-p5")
    assert set(v) >= {"rows", "median_abs_error", "findings"}
    assert {"collective", "size_bytes", "measured_busbw_gbps", "predicted_busbw_gbps",
            "error"} <= set(v["rows"][0])
    assert all(set(f) == {"sizes", "kind", "message"} for f in v["findings"])


def test_validate_and_calibrate_print_tables(capsys, tmp_path):
    assert main(["validate", "--nccl-tests", str(DATA / "issue290-2x8-h100-srun-label.log"),
                 "--cluster", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "median |error|" in out and "[bandwidth-bound]" in out and "8 GiB" in out
    assert main(["calibrate", "--nccl-tests", P5, "--cluster", "aws-p5",
                 "-o", str(tmp_path / "x.toml")]) == 0
    out, err = capsys.readouterr()
    assert "held back from the fit" in out and "wrote" in err


@pytest.mark.parametrize("argv, what", [
    (["validate", "--nccl-tests", "/nonexistent.log", "--cluster", "aws-p5"],
     "cannot read nccl-tests log"),
    (["calibrate", "--nccl-tests", "/nonexistent.log", "--cluster", "aws-p5", "-o", "{tmp}"],
     "cannot read nccl-tests log"),
    (["validate", "--nccl-tests", "{broken}", "--cluster", "aws-p5"],
     r"broken.log, line 5: a result row has 6 fields"),
    (["validate", "--nccl-tests", P5], "--nccl-tests needs --cluster"),
    (["validate", "--nccl-tests", P5, "--cluster", "nope"], "unknown cluster 'nope'"),
    (["validate", "--nccl-tests", P5, "--cluster", "aws-p5", "-n", "4", "--iters", "3"],
     "-n/--ranks, --iters do not go with --nccl-tests"),
    (["calibrate", "--nccl-tests", P5, "--cluster", "aws-p5", "-o", "{tmp}", "--from",
      "x.json"], "--from does not go with --nccl-tests"),
    (["calibrate", "-n", "2", "-o", "{tmp}", "--cluster", "aws-p5"],
     "--cluster goes with --nccl-tests"),
    (["calibrate", "-n", "2", "-o", "{tmp}", "--hold-back", "3"], "--hold-back goes with"),
    (["validate", "-n", "2"], "give --profile FILE.toml"),
    (["validate", "--profile", "x.toml"], "-n/--ranks"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, what):
    broken = tmp_path / "broken.log"
    broken.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor)\n#\n"
                      "#       size         count      type   redop    root     time   algbw"
                      "   busbw #wrong     time   algbw   busbw #wrong\n#\n"
                      "   4096   1024  float  sum  -1  12.x\n")
    argv = [a.format(tmp=tmp_path / "out.toml", broken=broken) for a in argv]
    assert what in error(capsys, *argv)


def test_nccl_settings_in_the_environment_are_what_the_log_ran_with(capsys, monkeypatch):
    ring = str(DATA / "issue290-2x8-h100-ring-no-header.log")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    v = out_json(capsys, "validate", "--nccl-tests", ring, "--cluster", "dgx-h100")
    assert {r["nccl"].split("/")[0] for r in v["rows"]} == {"Ring"}
    (f,) = v["findings"]
    assert f["kind"] == "fewer-nics" and "2 of the 8 NICs" in f["message"]
