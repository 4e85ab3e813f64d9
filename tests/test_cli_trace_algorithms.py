"""``ringtree trace`` for every registered algorithm, and its one-line errors."""

import json

import pytest

from conftest import refused
from ringtree.algorithms import algorithms_for
from ringtree.cli import main
from ringtree.collectives import Collective

ALL = [(c, a) for c in Collective for a in algorithms_for(c)]


@pytest.mark.parametrize("case", ALL, ids=lambda k: f"{k[0].value}-{k[1]}")
def test_trace_every_algorithm(case, capsys):
    collective, algorithm = case
    argv = ["trace", collective.value, "-n", "6", "--algorithm", algorithm, "--json"]
    if algorithm == "hierarchical":
        argv += ["--ranks-per-node", "3"]
    if collective.has_root:
        argv += ["--root", "4"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["algorithm"] == algorithm and data["n_ranks"] == 6
    assert data["steps"], "no steps"
    # after the last step every rank that must hold the result holds it complete
    last = data["steps"][-1]["complete"]
    if collective is Collective.ALL_REDUCE or collective is Collective.ALL_GATHER:
        assert all(len(c) == data["n_chunks"] for c in last)


def test_trace_tree_table_on_seven_ranks(capsys):
    assert main(["trace", "all-reduce", "-n", "7", "--algorithm", "tree", "--chunks", "2"]) == 0
    out = capsys.readouterr().out
    assert "tree all-reduce on 7 ranks" in out
    assert sum(line.strip("│ ").startswith("step ") for line in out.splitlines()) == 2 * 3 + 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["all-gather", "-n", "4", "--algorithm", "tree"], "unknown algorithm 'tree'"),
        (["all-reduce", "-n", "6", "--algorithm", "hierarchical", "--ranks-per-node", "4"],
         "does not divide"),
        (["all-reduce", "-n", "6", "--algorithm", "hierarchical"], "ranks per node"),
        (["all-reduce", "-n", "6", "--algorithm", "rabenseifner", "--no-fold"], "power-of-two"),
        (["all-gather", "-n", "12", "--algorithm", "recursive", "--no-fold"], "power-of-two"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, says, capsys):
    assert says in refused(capsys, ["trace", *argv])
