"""``ringtree bench`` on real processes (short runs), its JSON twin and CSV, nccl-tests'
flags, units and output (lines printed as measured, out-of-place and in-place groups, the
footers), and bad input refused in one line with exit status 2 before any process starts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_main
from ringtree.cli import main
from ringtree.collectives import Collective, bus_factor


@pytest.mark.multiproc
def test_every_collective_on_three_gloo_processes_is_right_and_round_trips(tmp_path, capsys):
    out, csv = tmp_path / "r.json", tmp_path / "r.csv"
    cols = ["all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce"]
    files = ["--json", str(out), "--csv", str(csv)]
    proc = run_main(capsys, "bench", "-g", "3", "-b", "4K", "-e", "40K", "-f", "10", "-w",
                    "1", "-n", "2", "--collective", *cols, "-r", "2", *files)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    rows = data["rows"]
    # every algorithm each collective has on 3 ranks (hierarchical needs nodes), and native
    want = {"all-reduce": 7, "reduce-scatter": 4, "all-gather": 4, "broadcast": 3, "reduce": 3}
    for col, k in want.items():
        assert len({r["algorithm"] for r in rows if r["collective"] == col}) == k
    # out of place and in place, but reduce-scatter, which torch has out of place only
    placed = {c: ([False] if c == "reduce-scatter" else [False, True]) for c in want}
    assert len(rows) == 2 * sum(k * len(placed[c]) for c, k in want.items())
    for r in rows:
        assert r["wrong"] == 0 and r["iters"] == 2 and len(r["times_us"]) == 2
        assert r["algbw"] == pytest.approx(r["size"] / r["time_us"] / 1e3)
        factor = bus_factor(Collective.parse(r["collective"]), 3)
        assert r["busbw"] == pytest.approx(r["algbw"] * factor)
        assert r["root"] == (2 if r["collective"] in ("broadcast", "reduce") else None)
        assert r["in_place"] in placed[r["collective"]]
    rs = [r for r in rows if r["collective"] == "reduce-scatter"]
    assert {r["count"] for r in rs} == {1023, 10239}  # 4K = 4096 B -> 1024 floats -> 3 x 341
    assert len(csv.read_text().splitlines()) == len(rows) + 1
    # the saved JSON prints the same table
    again = run_main(capsys, "bench", "--from", str(out))
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert "# wrong elements: 0 OK" in proc.stdout
    _reads_as_nccl_tests_prints(proc.stdout, n_tables=sum(want.values()), n_ranks=3)


def _reads_as_nccl_tests_prints(text: str, n_tables: int, n_ranks: int) -> None:
    """nccl-tests' lines (src/util.cu): the '# nThread' header, '# Using devices' with a
    line per rank, per table the 'out-of-place in-place' labels and its columns, a row of
    'size count type redop root' then groups of 'time algbw busbw #wrong', and the footers
    '# Out of bounds values : N OK' and '# Avg bus bandwidth : X'."""
    lines = text.splitlines()
    assert sum(ln.startswith("# nThread 1 nGpus 1 minBytes 4096 maxBytes 40960 step: 10"
                             "(factor) warmup iters: 1 iters: 2") for ln in lines) == 1
    assert sum(ln.startswith("#  Rank ") and " Pid " in ln for ln in lines) == n_ranks
    heads = [ln.split() for ln in lines if ln.split()[1:3] == ["size", "count"]]
    assert len(heads) == n_tables
    for h in heads:
        assert h[1:6] == ["size", "count", "type", "redop", "root"]
        assert h[6:10] == ["time", "algbw", "busbw", "#wrong"] and h[-1] == "iters"
    labels = [ln.split()[1:] for ln in lines if "out-of-place" in ln]
    assert len(labels) == n_tables and ["out-of-place", "in-place"] in labels
    assert sum(ln.startswith("# Out of bounds values : 0 OK") for ln in lines) == n_tables
    avg = [ln for ln in lines if ln.startswith("# Avg bus bandwidth    : ")]
    assert len(avg) == n_tables and all(float(a.split(":")[1]) > 0 for a in avg)
    for ln in lines:
        if not ln.startswith("#"):
            f = ln.split()
            assert f[2] in ("float", "half", "double", "bfloat16", "int8", "int32", "int64")
            assert len(f) in (10, 14)  # lead 5, one or two groups of 4, iters


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-b", "1M", "-e", "64K"], "larger than maximum"),
        (["-f", "1"], "factor -f must be > 1"),
        (["-f", "0.5"], "factor -f must be > 1"),
        (["-f", "x"], "expected a number > 1"),
        (["-b", "-4K"], "negative"),
        (["--algorithms", "ring,bogus"], "unknown algorithm 'bogus'"),
        (["--collective", "reduce-scatter", "--in-place"], "in-place"),
        (["-a", "4"], "4 is too large"),
        (["-d", "bfloat16", "--backend", "mpi"], "bfloat16 is swept over gloo only"),
        (["-d", "uint32"], "dtype 'uint32' is not offered by bench"),
        (["-i", "0"], "size step -i must be >= 1"),
        (["-g", "30", "-t", "40"], "-t 40 x -g 30 = 1,200: at most 1,024 local processes"),
        (["--plot", "x.jpg"], "must end in .png or .svg"),
        (["-o", "xor"], "unknown reduce op"),
        (["-d", "complex64"], "dtype"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(["bench", *([] if "-g" in argv else ["--ranks", "2"]), *argv]) == 2
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


def parsed(*argv: str):
    """bench's arguments as the command reads them, and the sweep they make."""
    from ringtree.cli import build_parser
    from ringtree.commands.sweep_options import sweep_from

    args = build_parser().parse_args(["bench", *argv])
    return args, sweep_from(args)


