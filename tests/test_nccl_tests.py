"""The nccl-tests parser on published logs (tests/data/nccl_tests, README there): tests, ranks,
hosts and GPUs as their "Using devices" lists say, every row's busbw recomputed from its time
with nccl-tests' bus factor; tags, INFO lines and broken input; a round trip property."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.measure.nccl_lines import demultiplex
from ringtree.measure.nccl_tests import parse_file, parse_text, size_label

DATA = Path(__file__).parent / "data" / "nccl_tests"
H100 = "NVIDIA H100 80GB HBM3"
#: file -> [(test, ranks, hosts, GPUs per host, GPU, rows)] as each file's text says
EXPECTED = {
    "keitaw-p5-2x8-h100-all_reduce-info-tagged": [("all_reduce", 16, 2, 8, H100, 32)],
    "issue290-1x8-h100-one-process": [("all_reduce", 8, 1, 8, H100, 6)],
    "issue290-2x8-h100-srun-label": [("all_reduce", 16, 2, 8, H100, 11)],
    "issue290-2x8-h100-ring-no-header": [("all_reduce", 16, 2, 8, H100, 11)],
    "alcf-polaris-2x4-a100-alltoall": [("alltoall", 8, 2, 4, "NVIDIA A100-SXM4-40GB", 29)],
    "alcf-sophia-2x8-a100-all_gather": [("all_gather", 16, 2, 8, "NVIDIA A100-SXM4-40GB", 29)],
    "xxrjun-10x8-h100-five-tests": [(t, 80, 10, 8, H100, 10) for t in (
        "all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")],
    "xxrjun-2x1-h100-truncated": [("alltoall", 2, 2, 1, H100, 10)],
    "wohlbier-dgx2-12xv100-five-tests-old": [(t, 12, 1, 12, "Tesla V100-SXM3-32GB", 31) for t in (
        "all_gather", "all_reduce", "broadcast", "reduce", "reduce_scatter")],
    "together-1x8-h100-all_gather-nvls": [("all_gather", 8, 1, 8, H100, 31)],
    "skypilot-2x8-h200-all_gather-tagged": [("all_gather", 16, 2, 8, "NVIDIA H200", 24)],
    "gcp-a3ultra-2x8-h200-all_gather": [("all_gather", 16, 2, 8, "NVIDIA H200", 24)],
}


def factor(test: str, n: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md), written out here as the reference."""
    if test == "all_reduce":
        return 2 * (n - 1) / n
    if test in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0  # broadcast, reduce, sendrecv


def half_unit(text: str) -> float:
    """Half of the last printed digit of a number as nccl-tests printed it."""
    return 0.5 * 10.0 ** -len(text.split(".")[1]) if "." in text else 0.5


