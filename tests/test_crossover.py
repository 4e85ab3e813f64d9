"""Crossovers: the ring/tree flip where the acceptance wants it, exact to the element against
the predictions, a hand-computed case, and the command's JSON, table, plot and errors."""

import json

import pytest

from conftest import refused
from ringtree.algorithms import BuildSpec
from ringtree.cli import main
from ringtree.cost.crossover import crossover_map
from ringtree.cost.links import get_link, parse_link
from ringtree.cost.select import tuned

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`


def ring_tree(m):
    return [c for c in m.crossovers if {c.a, c.b} == {"ring", "tree"}]


@pytest.mark.parametrize("link", ["ib-hdr", "nvlink4"])
def test_ring_tree_crossover_for_8_ranks(link):
    m = crossover_map("all-reduce", 8, get_link(link), itemsize=4)
    (x,) = ring_tree(m)
    assert (x.a, x.b, x.below, x.above) == ("ring", "tree", "tree", "ring")
    assert 64e3 <= x.size_bytes <= 16e6

    # exact to the element: one element less and the tree is still faster
    def t(alg, size):
        return tuned("all-reduce", alg, 8, size, get_link(link), itemsize=4).time_s

    assert t("tree", x.size_bytes - 4) <= t("ring", x.size_bytes - 4)
    assert t("ring", x.size_bytes) < t("tree", x.size_bytes)


def test_hand_computed_crossover():
    """Unpipelined tree on 8 ranks: 6 alpha + 6 S beta; ring: 14 alpha + 14 (S/8) beta.
    They cross at S = 8 alpha bw / 4.25."""
    link = parse_link("custom:bw=10GB/s,lat=10us")
    m = crossover_map("all-reduce", 8, link, itemsize=1, spec=BuildSpec(n_chunks=1),
                      max_bytes=10**9)
    (x,) = ring_tree(m)
    want = 8 * 10e-6 * 10e9 / 4.25
    assert x.size_bytes == pytest.approx(want, abs=8)  # the ring's chunks round up to 1/8


def test_two_ranks_have_no_ring_tree_crossover():
    m = crossover_map("all-reduce", 2, get_link("loopback"), itemsize=4)
    assert not ring_tree(m)
    never = {(a, b): w for a, b, w in m.never}
    assert never[("ring", "tree")] == "ring"  # one level: the tree's 2 steps move S each
    assert never[("ring", "dbtree")] == "tie"


def test_auto_by_size_covers_the_range():
    m = crossover_map("all-reduce", 64, get_link("ib-hdr"), itemsize=4)
    assert m.winners[0][1] == m.sizes_bytes[0] and m.winners[-1][2] == m.sizes_bytes[-1]
    for (_, _, end), (_, start, _) in zip(m.winners[:-1], m.winners[1:], strict=True):
        assert start == end + 4
    assert m.winners[0][0] != "ring" and m.winners[-1][0] == "ring"


def test_crossover_json(capsys):
    assert main(["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pairs = {(c["a"], c["b"]) for c in d["crossovers"]}
    assert ("ring", "tree") in pairs
    for c in d["crossovers"]:
        assert {"a", "b", "size_bytes", "below", "above"} <= set(c)
        assert {c["below"], c["above"]} == {c["a"], c["b"]}
    assert "hierarchical" in d["skipped"]


def test_crossover_table_and_plot(tmp_path, capsys):
    png, svg = tmp_path / "x.png", tmp_path / "x.svg"
    argv = ["crossover", "all-reduce", "-n", "8", "--link", "nvlink4", "--plot"]
    assert main([*argv, str(png)]) == 0
    out = capsys.readouterr().out
    assert "ring" in out and "tree" in out and "auto picks:" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([*argv, str(svg), "--json"]) == 0
    assert b"<svg" in svg.read_bytes()[:500]


def test_hierarchical_joins_with_ranks_per_node(capsys):
    argv = ["crossover", "all-reduce", "-n", "16", "--link", "nvlink4+ib-hdr",
            "--ranks-per-node", "8", "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert "hierarchical" not in d["skipped"]
    assert any("hierarchical" in (c["a"], c["b"]) for c in d["crossovers"] + d["no_crossover"])


@pytest.mark.parametrize(
    "argv",
    [
        ["all-reduce", "-n", "8", "--link", "warp"],
        ["all-reduce", "-n", "8", "--link", "ib-hdr", "--plot", "x.pdf"],
        ["all-reduce", "-n", "8", "--link", "ib-hdr", "--max-size", "2B"],
        ["all-reduce", "-n", "0", "--link", "ib-hdr"],
    ],
)
def test_bad_input_is_one_line_exit_2(argv, capsys):
    refused(capsys, ["crossover", *argv])


def test_auto_ranges_name_what_cost_picks_on_a_profile():
    """One choice function behind both (issue 30): on a calibrated one-machine model ties go
    to the fewest steps, in ``cost``'s pick and in the crossover map's auto ranges alike (they
    named ring against rabenseifner above ~60 MB on this profile)."""
    from ringtree.cost.host import HostLink, HostModel
    from ringtree.cost.select import choose

    link = HostLink("gloo-4x2cores", bandwidth_Bps=9.5e8, alpha_s=3.3e-4,
                    gamma_s_per_byte=1.25e-10,
                    host=HostModel(2, 6.0e-5, 1.8e-4, 1.9e9, 2.5e-10, n_ranks=4))
    m = crossover_map("all-reduce", 4, link, itemsize=4, max_bytes=2**30)
    assert len(m.winners) >= 3
    for alg, lo, hi in m.winners:
        for size in {lo, (lo + hi) // 2 // 4 * 4, hi}:
            assert choose("all-reduce", 4, size, link, itemsize=4, env={}).algorithm == alg