def test_nccl_tests_flags_mean_what_they_mean_there():
    """all_reduce_perf -b 1K -e 3K -i 1K -n 7 -w 3 -c 0 -a 1 -g 3 -d bfloat16 -o prod -r 1
    -T 9, word for word (before: -n was the ranks, -c the collectives, -a the algorithms)."""
    from ringtree.commands.sweep_options import ignored_flags

    args, sweep = parsed("-b", "1K", "-e", "3K", "-i", "1K", "-n", "7", "-w", "3", "-c", "0",
                         "-a", "1", "-g", "3", "-d", "bfloat16", "-o", "prod", "-r", "1", "-T",
                         "9", "-z", "1", "-G", "1", "-m", "1")
    assert sweep.sizes == (1024, 2048, 3072) and sweep.step == "1024(bytes)"
    assert (sweep.iters, sweep.warmup, sweep.check, sweep.average) == (7, 3, False, 1)
    assert (sweep.n_ranks, sweep.dtype, sweep.op.value, sweep.root) == (3, "bfloat16",
                                                                         "product", 1)
    assert sweep.timeout_s == 9 and sweep.lines and sweep.pairs
    notes = ignored_flags(args)  # -z 1 and -G 1 are not nccl-tests' defaults; -m 1 is
    assert len(notes) == 2 and all("no meaning on CPU: ignored" in n for n in notes)
    assert "-z 1" in notes[0] and "-G 1" in notes[1]
    assert parsed("-t", "2", "-g", "2")[1].n_ranks == 4 and parsed()[1].n_ranks == 1
    # ringtree's own meanings, under long names
    _, own = parsed("--ranks", "2", "--collective", "all-gather", "--algorithms", "ring",
                    "--iters", "5", "--interleave")
    assert own.n_ranks == 2 and own.collectives == (Collective.ALL_GATHER,)
    assert own.algorithms == ("ring",) and own.iters == 5 and not own.lines


