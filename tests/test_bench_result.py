"""Bench results: the JSON round trip gives back the same rows and the same table; CSV;
the text table's fixed columns; sizes and bad sweep settings."""

from __future__ import annotations

import json

import pytest

from ringtree.cli import main
from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.measure.result import CSV_COLUMNS, BenchResult, Row
from ringtree.measure.sweep import Sweep, sizes, validate_sweep
from ringtree.measure.table import header_lines, render_text, row_line


def sample_result() -> BenchResult:
    rows = [
        Row("all-reduce", "ring", 4096, 1024, "float32", "sum", None, 1234.5678, 0.0033179,
            0.0049769, 0, 17, None, 0.5, (1000.25, 1234.5678, 3000.0)),
        Row("all-reduce", "tree", 4096, 1024, "float32", "sum", None, 812.1, 0.005044, 0.00756,
            0, 17, 2, 0.25, (812.1,)),
        Row("broadcast", "native", 1 << 20, 1 << 18, "float32", None, 3, 2500.0, 0.4194304,
            0.4194304, 0, 9),
    ]
    meta = {"backend": "gloo", "n_ranks": 4, "cores": 2, "ringtree": "0.1.0", "iters": 17,
            "load": {"sweep_cores": 1.5, "other_cores": 0.25, "timed_wall_s": 3.0}}
    return BenchResult(meta, rows)


def test_json_round_trip_gives_the_same_rows_and_the_same_table():
    r = sample_result()
    text = json.dumps(r.record())
    back = BenchResult.from_record(json.loads(text))
    assert back.rows == r.rows
    assert back.meta == r.meta
    assert render_text(back) == render_text(r)


def test_json_rows_use_nccl_tests_column_names():
    rec = sample_result().record()
    row = rec["rows"][0]
    for key in ("size", "count", "type", "redop", "root", "time_us", "algbw", "busbw", "wrong"):
        assert key in row
    assert rec["units"]["algbw"] == "GB/s" and rec["units"]["time_us"] == "us"


def test_table_has_fixed_columns_and_comment_lines():
    text = render_text(sample_result())
    lines = text.splitlines()
    assert all(ln.startswith("#") or ln.split()[0].isdigit() for ln in lines if ln)
    data = [ln for ln in lines if not ln.startswith("#")]
    assert len(data) == 3
    assert data[0].split() == ["4096", "1024", "float", "sum", "-1", "1234.6", "0.003",
                               "0.005", "0", "17"]  # nccl-tests' type name
    assert data[2].split()[3:5] == ["none", "3"]  # broadcast: no op, its root
    header = header_lines([True])[1]
    assert header in lines and "# wrong elements: 0 OK" in lines
    assert header.split() == ["#", "size", "count", "type", "redop", "root", "time", "algbw",
                              "busbw", "#wrong", "iters"]
    # saved before placements were recorded: one group, the collective's one (torch) form
    assert header_lines([True])[0].split() == ["#", "in-place"]
    assert "# Out of bounds values : 0 OK" in lines
    assert "# Avg bus bandwidth    : 0.0049769 " in lines  # the ring's table, %g
    assert "# all-reduce  algorithm: tree (pipeline chunks: 2)" in lines
    assert "other programs 0.25 cores" in text
    assert len(row_line([sample_result().rows[0]])) == len(header_lines([True])[1])


def test_csv_has_one_line_per_row():
    csv = sample_result().csv_text().splitlines()
    assert csv[0].split(",") == list(CSV_COLUMNS)
    assert len(csv) == 4 and csv[2].startswith("all-reduce,tree,4096,1024,float32,sum,,812.1")


def test_bench_from_saved_json_prints_the_same_table(tmp_path, capsys):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(sample_result().record()))
    assert main(["bench", "-n", "4", "--from", str(path)]) == 0
    assert capsys.readouterr().out == render_text(sample_result())


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "not JSON"), ('{"rows": 3}', '"rows"'), ('{"rows": [{"size": 1}]}', "lacks")],
)
def test_malformed_saved_results_are_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(RingtreeError, match=message):
        BenchResult.load(path)
    with pytest.raises(RingtreeError, match="cannot read"):
        BenchResult.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [("time_us", None, "'time_us' is None: expected int or float"),
     ("size", "abc", "'size' is 'abc': expected int"), ("wrong", True, "'wrong' is True"),
     ("times_us", [1.0, "x"], "'times_us' is"), ("collective", "foo", "unknown collective")],
)
def test_a_saved_row_of_the_wrong_types_is_refused_by_name(tmp_path, key, value, message):
    data = sample_result().record()
    data["rows"][0][key] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RingtreeError, match=message) as info:
        BenchResult.load(path)
    assert str(info.value).startswith("malformed bench results")


def test_sizes_are_geometric_and_include_both_ends():
    assert sizes(4096, 16 << 20, 4) == [4096 << (2 * k) for k in range(7)]
    assert sizes(1000, 1000, 2) == [1000]
    assert sizes(100, 1000, 1.5) == [100, 150, 225, 338, 506, 759]


@pytest.mark.parametrize(
    ("lo", "hi", "f", "message"),
    [(2000, 1000, 2, "larger than maximum"), (1, 10, 1, "> 1"), (1, 10, 0.5, "> 1"),
     (0, 10, 2, ">= 1 byte")],
)
def test_bad_sizes_are_one_line_errors(lo, hi, f, message):
    with pytest.raises(RingtreeError, match=message):
        sizes(lo, hi, f)


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        (Sweep(2, (64,), algorithms=("bogus",)), "unknown algorithm 'bogus'"),
        (Sweep(2, (64,), collectives=(Collective.REDUCE_SCATTER,), in_place=True), "in-place"),
        (Sweep(2, (64,), collectives=(Collective.BROADCAST,), root=2), "root 2"),
        (Sweep(2, (64,), dtype="complex64"), "dtype"),
        (Sweep(2, (64,), algorithms=("rabenseifner",),
               collectives=(Collective.BROADCAST,)), "unknown algorithm 'rabenseifner' for b"),
        (Sweep(2, (64,), algorithms=("rabenseifner",),
               collectives=(Collective.ALL_REDUCE, Collective.BROADCAST)),
         "none of the algorithms asked for runs broadcast"),
        (Sweep(2, (64,), backend="nccl"), "backend"),
    ],
)
def test_bad_sweeps_are_refused_before_any_process_starts(sweep, message):
    with pytest.raises(RingtreeError, match=message):
        validate_sweep(sweep)
