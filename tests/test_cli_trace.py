"""The trace command, through the same entry point as the console script."""

import json
import subprocess
import sys

import pytest

from ringtree.cli import main


def run_cli(*argv):
    return subprocess.run(
        [sys.executable, "-m", "ringtree.cli", *argv], capture_output=True, text=True, timeout=60
    )


def test_trace_all_reduce_json(capsys):
    assert main(["trace", "all-reduce", "-n", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["steps"]) == 6
    after3 = data["steps"][2]["complete"]
    assert after3 == [[(i + 1) % 4] for i in range(4)]
    assert data["steps"][-1]["complete"] == [[0, 1, 2, 3]] * 4
    assert data["bytes_sent"] == [2 * 3 * (1 << 20) // 4 // 4 * 4] * 4


def test_trace_table_shows_six_steps(capsys):
    assert main(["trace", "all_reduce", "-n", "4"]) == 0
    out = capsys.readouterr().out
    assert sum(line.strip("│ ").startswith("step ") for line in out.splitlines()) == 6


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "all-reduce", "-n", "0"],
        ["trace", "all-reduce", "-n", "-3"],
        ["trace", "nonsense", "-n", "4"],
        ["trace", "all-reduce", "-n", "4", "--algorithm", "nonsense"],
        ["trace", "reduce", "-n", "4", "--root", "7"],
        ["trace", "all-reduce", "-n", "4", "--size", "-5"],
    ],
)
def test_bad_input_is_one_line_exit_2(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("ringtree: error:")