@pytest.mark.multiproc
def test_help_says_which_nccl_tests_flags_have_no_meaning_on_cpu(run_cli):
    text = run_cli("bench", "--help").stdout
    assert "nccl-tests flags with no meaning on CPU" in text
    for flag in ("-G", "-R", "-p", "-y", "-m", "-z", "-C", "-u", "-N"):
        assert f"{flag} V" in text
    assert "4K = 4KiB = 4096 B" in text and "-g G" in text and "--ranks N" in text


def test_a_bare_k_is_1024_in_bench_and_cost_alike():
    """One rule for the whole command line (before: bench -b 4K was 4000 B, cost --cluster
    -b 4K 4096 B)."""
    from ringtree.cli import build_parser

    bench = parsed("-b", "4K", "-e", "4K")[1].sizes
    cost = build_parser().parse_args(["cost", "all-reduce", "--cluster", "dgx-h100", "-b",
                                      "4K", "-e", "4K"]).minbytes
    assert bench == (4096,) and cost == 4096
    assert parsed("-b", "4KB", "-e", "4KB")[1].sizes == (4000,)  # a B: decimal, as DESIGN


@pytest.mark.multiproc
def test_lines_come_as_they_are_measured_when_stdout_is_a_pipe():
    """The first line reaches a pipe while the last size is still being measured (before:
    every line at the end)."""
    import time

    cmd = [sys.executable, "-m", "ringtree.cli", "bench", "-g", "2", "-b", "4K", "-e", "4M",
           "-f", "32", "-n", "60", "-w", "1", "--algorithms", "ring"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as proc:
        assert proc.stdout is not None
        seen = [(time.monotonic(), ln) for ln in proc.stdout]
        end = time.monotonic()
    assert proc.returncode == 0
    data = [t for t, ln in seen if not ln.startswith("#")]
    assert len(data) == 3  # 4 KiB, 128 KiB, 4 MiB
    # before: the three together, 0.73 s before the end (the processes' exit). 60 iterations:
    # with 20, the 4 MiB lines came 0.26 s after the first on a lightly loaded 2-core machine
    assert data[-1] - data[0] > 0.3, f"lines {data[0] - end:.2f}, {data[-1] - end:.2f} s"


@pytest.mark.multiproc
def test_bfloat16_over_gloo_is_exact(tmp_path, capsys):
    out = tmp_path / "b.json"
    proc = run_main(capsys, "bench", "-g", "2", "-b", "4K", "-e", "4K", "-d", "bfloat16", "-n",
                    "2", "-w", "1", "--collective", "all-reduce", "all-gather", "--algorithms",
                    "ring,native", "-J", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 8 and all(r["type"] == "bfloat16" and r["wrong"] == 0 for r in rows)
    assert {r["count"] for r in rows} == {2048}  # 4 KiB of 2-byte elements


def test_a_sweep_saved_before_placements_reads_the_same(tmp_path, capsys):
    """A result saved by an earlier ringtree (no in_place; sizes in bytes) reads back and
    prints one group per table, the collective's one form."""
    old = {"meta": {"backend": "gloo", "n_ranks": 2, "in_place": False}, "rows": [
        {"collective": "all-reduce", "algorithm": "ring", "size": 4000, "count": 1000,
         "type": "float32", "redop": "sum", "root": None, "time_us": 100.0, "algbw": 0.04,
         "busbw": 0.04, "wrong": 0, "iters": 5},
        {"collective": "all-gather", "algorithm": "ring", "size": 4000, "count": 1000,
         "type": "float32", "redop": None, "root": None, "time_us": 80.0, "algbw": 0.05,
         "busbw": 0.025, "wrong": 0, "iters": 5}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    assert main(["bench", "--from", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    data = [ln.split() for ln in lines if not ln.startswith("#")]
    assert [d[:3] for d in data] == [["4000", "1000", "float"]] * 2 and len(data[0]) == 10
    labels = [ln.split()[1] for ln in lines if "place" in ln]
    assert labels == ["in-place", "out-of-place"]  # torch's all-reduce, this all-gather
