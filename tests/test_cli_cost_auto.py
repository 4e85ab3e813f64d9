"""``ringtree cost --algorithm auto`` (the default): the row names the algorithm used, whether
the environment forced it, and the competing times."""

import json
import os

import pytest

from conftest import refused
from ringtree.cli import main

WITHOUT_ALGO = {k: v for k, v in os.environ.items() if k != "RINGTREE_ALGO"}
BASE = ["cost", "all-reduce", "--size", "1GB", "-n", "8", "--link", "nvlink4"]


def row(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["rows"][0]


def test_auto_is_the_default_and_says_why(capsys, monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO", raising=False)
    r = row(capsys, BASE)
    assert r["algorithm"] == r["auto_algorithm"] == "ring" and r["forced"] is False
    times = {c["algorithm"]: c["time_s"] for c in r["candidates"]}
    assert set(times) == {"ring", "tree", "dbtree", "recursive", "rabenseifner", "pairwise"}
    assert r["time_s"] == times["ring"]
    # pairwise exchange moves the ring's bytes in as many steps: a tie, which the ring takes
    assert times["pairwise"] == pytest.approx(times["ring"], rel=1e-12)
    assert "hierarchical" in r["skipped"]
    small = row(capsys, ["cost", "all-reduce", "--size", "4KB", "-n", "64", "--link", "ib-hdr"])
    assert small["algorithm"] != "ring"


def test_environment_forces_tree(capsys, monkeypatch):
    monkeypatch.setenv("RINGTREE_ALGO", "tree")
    r = row(capsys, [*BASE, "--algorithm", "auto"])
    assert (r["algorithm"], r["forced"], r["auto_algorithm"]) == ("tree", True, "ring")
    assert r["time_s"] > r["auto_time_s"] and r["n_chunks"] >= 1
    assert main([*BASE, "--algorithm", "auto"]) == 0
    out = capsys.readouterr().out
    assert "tree (forced by RINGTREE_ALGO)" in out
    assert "RINGTREE_ALGO=tree forced tree" in out and "the automatic choice ring" in out
    # an explicit algorithm is not overridden
    assert row(capsys, [*BASE, "--algorithm", "dbtree"])["algorithm"] == "dbtree"


def test_explicit_pipelined_algorithm_reports_its_chunks(capsys, monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO", raising=False)
    tuned = row(capsys, [*BASE, "--algorithm", "tree"])
    fixed = row(capsys, [*BASE, "--algorithm", "tree", "--chunks", "4"])
    assert fixed["n_chunks"] == 4 and tuned["n_chunks"] > 4
    assert tuned["time_s"] < fixed["time_s"]


def test_hierarchical_on_two_levels(capsys, monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO", raising=False)
    argv = ["cost", "all-reduce", "--size", "1GB", "-n", "32", "--link", "nvlink4+ib-hdr",
            "--ranks-per-node", "8"]
    r = row(capsys, argv)
    assert r["algorithm"] == "hierarchical"
    ring = next(c for c in r["candidates"] if c["algorithm"] == "ring")
    assert r["time_s"] < ring["time_s"] / 4


@pytest.mark.parametrize(
    ("env", "argv"),
    [
        ({"RINGTREE_ALGO": "warp"}, BASE),
        ({}, [*BASE, "--algorithm", "warp"]),
        ({}, ["cost", "all-reduce", "--size", "1GB", "-n", "12", "--link", "nvlink4+ib-hdr",
              "--algorithm", "hierarchical", "--ranks-per-node", "5"]),
        ({"RINGTREE_ALGO": "allreduce:bruck"}, BASE),
    ],
)
def test_bad_input_is_one_line_exit_2(env, argv, capsys, monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    refused(capsys, argv)


def test_an_environment_that_cannot_apply_is_ignored_and_said(capsys, monkeypatch):
    monkeypatch.setenv("RINGTREE_ALGO", "hierarchical")  # no ranks per node: cannot run
    r = row(capsys, BASE)
    assert not r["forced"] and r["algorithm"] == r["auto_algorithm"]
    assert "RINGTREE_ALGO=hierarchical cannot run here" in r["reason"] and "ignored" in r["reason"]


def test_any_n_from_closed_forms_leaving_out_those_that_walk_every_rank(capsys, monkeypatch):
    monkeypatch.delenv("RINGTREE_ALGO", raising=False)
    r = row(capsys, ["cost", "all-reduce", "--size", "1GB", "-n", "100000000", "--link", "ib-hdr"])
    assert {c["algorithm"] for c in r["candidates"]} == {"ring", "recursive", "pairwise"}
    for name in ("tree", "dbtree", "rabenseifner"):
        assert "closed form walks every rank" in r["skipped"][name]
    argv = ["cost", "all-reduce", "--size", "1GB", "-n", "65537", "--link", "ib-hdr"]
    assert main([*argv, "--algorithm", "tree"]) == 2
    assert "priced on up to 65,536 ranks" in capsys.readouterr().err