def test_every_published_log_is_in_the_table_and_the_readme():
    files = {p.stem for p in DATA.glob("*.log")}
    assert files == set(EXPECTED) and len(files) >= 10
    readme = (DATA / "README.md").read_text()
    assert all(f"`{name}.log`" in readme for name in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tests_ranks_hosts_and_gpus_as_the_log_says(name):
    tests = parse_file(DATA / f"{name}.log")
    got = [(t.test, t.n_ranks, t.nodes, t.gpus_per_node, t.gpu, len(t.rows)) for t in tests]
    assert got == EXPECTED[name]
    text = (DATA / f"{name}.log").read_text()
    for t in tests:  # the device list's rank numbers, 0..N-1, as printed
        assert [d.rank for d in t.devices] == list(range(t.n_ranks))
        assert set(t.hosts) <= set(re.findall(r" on +(\S+) device", text))
        assert not t.ranks_inferred


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_busbw_recomputed_from_size_and_time_matches_the_printed_one(name):
    text = (DATA / f"{name}.log").read_text()
    checked = 0
    for t in parse_file(DATA / f"{name}.log"):
        f = factor(t.test, t.n_ranks)
        for row in t.rows:
            for timing in (row.out_of_place, row.in_place):
                if timing is None or row.size_bytes == 0:
                    continue
                # the time as printed (3-5 figures): its rounding is part of the tolerance
                printed = _printed_time(text, row.line, timing.time_us)
                rel = half_unit(printed) / timing.time_us
                busbw = row.size_bytes / (timing.time_us * 1e3) * f
                assert busbw == pytest.approx(timing.busbw_gbps, abs=0.005 + 1.01 * rel * busbw)
                checked += 1
    assert checked >= 10


def _printed_time(text: str, line: int, value: float) -> str:
    """The token on (or, for rows Open MPI split, after) ``line`` that prints ``value``."""
    lines = text.splitlines()[line - 1: line + 3]
    for token in re.findall(r"[\d.]+", " ".join(lines)):
        if "." in token or token.isdigit():
            try:
                if float(token) == value:
                    return token
            except ValueError:
                continue
    raise AssertionError(f"time {value} not on line {line}")


def test_footers_versions_and_settings_as_printed():
    (p5,) = parse_file(DATA / "keitaw-p5-2x8-h100-all_reduce-info-tagged.log")
    assert (p5.avg_busbw_gbps, p5.out_of_bounds, p5.nccl_version) == (124.584, 0, "2.22.3")
    assert p5.header == {"nthread": 1, "ngpus": 1, "min_bytes": 8, "max_bytes": 17179869184,
                         "step": "2(factor)", "warmup_iters": 5, "iters": 100, "agg_iters": 1,
                         "validation": 1, "graph": 0}
    assert dict(p5.env)["NCCL_BUFFSIZE"] == "8388608"
    old = parse_file(DATA / "wohlbier-dgx2-12xv100-five-tests-old.log")
    assert old[0].out_of_bounds == 4 and old[0].rows[-1].out_of_place.max_error == 1.0
    assert old[2].rows[0].root == 0 and old[2].rows[0].redop is None  # broadcast, old columns
    assert old[0].rows[3].out_of_place.wrong is None
    ten = parse_file(DATA / "xxrjun-10x8-h100-five-tests.log")
    assert {t.tests_version for t in ten} == {"2.17.8"} and ten[0].rows[0].dtype == "double"
    (gcp,) = parse_file(DATA / "gcp-a3ultra-2x8-h200-all_gather.log")
    assert gcp.nccl_version == "2.26.6"
    (srun,) = parse_file(DATA / "issue290-2x8-h100-srun-label.log")
    assert srun.header["validation"] == 0 and srun.rows[0].out_of_place.wrong is None
    assert srun.collective is Collective.ALL_REDUCE


def test_rows_split_by_open_mpi_tags_are_joined():
    (p5,) = parse_file(DATA / "keitaw-p5-2x8-h100-all_reduce-info-tagged.log")
    first = p5.rows[0]
    assert (first.size_bytes, first.count, first.dtype, first.redop, first.root) == (
        8, 2, "float", "sum", -1)
    assert (first.out_of_place.time_us, first.in_place.time_us) == (85.70, 74.97)
    records = p5.records()
    assert len(records) == 64 and records[1].in_place and records[1].time_us == 74.97
    assert records[0].nodes == 2 and records[0].gpus_per_node == 8


def test_a_row_broken_by_another_rank_s_line_is_put_back_together():
    text = ("[1,0]<stdout>:#       size         count      type   redop    root     time   "
            "algbw   busbw #wrong     time   algbw   busbw #wrong\n"
            "[1,0]<stdout>:     1048576        262144     float     sum      -1[1,3]<stdout>:"
            "host:9:9 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM\n"
            "[1,0]<stdout>:    123.2    8.51   15.96      0[1,0]<stdout>:    123.2    8.51   "
            "15.96      0\n")
    (t,) = parse_text(text, "all_reduce_perf.log")
    assert t.rows[0].out_of_place.busbw_gbps == 15.96 and t.rows[0].line == 2
    assert t.n_ranks == 16 and t.ranks_inferred  # 15.96 / 8.51 = 2 (N - 1) / N at N = 16


def test_an_unnamed_table_is_told_by_its_numbers_or_refused():
    text = (DATA / "keitaw-p5-2x8-h100-all_reduce-info-tagged.log").read_text()
    (t,) = parse_text(text, "nccl.log")  # no test named anywhere: redop sum, root -1, 1.875
    assert t.test == "all_reduce"
    sophia = (DATA / "alcf-sophia-2x8-a100-all_gather.log").read_text()
    with pytest.raises(RingtreeError, match=r"x\.log, line 1: .*all_gather or alltoall"):
        parse_text(sophia, "x.log")


@pytest.mark.parametrize("bad, what", [
    ("   4096   1024  float  sum  -1  12.x\n", r"line 5: a result row has 6 fields"),
    ("        4096          1024     float     sum      -1    12.x    0.00    0.00      0    "
     "1.0    0.00    0.00      0\n", r"line 5: time '12.x' is not a number"),
    ("        4096          1024     float     sum      -1    78.58    0.05    0.10      x    "
     "78.58    0.05    0.10      0\n", r"line 5: #wrong 'x'"),
])
def test_a_malformed_row_is_one_error_naming_the_file_and_line(bad, what):
    head = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 "
            "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n#       size         count      "
            "type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw "
            "#wrong\n#        (B)    (elements)\n")
    with pytest.raises(RingtreeError, match=r"^run\.log, " + what):
        parse_text(head + bad, "run.log")


