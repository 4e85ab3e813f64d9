"""Malformed and extreme invocations of every command: each ends within 30 s, either refused
(exit 2, exactly one ``ringtree: error:`` line on stderr pointing at the command's --help, no
traceback) or run as the valid input it is (exit 0).

Most run in-process through ``ringtree.cli.main`` (what the console script calls) with process
start-up forbidden, so that an input wrongly let through to ``run``/``bench`` fails here
instead of starting processes; a sample runs as real subprocesses, where an escaping traceback
or a wrong exit status would show.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ringtree.cli import main
from ringtree.commands.local import RANKS_PER_CORE

pytestmark = pytest.mark.slow

REFUSED, VALID = 2, 0
HUGE = "1" + "0" * 400  # 401 digits: Python's int() takes it, floats do not
OVER_CORES = str(RANKS_PER_CORE * (os.cpu_count() or 1) + 1)
COST = ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--link", "ib-hdr"]
PLAN = ["plan", "--model", "7b", "--gpus", "8"]
HWPLAN = ["plan", "--model", "70b", "--cluster", "dgx-h100", "--nodes", "2"]
XOVER = ["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr"]

# (expected exit status, argv); {tmp} is a scratch folder holding garbage.toml (not TOML),
# binary.json (not text), empty.json ({}), huge.toml (a cluster of 1e11 GPUs), a folder
# named dir.png, and profile.toml (a valid one-machine profile).
CASES: list[tuple[int, list[str]]] = [
    # no command, unknown commands and flags
    (REFUSED, []),
    (REFUSED, ["--bogus"]),
    (REFUSED, ["fly"]),
    (REFUSED, ["ćost"]),
    (VALID, ["--version"]),
    (VALID, ["cost", "--help"]),
    # trace
    (REFUSED, ["trace"]),
    (REFUSED, ["trace", "all-reduce"]),
    (REFUSED, ["trace", "all-reduce", "-n", "0"]),
    (REFUSED, ["trace", "all-reduce", "-n", "-3"]),
    (REFUSED, ["trace", "all-reduce", "-n", "1e3"]),
    (REFUSED, ["trace", "all-reduce", "-n", ""]),
    (REFUSED, ["trace", "all-reduce", "-n", "100000"]),
    (REFUSED, ["trace", "all-reduce", "-n", "1024"]),
    (REFUSED, ["trace", "all-reduce", "-n", "256"]),
    (REFUSED, ["trace", "all-reduce", "-n", HUGE]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--algorithm", "warp"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--algorithm", ""]),
    (REFUSED, ["trace", "broadcast", "-n", "4", "--chunks", "0"]),
    (REFUSED, ["trace", "broadcast", "-n", "4", "--chunks", "100000000"]),
    (REFUSED, ["trace", "all-reduce", "-n", "256", "--algorithm", "dbtree", "--chunks", "1024"]),
    (REFUSED, ["trace", "broadcast", "-n", "4", "--root", "4"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--size", "-1"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--size", "1e30"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--size", "6"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--dtype", "fp128"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--svg", "/nonexistent/dir/x.svg"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--html", ""]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--chrome", "{tmp}"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--link", "warp"]),
    (REFUSED, ["trace", "all-reduce", "-n", "4", "--link", "custom:bw=0GB/s"]),
    (REFUSED, ["trace", "all-reduce", "-n", "6", "--algorithm", "hierarchical"]),
    (REFUSED, ["trace", "ällreduce", "-n", "4"]),
    (VALID, ["trace", "all-reduce", "-n", "4", "--size", "0", "--json"]),
    (VALID, ["trace", "all-reduce", "-n", "１", "--json"]),  # int() reads Unicode digits
    (VALID, ["trace", "all-reduce", "-n", "256", "--algorithm", "tree", "--json"]),
    # cost
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1e30", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", str(2**63), "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1e400", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1e999999999", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "nan", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "inf", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "12XB", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "１MB", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--params", "1e30", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--params", "2e17", "--dtype", "fp64",
               "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--params", "7B",
               "--link", "ib-hdr"]),
    (REFUSED, [*COST[:-1], "warp"]),
    (REFUSED, [*COST[:-1], "custom:bw=1e400GB/s"]),
    (REFUSED, [*COST[:-1], "custom:bw=1e-300B/s,lat=1e300s"]),
    (REFUSED, [*COST[:-1], "custom:bw=1GB/s,lat=-1us"]),
    (REFUSED, [*COST[:-1], "custom:"]),
    (REFUSED, [*COST[:-1], "nvlink4+ib-hdr+pcie4"]),
    (REFUSED, [*COST[:-1], "+"]),
    (REFUSED, [*COST, "--chunks", "100000000"]),
    (REFUSED, [*COST, "--chunks", "-1"]),
    (REFUSED, [*COST, "--compute", "0s"]),
    (REFUSED, [*COST, "--compute", "1e-300s"]),
    (REFUSED, [*COST, "--compute", "1e400s"]),
    (REFUSED, [*COST, "--compute", "5 parsecs"]),
    (REFUSED, [*COST, "--price-gpu-hour", "-1"]),
    (REFUSED, [*COST, "--price-gpu-hour", "1e308"]),
    (REFUSED, [*COST, "--price-gpu-hour", "1", "--price-cluster-hour", "1"]),
    (REFUSED, [*COST, "--steps-per-second", "1"]),
    (REFUSED, [*COST, "--price-gpu-hour", "1", "--hours", "nan"]),
    (REFUSED, [*COST, "--price-gpu-hour", "1", "--steps-per-second", "1e-320"]),
    (REFUSED, [*COST, "--model", "quantum"]),
    (REFUSED, [*COST, "--algorithm", "warp"]),
    (REFUSED, ["cost", "all-reduce", "-n", "2147483648", "--size", "1GB", "--link", "ib-hdr"]),
    (REFUSED, ["cost", "all-reduce", "-n", "100000000", "--size", "1GB", "--link", "ib-hdr",
               "--algorithm", "tree"]),
    (REFUSED, ["cost", "broadcast", "-n", "8", "--size", "1MB", "--link", "ib-hdr",
               "--root", "99999999999999999999"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--profile", "/nonexistent.toml"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--profile",
               "{tmp}/garbage.toml"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--link", "{tmp}/binary.json"]),
    (VALID, ["cost", "all-reduce", "-n", "100000000", "--size", "1GB", "--link", "ib-hdr",
             "--json"]),
    (VALID, ["cost", "reduce-scatter", "-n", "2147483647", "--size", "1GB", "--link",
             "nvlink4", "--json"]),
    (VALID, ["cost", "all-reduce", "-n", "8", "--size", str(2**60), "--link", "ib-hdr", "--json"]),
    (VALID, [*COST, "--price-gpu-hour", "1e12", "--hours", "1e12", "--steps-per-second",
             "1e12", "--compute", "1ns", "--json"]),
    # links
    (VALID, ["links", "--json"]),
    (REFUSED, ["links", "--bogus"]),
    (REFUSED, ["links", "extra"]),
    # crossover
    (REFUSED, [*XOVER, "--plot", "/nonexistent/dir/x.png"]),
    (REFUSED, [*XOVER, "--plot", "x.pdf"]),
    (REFUSED, [*XOVER, "--plot", "{tmp}/dir.png"]),
    (REFUSED, [*XOVER, "--max-size", "1e30"]),
    (REFUSED, [*XOVER, "--min-size", "1GB", "--max-size", "1KB"]),
    (REFUSED, [*XOVER, "--profile", "{tmp}/profile.toml"]),
    (REFUSED, ["crossover", "all-reduce", "-n", "8"]),
    (REFUSED, ["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr", "--dtype", "x"]),
    (VALID, ["crossover", "all-reduce", "-n", "1000000000", "--link", "ib-hdr", "--json"]),
    (VALID, ["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr", "--max-size", "1e18",
             "--json"]),
    # plan
    (REFUSED, ["plan", "--model", "7b", "--gpus", "1000000000"]),
    (REFUSED, ["plan", "--model", "7b", "--nodes", "1000000000", "--gpus-per-node", "1000000000"]),
    (REFUSED, ["plan", "--model", "7b"]),
    (REFUSED, ["plan", "--model", "9000b", "--gpus", "8"]),
    (REFUSED, ["plan", "--gpus", "8"]),
    (REFUSED, [*PLAN, "--strategy", "tp=1000000000"]),
    (REFUSED, [*PLAN, "--strategy", "dp=,tp="]),
    (REFUSED, [*PLAN, "--strategy", "ddp", "--compare"]),
    (REFUSED, [*PLAN, "--compare", ""]),
    (REFUSED, [*PLAN, "--tflops", "1e-300", "--mfu", "1e-300"]),
    (REFUSED, [*PLAN, "--tflops", "100", "--mfu", "2"]),
    (REFUSED, [*PLAN, "--layers", HUGE]),
    (REFUSED, [*PLAN, "--bucket", "1e30"]),
    (REFUSED, [*PLAN, "--bucket", "abc"]),
    (REFUSED, [*PLAN, "--gpu-memory", "-1GB"]),
    (REFUSED, [*PLAN, "--intra", "warp"]),
    (REFUSED, [*PLAN, "--price-gpu-hour", "inf"]),
    (REFUSED, ["plan", "--model", "7b", "--cluster", "/nonexistent.toml"]),
    # cost on a cluster: what only a --link uses is refused, not ignored
    *((REFUSED, ["cost", "all-reduce", "--cluster", "dgx-h100", "--size", "1GB", *extra])
      for extra in (["--algorithm", "ring"], ["--price-gpu-hour", "3"], ["--compute", "200ms"],
                    ["--hours", "5"], ["--root", "1"], ["--chunks", "4"])),
    (REFUSED, ["plan", "--model", "7b", "--cluster", "{tmp}/binary.json"]),
    (REFUSED, ["plan", "--model", "7b", "--cluster", "{tmp}/huge.toml"]),
    (VALID, ["plan", "--model", "70b", "--gpus", "131072", "--strategy", "zero3", "--json"]),
    (VALID, [*PLAN, "--micro-batch", "1000000000000", "--json"]),
    (REFUSED, [*PLAN, "--micro-batch", "99999999999999999999"]),
    # plan on a cluster as built, --search
    (REFUSED, [*HWPLAN, "--nodes", "1000000000"]),
    (REFUSED, [*HWPLAN, "--search", "--top", "0"]),
    (REFUSED, [*HWPLAN, "--recompute", "sometimes"]),
    (REFUSED, [*HWPLAN, "--calibrate-step", "1e30s", "--strategy", "tp=8"]),
    (REFUSED, [*HWPLAN, "--seq-len", HUGE]),
    (REFUSED, [*HWPLAN, "--heads", "7"]),
    (REFUSED, [*HWPLAN, "--strategy", "ep=8"]),
    (REFUSED, [*HWPLAN, "--svg", "{tmp}/dir.png"]),
    (VALID, [*HWPLAN, "--micro-batch", "1000000000000", "--json"]),
    (VALID, [*HWPLAN, "--search", "--global-batch", "1", "--json"]),
    (VALID, [*HWPLAN, "--global-batch", "1000000000000", "--search", "--json"]),
    # run: every one refused before a process starts
    (REFUSED, ["run", "-n", "100000", "all-reduce"]),
    (REFUSED, ["run", "-n", "1025", "all-reduce", "--force"]),
    (REFUSED, ["run", "-n", OVER_CORES, "all-reduce"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--size", "1e30"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--size", "1000TB"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--iters", "0"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--iters", "1000000000"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--iters", "10001"]),  # hours at large sizes
    (REFUSED, ["run", "-n", "2", "all-reduce", "--timeout", "0s"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--timeout", "1e400s"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--backend", "tcp"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--kill-rank", "5"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--algorithm", "warp"]),
    (REFUSED, ["run", "-n", "2", "broadcast", "--root", "2"]),
    (REFUSED, ["run", "-n", "3", "all-reduce", "--algorithm", "hierarchical",
               "--ranks-per-node", "2"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--op", "xor"]),
    (REFUSED, ["run", "-n", "2", "all-reduce", "--dtype", "complex64"]),
    (REFUSED, ["run", "-n", "2", "sendrecv"]),  # not a collective (all-to-all now is)
    # bench, calibrate, validate: refused before a process starts
    (REFUSED, ["bench", "-n", "100000"]),  # nccl-tests' -n: timed calls, 10,000 at most
    (REFUSED, ["bench", "--ranks", "100000"]),
    (REFUSED, ["bench", "--ranks", OVER_CORES]),
    (REFUSED, ["bench", "--ranks", "2", "-b", "1", "-e", "1e18", "-f", "1.0000001"]),
    (REFUSED, ["bench", "--ranks", "2", "-f", "inf"]),
    (REFUSED, ["bench", "--ranks", "2", "-f", "1"]),
    (REFUSED, ["bench", "--ranks", "2", "-f", "nan"]),
    (REFUSED, ["bench", "--ranks", "2", "-e", "1e30"]),
    (REFUSED, ["bench", "--ranks", "2", "-e", "100TB", "-f", "1000"]),
    (REFUSED, ["bench", "--ranks", "2", "-b", "1M", "-e", "64K"]),
    (REFUSED, ["bench", "--ranks", "2", "-b", "-4K"]),
    (REFUSED, ["bench", "--ranks", "2", "--iters", "1000000000"]),
    (REFUSED, ["bench", "--ranks", "2", "--iters", "10001"]),
    (REFUSED, ["bench", "--ranks", "2", "-w", "-1"]),
    (REFUSED, ["bench", "--ranks", "2", "--budget", "0s"]),
    (REFUSED, ["bench", "--ranks", "2", "--json", "/nonexistent/x.json"]),
    (REFUSED, ["bench", "--ranks", "2", "--csv", "{tmp}"]),
    (REFUSED, ["bench", "--ranks", "2", "--plot", "x.jpg"]),
    (REFUSED, ["bench", "--ranks", "2", "--from", "/nonexistent.json"]),
    (REFUSED, ["bench", "--ranks", "2", "--from", "{tmp}/binary.json"]),
    (REFUSED, ["bench", "--ranks", "2", "--from", "{tmp}/empty.json"]),
    (REFUSED, ["bench", "--ranks", "2", "--collective", "sendrecv"]),
    (REFUSED, ["bench", "--ranks", "2", "--algorithms", "warp"]),
    (REFUSED, ["calibrate", "-n", "2", "-o", "/nonexistent/x.toml"]),
    (REFUSED, ["calibrate", "-n", "2", "-o", "x.json"]),
    (REFUSED, ["calibrate", "-n", "2"]),
    (REFUSED, ["calibrate", "-n", "2", "-o", "{tmp}/p.toml", "--from", "{tmp}/empty.json"]),
    (REFUSED, ["calibrate", "-n", "2", "-o", "{tmp}/p.toml", "--cores", "0"]),
    (REFUSED, ["calibrate", "-n", "2", "-o", "{tmp}/p.toml", "--save", "/nonexistent/s.json"]),
    (REFUSED, ["validate", "-n", "2"]),
    (REFUSED, ["validate", "-n", "2", "--profile", "/nonexistent.toml"]),
    (REFUSED, ["validate", "-n", "2", "--profile", "{tmp}/garbage.toml"]),
    (REFUSED, ["validate", "-n", "2", "--profile", "{tmp}/profile.toml", "--plot",
               "/nonexistent/x.png"]),
    (REFUSED, ["validate", "-n", "2", "--profile", "{tmp}/profile.toml", "-e", "1e30"]),
    # lab ddp: refused before a process starts
    (REFUSED, ["lab"]),
    (REFUSED, ["lab", "tensor"]),
    (REFUSED, ["lab", "ddp", "-n", "65"]),
    (REFUSED, ["lab", "ddp", "-n", "0"]),
    (REFUSED, ["lab", "ddp", "-n", OVER_CORES]),
    (REFUSED, ["lab", "ddp", "--steps", "1000000000"]),
    (REFUSED, ["lab", "ddp", "--steps", "10001"]),
    (REFUSED, ["lab", "ddp", "--seed", "99999999999999999999"]),
    (REFUSED, ["lab", "ddp", "--seed", "-1"]),
    (REFUSED, ["lab", "ddp", "--bucket-cap-mb", "0"]),
    (REFUSED, ["lab", "ddp", "--bucket-cap-mb", "nan"]),
    (REFUSED, ["lab", "ddp", "--algorithm", "hierarchical"]),
    (REFUSED, ["lab", "ddp", "--trace", "/nonexistent/x.json"]),
    (REFUSED, ["lab", "ddp", "--price-cluster-hour", "-1"]),
    # demo
    (REFUSED, ["demo", "extra"]),
    (REFUSED, ["demo", "--json", "--bogus"]),
]

#: Run as real processes (``python -m ringtree``): the acceptance check's lines and a few of
#: each kind, to see the real exit status and that no traceback escapes.
SUBPROCESS = [
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1e30", "--link", "ib-hdr"]),
    (REFUSED, ["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr", "--plot",
               "/nonexistent/dir/x.png"]),
    (REFUSED, ["trace", "all-reduce", "-n", "100000"]),
    (REFUSED, ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--link", "ib-hdr",
               "--chunks", "100000000"]),
    (REFUSED, ["plan", "--model", "7b", "--gpus", "1000000000"]),
    (REFUSED, ["trace", "all-reduce", "-n", "1024"]),
    (REFUSED, ["run", "-n", "100000", "all-reduce"]),
    (REFUSED, ["bench", "-n", "100000"]),
    (REFUSED, ["plan", "--model", "7b", "--gpus", "8", "--layers", HUGE]),
    (REFUSED, ["lab", "ddp", "--seed", "99999999999999999999"]),
    (VALID, ["cost", "all-reduce", "-n", "100000000", "--size", "1GB", "--link", "ib-hdr"]),
    (VALID, ["--version"]),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> str:
    from ringtree.cost.host import HostLink, HostModel
    from ringtree.cost.profile import link_table, write_profile

    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "garbage.toml").write_text("not = [toml")
    (tmp / "binary.json").write_bytes(b"\x00\xff\xfe\x80")
    (tmp / "empty.json").write_text("{}")
    (tmp / "huge.toml").write_text("[cluster]\ngpus = 100000000000\n")
    (tmp / "dir.png").mkdir()
    link = HostLink("gloo-2", bandwidth_Bps=1e9, alpha_s=3e-4,
                    host=HostModel(2, 6e-5, 1.8e-4, 1.9e9, 2.5e-10, n_ranks=2))
    write_profile(tmp / "profile.toml", {"links": {"gloo": link_table(link)}})
    return str(tmp)


def _id(argv: list[str]) -> str:
    return " ".join(argv).replace(HUGE, "HUGE")[:70] or "(nothing)"


def _argv(argv: list[str], tmp: str) -> list[str]:
    return [a.replace("{tmp}", tmp) for a in argv]


def _check(expected: int, code: int, err: str, argv: list[str]) -> None:
    assert "Traceback" not in err, (argv, err)
    assert code == expected, (argv, code, err)
    if code == REFUSED:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ringtree: error: "), (argv, err)
        assert lines[0].endswith("--help')"), (argv, err)


def _no_processes(*args: object, **kwargs: object) -> None:
    raise AssertionError("a fuzz case started a process: it must be refused before that")


def test_at_least_a_hundred_cases_cover_every_command():
    assert len(CASES) + len(SUBPROCESS) >= 100
    commands = {a[0] for _, a in CASES if a and not a[0].startswith("-")}
    assert commands >= {"trace", "cost", "links", "crossover", "plan", "run", "bench",
                        "calibrate", "validate", "lab", "demo"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("expected", "argv"), CASES, ids=[_id(a) for _, a in CASES])
def test_in_process(expected, argv, scratch, capsys, monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", _no_processes)
    args = _argv(argv, scratch)
    code = main(args)
    _check(expected, code, capsys.readouterr().err, args)


@pytest.mark.multiproc
@pytest.mark.parametrize(("expected", "argv"), SUBPROCESS, ids=[_id(a) for _, a in SUBPROCESS])
def test_as_a_process(expected, argv, scratch):
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ringtree", *_argv(argv, scratch)],
                          capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 30
    _check(expected, proc.returncode, proc.stderr, argv)
