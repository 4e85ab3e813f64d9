"""``ringtree lab ddp``: bad input is exit 2 before any process starts; a failed rank is one
line and exit 1; a real run on three processes prints its steps, summary and trace."""

import json

import pytest

from conftest import main_captured
from ringtree.cli import main
from ringtree.lab import ddp
from ringtree.procs.run import RunFailed


def exit_status(argv):
    """What ``ringtree ARGV`` exits with, whether argparse exits or main returns."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-n", "0"], "expected a whole number >= 1, got 0"),
        (["-n", "65"], "at most 64 local processes, got -n 65"),
        (["--steps", "0"], "expected a whole number >= 1, got 0"),
        (["--algorithm", "bogus"], "unknown algorithm 'bogus' for all-reduce: expected one of"),
        (["--algorithm", "hierarchical"], "needs ranks per node, which local processes"),
        (["--trace", "/nonexistent-dir/t.json"], "cannot write '/nonexistent-dir/t.json'"),
        (["--price-cluster-hour", "-1"], "expected a number >= 0, got '-1'"),
        (["--bucket-cap-mb", "0"], "expected a number > 0, got '0'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(ddp, "run_lab", lambda *a, **k: pytest.fail("processes started"))
    assert exit_status(["lab", "ddp", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("ringtree: error:") and err.count("\n") == 1


def test_a_failed_rank_is_one_line_and_exit_1(capsys, monkeypatch):
    def failing(config):
        raise RunFailed("rank 1: ValueError: boom")

    monkeypatch.setattr(ddp, "run_lab", failing)
    assert main(["lab", "ddp", "--steps", "2"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "ringtree: error: rank 1: ValueError: boom"
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    trace = tmp_path_factory.mktemp("lab") / "lab.json"
    out = main_captured("lab", "ddp", "-n", "3", "--steps", "3", "--algorithm", "ring", "--trace",
                  str(trace), "--price-cluster-hour", "0.70", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), json.loads(trace.read_text()), out.stderr


@pytest.mark.multiproc
def test_three_ranks_agree_with_pytorch(three_ranks):
    data, _, err = three_ranks
    s = data["summary"]
    assert s["ranks"] == 3 and s["steps"] == 3
    for run in ("torch", "ringtree"):
        assert s["runs"][run]["ranks_identical"], run
    # three ranks sum in other orders than gloo: close, not necessarily bitwise
    assert s["max_difference_between_runs"] < 1e-5
    assert s["runs"]["ringtree"]["algorithms"] == ["ring"]
    assert s["runs"]["ringtree"]["final_loss"] < s["runs"]["ringtree"]["first_loss"]
    assert "wrote" in err and "slices on 3 ranks" in err


@pytest.mark.multiproc
def test_three_ranks_bytes_and_dollars(three_ranks):
    data, _, _ = three_ranks
    s = data["summary"]
    grad = 4 * s["parameters"]
    assert s["gradient_bytes"] == grad
    assert s["textbook_bytes_per_worker"] == 2 * grad
    assert s["ring_bytes_per_worker"] == pytest.approx(2 * 2 / 3 * grad)
    for row in data["steps"]:
        g = row["ringtree"]
        assert g["allreduced_bytes"] == grad
        # the ring's busiest rank sends 2(N-1) chunks of its largest block
        assert 2 * 2 / 3 * grad <= g["sent_per_worker"] <= 2 * 2 / 3 * grad + 4 * 2 * 2
        assert g["usd"] == pytest.approx(g["measured_s"] * 0.70 / 3600)
    assert s["runs"]["ringtree"]["usd_comm_per_step"] == pytest.approx(
        s["runs"]["ringtree"]["comm_measured_s"] / 3 * 0.70 / 3600
    )


@pytest.mark.multiproc
def test_three_ranks_trace(three_ranks):
    data, trace, _ = three_ranks
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {n.split(" (")[0] for n in names.values()} == {"rank 0", "rank 1", "rank 2"}
    sends = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "send"]
    counted = sum(b["bytes_sent"] for b in data["buckets"]["ringtree"])
    assert sum(e["args"]["bytes"] for e in sends) == counted