def test_no_rows_and_no_file_are_errors():
    with pytest.raises(RingtreeError, match="no nccl-tests result rows"):
        parse_text("hello\n# nThread 1 nGpus 1\n", "empty.log")
    with pytest.raises(RingtreeError, match="cannot read nccl-tests log '/nonexistent.log'"):
        parse_file("/nonexistent.log")


def test_sizes_are_labelled_as_nccl_tests_users_read_them():
    assert [size_label(n) for n in (8, 65536, 64 << 20, 16 << 30, 33553920)] == [
        "8 B", "64 KiB", "64 MiB", "16 GiB", "33.6 MB"]


ROW = st.tuples(st.integers(0, 40), st.floats(1.0, 1e6), st.floats(1.0, 1e6))
TAGS = st.sampled_from(["", " 0: ", "[1,0]<stdout>:", "(head, rank=0, pid=7) [1,0]<stdout>:",
                        "[0] "])


@given(st.lists(ROW, min_size=1, max_size=12, unique_by=lambda r: r[0]), TAGS,
       st.integers(0, 2), st.booleans())
def test_rows_written_as_nccl_tests_writes_them_read_back(rows, tag, splits, info):
    """Rows written in nccl-tests' layout, behind a launcher's tag, Open MPI's cut into
    ``splits`` extra tagged pieces, with INFO lines between, read back as written."""
    lines = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "# Using devices"]
    lines += [f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on node-{r // 4} device {r % 4:2d} "
              "[0x1a] NVIDIA H100 80GB HBM3" for r in range(8)]
    lines.append("#       size         count      type   redop    root     time   algbw   "
                 "busbw #wrong     time   algbw   busbw #wrong")
    want = []
    for e, t_out, t_in in sorted(rows):
        size = 4 << e
        cells = [f"{size:12d}  {size // 4:12d}     float     sum      -1",
                 f" {t_out:8.2f} {1.0:7.2f} {1.75:7.2f}  {0:5d}",
                 f" {t_in:8.2f} {1.0:7.2f} {1.75:7.2f}  {0:5d}"]
        want.append((size, round(t_out, 2), round(t_in, 2)))
        if tag.endswith("<stdout>:") and splits:  # Open MPI tags each write, mid-line too
            lines.append(tag + "[1,0]<stdout>:".join(cells[: splits + 1])
                         + "".join(cells[splits + 1:]))
        else:
            lines.append("".join(cells))
        if info:
            lines.append("node-1:105:99 [1] NCCL INFO Channel 00/0 : 5[1] -> 6[2] via P2P")
    text = "\n".join(line if line.startswith(tag) else tag + line for line in lines) + "\n"
    (t,) = parse_text(text, "all_reduce_perf.log")
    assert [(r.size_bytes, r.out_of_place.time_us, r.in_place.time_us) for r in t.rows] == want
    assert (t.n_ranks, t.nodes, t.gpus_per_node) == (8, 2, 4)


def test_demultiplex_keeps_line_numbers_of_where_a_line_began():
    lines = list(demultiplex("[1,0]<stdout>:a[1,1]<stdout>:x\nplain\n[1,0]<stdout>:b\n"))
    assert [(ln.number, ln.text) for ln in lines] == [(1, "x"), (2, "plain"), (1, "ab")]


def test_ringtree_bench_s_own_text_reads_back():
    """``ringtree bench``'s text (measure/table.py): a block per collective and algorithm."""
    from ringtree.measure.result import BenchResult
    from ringtree.measure.result import Row as BenchRow
    from ringtree.measure.table import render_text

    rows = [BenchRow("all-reduce", alg, s, s // 4, "float32", "sum", None, t, s / t / 1e3,
                     1.5 * s / t / 1e3, 0, 20, 4 if alg == "ring" else None)
            for alg, t0 in (("ring", 90.0), ("tree", 120.0))
            for s, t in ((65536, t0), (1 << 20, t0 * 8), (16 << 20, t0 * 100))]
    rows.append(BenchRow("all-gather", "ring", 1 << 20, 1 << 16, "float32", None, None, 500.0,
                         2.1, 1.57, 0, 20))
    meta = {"backend": "gloo", "n_ranks": 4, "cores": 2, "host": "h", "ringtree": "0.1.0"}
    tests = parse_text(render_text(BenchResult(meta, rows)), "bench.txt")
    assert [(t.test, t.algorithm, t.n_ranks, len(t.rows)) for t in tests] == [
        ("all_reduce", "ring", 4, 3), ("all_reduce", "tree", 4, 3), ("all_gather", "ring", 4, 1)]
    assert [r.out_of_place.time_us for r in tests[1].rows] == [120.0, 960.0, 12000.0]
    assert tests[0].rows[1].out_of_place.busbw_gbps == pytest.approx(1.5 * (1 << 20) / 720e3,
                                                                     abs=5e-4)
