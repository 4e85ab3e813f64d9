"""``ringtree bench`` on real processes (one short run), its JSON twin and CSV, and bad
input refused in one line with exit status 2 before any process starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ringtree.cli import main
from ringtree.collectives import Collective, bus_factor


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringtree.cli", *argv], capture_output=True,
                          text=True, timeout=240)


def test_every_collective_on_three_gloo_processes_is_right_and_round_trips(tmp_path):
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    cols = ["all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce"]
    files = ["--json", str(out), "--csv", str(csv)]
    proc = run_cli("bench", "-n", "3", "-b", "4K", "-e", "40K", "-f", "10", "-w", "1",
                   "--iters", "2", "-c", *cols, "-r", "2", *files)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    rows = data["rows"]
    # every algorithm each collective has on 3 ranks (hierarchical needs nodes), and native
    want = {"all-reduce": 7, "reduce-scatter": 4, "all-gather": 4, "broadcast": 3, "reduce": 3}
    for col, k in want.items():
        assert len({r["algorithm"] for r in rows if r["collective"] == col}) == k
    assert len(rows) == 2 * sum(want.values())
    for r in rows:
        assert r["wrong"] == 0 and r["iters"] == 2 and len(r["times_us"]) == 2
        assert r["algbw"] == pytest.approx(r["size"] / r["time_us"] / 1e3)
        factor = bus_factor(Collective.parse(r["collective"]), 3)
        assert r["busbw"] == pytest.approx(r["algbw"] * factor)
        assert r["root"] == (2 if r["collective"] in ("broadcast", "reduce") else None)
    rs = [r for r in rows if r["collective"] == "reduce-scatter"]
    assert {r["count"] for r in rs} == {999, 9999}  # 4000 B -> 1000 floats -> 3 x 333
    assert len(csv.read_text().splitlines()) == len(rows) + 1
    # the saved JSON prints the same table
    again = run_cli("bench", "-n", "3", "--from", str(out))
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert "# wrong elements: 0 OK" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-b", "1M", "-e", "64K"], "larger than maximum"),
        (["-f", "1"], "factor -f must be > 1"),
        (["-f", "0.5"], "factor -f must be > 1"),
        (["-f", "x"], "expected a number > 1"),
        (["-b", "-4K"], "negative"),
        (["-a", "ring,bogus"], "unknown algorithm 'bogus'"),
        (["-c", "reduce-scatter", "--in-place"], "in-place"),
        (["--plot", "x.jpg"], "must end in .png or .svg"),
        (["-o", "xor"], "unknown reduce op"),
        (["-d", "complex64"], "dtype"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(["bench", "-n", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ringtree: error: ") and message in err and err.count("\n") == 1


def test_calibrate_and_validate_refuse_bad_input(tmp_path, capsys):
    assert main(["calibrate", "-n", "2", "-o", str(tmp_path / "p.txt")]) == 2
    assert "must end in .toml" in capsys.readouterr().err
    assert main(["calibrate", "-n", "2", "-o", str(tmp_path / "p.toml"), "-b", "1M", "-e",
                 "1K"]) == 2
    assert "larger than maximum" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text("not = [toml")
    assert main(["validate", "--profile", str(bad), "-n", "2"]) == 2
    assert "not valid TOML" in capsys.readouterr().err
