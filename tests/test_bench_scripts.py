"""bench/engine_vs_native.py: what --algorithm runs, and a bad name refused up front."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "engine_vs_native.py"


def load():
    spec = importlib.util.spec_from_file_location("engine_vs_native", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_an_algorithm_runs_where_the_collective_has_it_else_auto(capsys):
    bench = load()
    assert bench.algorithms_per_collective("Ring") == {"all-reduce": "ring",
                                                       "reduce-scatter": "ring",
                                                       "all-to-all": "auto"}
    got = bench.algorithms_per_collective("rabenseifner")
    assert got == {"all-reduce": "rabenseifner", "reduce-scatter": "auto", "all-to-all": "auto"}
    assert "reduce-scatter has no rabenseifner algorithm: it runs auto" in capsys.readouterr().err
    assert bench.algorithms_per_collective("bruck", ("all-to-all",)) == {"all-to-all": "bruck"}


def test_an_unknown_algorithm_exits_2_before_starting_anything(capsys):
    with pytest.raises(SystemExit) as e:
        load().main(["--algorithm", "bogus", "--ranks", "2", "--sizes", "4KiB"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--algorithm 'bogus': expected auto or one of" in err


def test_a_call_lasts_from_the_last_entry_to_the_last_exit():
    bench = load()
    # two iterations, three ranks: (entry, exit) on the shared clock
    per_rank = [[(0.0, 5.0), (10.0, 12.0)], [(1.0, 4.0), (10.5, 13.0)], [(2.0, 6.0), (9.0, 11.0)]]
    assert bench.call_times(per_rank) == pytest.approx([4.0, 2.5])


def test_runs_combine_into_medians_over_runs_with_each_run_kept():
    bench = load()
    cell = {"backend": "gloo", "n_ranks": 2, "collective": "reduce-scatter", "size_bytes": 1 << 20,
            "algorithm": "ring"}
    per_run = ((1.0, 2.0, 0.6, 0), (3.0, 5.0, 0.4, 1), (2.0, 9.0, 0.5, 0))
    runs = [[{**cell, "ringtree_s": t, "native_s": u, "ratio": q, "wrong": w}]
            for t, u, q, w in per_run]
    (row,) = bench.combine_runs(runs)
    assert (row["ringtree_s"], row["native_s"], row["ratio"], row["wrong"]) == (2.0, 5.0, 0.5, 1)
    assert row["ratio_runs"] == [0.6, 0.4, 0.5] and row["algorithm"] == "ring"
    assert bench.bar(row) == ">= 1.8x faster ok"  # 1 / 0.5 = 2x
    a2a = {**row, "collective": "all-to-all"}
    assert bench.bar({**a2a, "ratio": 1.19}) == "<= 1.20 ok"
    assert bench.bar({**a2a, "ratio": 1.3}) == "<= 1.20 MISS"
    assert bench.bar({**a2a, "ratio": 1.3, "size_bytes": 1 << 18}) == "<= 1.50 ok"


@pytest.mark.parametrize("flag", ["--runs", "--iters"])
@pytest.mark.parametrize("value", ["0", "-2", "three"])
def test_runs_and_iters_below_one_exit_2_with_one_line(capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        load().main([flag, value, "--ranks", "2", "--sizes", "4KiB"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{flag}: expected a whole number >= 1, got '{value}'" in err


def test_small_cells_time_more_iterations_unless_iters_is_given():
    bench = load()
    sizes = [4096, (4 << 20) - 1, 4 << 20, 64 << 20]
    assert bench.iterations(sizes, None) == [120, 120, 30, 30]
    assert bench.iterations(sizes, 7) == [7, 7, 7, 7]
