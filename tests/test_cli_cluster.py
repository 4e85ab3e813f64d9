"""``ringtree cost --cluster``, ``ringtree crossover --cluster`` and ``ringtree clusters``:
nccl-tests' columns and arithmetic in the JSON rows, the sweep as nccl-tests spells it
(-b/-e/-f), NCCL_* settings from the environment, cluster files, plots, and bad input (exit 2,
one ``ringtree: error:`` line)."""

from __future__ import annotations

import json

import pytest

from ringtree.cli import main

NAMES = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
ROW_KEYS = {"size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "algorithm", "protocol",
            "channels", "count", "type"}
GiB = 2**30


@pytest.fixture(autouse=True)
def no_nccl_env(monkeypatch):
    """The commands read NCCL_* from the environment: start every test without any."""
    import os

    for k in [k for k in os.environ if k.startswith("NCCL_")]:
        monkeypatch.delenv(k)


def rows(capsys, *argv: str) -> list[dict]:
    assert main(["cost", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["rows"]


def error(capsys, *argv: str) -> str:
    """Run a command that must fail on its input: exit 2, one line on stderr, nothing else."""
    assert main(list(argv)) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("ringtree: error: ") and err.count("\n") == 1, err
    return err


# ------------------------------------------------------------------ ringtree cost --cluster


def test_a_sweep_prints_nccl_tests_rows(capsys):
    got = rows(capsys, "all-reduce", "--cluster", "dgx-h100", "--nodes", "2", "-b", "8", "-e",
               "8G", "-f", "2")
    # nccl-tests' -b 8 -e 8G -f 2: 8 B, 16 B, ... 8 GiB, 31 lines
    assert [r["size_bytes"] for r in got] == [8 * 2**i for i in range(31)]
    n = 16
    for r in got:
        assert set(r) >= ROW_KEYS
        assert r["type"] == "fp32" and r["count"] == r["size_bytes"] // 4
        assert r["algorithm"] in {a.lower().replace("collnet", "collnet_")
                                  .replace("nvlstree", "nvls_tree") for a in NAMES}
        assert r["protocol"] in ("ll", "ll128", "simple")
        assert r["channels"] >= 1 and r["time_s"] > 0
        assert r["algbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * (n - 1) / n)
        assert r["n_ranks"] == n and r["nodes"] == 2 and r["cluster"] == "dgx-h100"


def test_other_step_factors_and_types(capsys):
    got = rows(capsys, "all-gather", "--cluster", "dgx-a100", "-b", "1K", "-e", "1M", "-f", "4",
               "--dtype", "fp16")
    # nccl-tests reads K as 1024: 1K, 4K, ... 1M
    assert [r["size_bytes"] for r in got] == [1024 * 4**i for i in range(6)]
    assert all(r["count"] == r["size_bytes"] // 2 and r["type"] == "fp16" for r in got)
    for r in got:  # all-gather: (n-1)/n
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 7 / 8)
    (one,) = rows(capsys, "broadcast", "--cluster", "dgx-a100", "--size", "1GiB")
    assert one["size_bytes"] == GiB and one["busbw_gbps"] == pytest.approx(one["algbw_gbps"])
    assert one["algorithm"] == "ring"  # broadcast: ring only


def test_gpus_per_node_and_nodes_make_the_ranks(capsys):
    (r,) = rows(capsys, "all-reduce", "--cluster", "dgx-h100", "--nodes", "3",
                "--gpus-per-node", "2", "--size", "64MiB")
    assert r["n_ranks"] == 6
    assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 2 * 5 / 6)


def test_nccl_settings_come_from_the_environment(capsys, monkeypatch):
    argv = ("all-reduce", "--cluster", "dgx-h100", "-b", "8", "-e", "8G", "-f", "8")
    assert any(r["algorithm"] == "nvls" for r in rows(capsys, *argv))
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert not any(r["algorithm"].startswith("nvls") for r in rows(capsys, *argv))
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    monkeypatch.setenv("NCCL_PROTO", "LL128")
    assert {(r["algorithm"], r["protocol"]) for r in rows(capsys, *argv)} == {("tree", "ll128")}


def test_the_table_shows_each_size_and_nccls_choice(capsys):
    assert main(["cost", "all-reduce", "--cluster", "dgx-a100", "-b", "8", "-e", "8G", "-f",
                 "32"]) == 0
    out = capsys.readouterr().out
    assert "busbw (GB/s)" in out and "dgx-a100" in out
    lines = [x for x in out.splitlines() if x.startswith("│") and "Ring" in x]
    assert len(lines) == 7  # 8 B .. 8 GiB by 32


def test_a_cluster_file_with_a_preset_and_overrides(capsys, tmp_path):
    f = tmp_path / "half-nics.toml"
    f.write_text('[cluster]\npreset = "dgx-h100"\nnics_per_node = 4\n')
    (mine,) = rows(capsys, "all-reduce", "--cluster", str(f), "--nodes", "4", "--size", "8GiB")
    (full,) = rows(capsys, "all-reduce", "--cluster", "dgx-h100", "--nodes", "4", "--size",
                   "8GiB")
    assert mine["cluster"] == "half-nics"
    # from 4 nodes a collective is bound by each node's NICs: 4 x 400 Gb/s = 200 GB/s here
    assert mine["busbw_gbps"] <= 4 * 400 / 8 < full["busbw_gbps"]


def test_a_plot(capsys, tmp_path):
    png = tmp_path / "sweep.png"
    assert main(["cost", "all-reduce", "--cluster", "dgx-h100", "-b", "8", "-e", "1G",
                 "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {png}" in capsys.readouterr().err.replace("\n", "")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--cluster", "nope", "--size", "8"], "unknown cluster 'nope'"),
        (["--cluster", "dgx-h100", "-n", "8", "--size", "8"], "drop -n"),
        (["--cluster", "dgx-h100", "--model", "textbook", "--size", "8"], "--model textbook"),
        (["--cluster", "dgx-h100", "--size", "8", "-b", "8", "-e", "16"], "not both"),
        (["--cluster", "dgx-h100", "-b", "8"], "-b MIN -e MAX"),
        (["--cluster", "dgx-h100", "-b", "16", "-e", "8"], "MIN <= MAX"),
        (["--cluster", "dgx-h100", "-b", "8", "-e", "16", "-f", "1"], "F > 1"),
        (["--cluster", "dgx-h100", "--gpus-per-node", "9", "--size", "8"], "1..8"),
        (["--cluster", "dgx-h100", "--link", "nvlink4", "--size", "8"], "not both"),
    ],
)
def test_bad_input_is_one_error_line(capsys, argv, said):
    assert said in error(capsys, "cost", "all-reduce", *argv)


def test_a_bad_nccl_setting_is_one_error_line(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Rnig")
    err = error(capsys, "cost", "all-reduce", "--cluster", "dgx-h100", "--size", "8")
    assert "NCCL_ALGO" in err and "rnig" in err.lower()
    monkeypatch.setenv("NCCL_ALGO", "NVLS")  # NVLS across nodes needs collnet
    err = error(capsys, "cost", "all-reduce", "--cluster", "dgx-h100", "--nodes", "2",
                "--size", "8")
    assert "no algorithm/protocol available" in err


def test_a_one_node_cluster_file_refuses_more_nodes(capsys, tmp_path):
    f = tmp_path / "box.toml"
    f.write_text('[cluster]\npreset = "dgx-h100"\nnics_per_node = 0\nnic_gbps = 0\n')
    assert rows(capsys, "all-reduce", "--cluster", str(f), "--size", "8")
    assert "no NICs" in error(capsys, "cost", "all-reduce", "--cluster", str(f), "--nodes", "2",
                              "--size", "8")
    bad = tmp_path / "bad.toml"
    bad.write_text('[cluster]\npreset = "dgx-h100"\nfabric = "ether"\n')
    assert "'ether'" in error(capsys, "cost", "all-reduce", "--cluster", str(bad), "--size", "8")


# ------------------------------------------------------------------ ringtree clusters


def test_clusters_json_lists_the_presets_with_sources(capsys):
    assert main(["clusters", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    by = {c["name"]: c for c in d["clusters"]}
    for name in ("dgx-a100", "dgx-h100", "hgx-b200", "aws-p4de", "aws-p5", "gcp-a3",
                 "azure-nd-h100-v5"):
        assert by[name]["source"].strip(), name
        assert by[name]["gpus_per_node"] >= 1 and by[name]["gpu"]
    assert d["aliases"]["hgx-b200"] == "dgx-b200"
    assert by["dgx-h100"]["nvlink_GBps_per_gpu"] == pytest.approx(18 * 20.6)
    assert all(g["source"] for g in d["gpus"])


def test_clusters_table(capsys):
    assert main(["clusters"]) == 0
    out = capsys.readouterr().out
    assert "dgx-h100" in out and "aliases:" in out


# ------------------------------------------------------------------ ringtree crossover --cluster


def crossover(capsys, *argv: str) -> dict:
    assert main(["crossover", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_crossover_on_a_cluster(capsys):
    d = crossover(capsys, "all-reduce", "--cluster", "dgx-a100", "--nodes", "1")
    # NCCL's figures on one DGX A100 node: Ring/LL, then LL128 from ~2.1 MB, Simple from ~24 MB
    assert [r["choice"] for r in d["ranges"]] == ["Ring/LL", "Ring/LL128", "Ring/Simple"]
    assert 2 * 2**20 < d["switches"][0]["size_bytes"] < 4 * 2**20
    assert 16 * 2**20 < d["switches"][1]["size_bytes"] < 32 * 2**20
    assert d["ranges"][0]["from_bytes"] == 4 and d["ranges"][-1]["to_bytes"] == 10**11
    for a, b in zip(d["ranges"], d["ranges"][1:], strict=False):
        assert b["from_bytes"] == a["to_bytes"] + 4
    assert [(s["from"], s["to"]) for s in d["switches"]] == [
        (a["choice"], b["choice"]) for a, b in zip(d["ranges"], d["ranges"][1:], strict=False)
    ]
    assert (d["cluster"], d["model"], d["n_ranks"]) == ("dgx-a100", "nccl", 8)


def test_crossover_honours_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("NCCL_PROTO", "Simple")
    monkeypatch.setenv("NCCL_ALGO", "Ring")
    d = crossover(capsys, "all-reduce", "--cluster", "dgx-h100", "--nodes", "2")
    assert [r["choice"] for r in d["ranges"]] == ["Ring/Simple"] and d["switches"] == []


def test_crossover_table_and_plot(capsys, tmp_path):
    svg = tmp_path / "x.svg"
    assert main(["crossover", "all-reduce", "--cluster", "dgx-h100", "--nodes", "4", "--plot",
                 str(svg)]) == 0
    out = capsys.readouterr().out
    assert "NCCL runs" in out and " -> " in out
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))


@pytest.mark.parametrize(
    ("argv", "said"),
    [(["--cluster", "nope"], "unknown cluster"),
     (["--cluster", "dgx-h100", "-n", "8"], "drop -n"),
     (["--cluster", "dgx-h100", "--model", "textbook"], "--model textbook"),
     (["--cluster", "dgx-h100", "--min-size", "1G", "--max-size", "1M"], "--min-size")],
)
def test_crossover_bad_input(capsys, argv, said):
    assert said in error(capsys, "crossover", "all-reduce", *argv)


def test_all_to_all_on_a_cluster_is_an_nccl_tests_sweep(capsys):
    out = rows(capsys, "all-to-all", "--cluster", "dgx-h100", "--nodes", "2", "-b", "1M",
               "-e", "1G", "-f", "32")
    assert [r["size_bytes"] for r in out] == [2**20, 2**25, 2**30]
    for r in out:
        assert r["algorithm"] == "p2p" and r["protocol"] == "simple"
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 15 / 16)
    assert out[0]["busbw_gbps"] < out[-1]["busbw_gbps"]


def test_barrier_on_a_cluster_is_refused_with_what_to_price(capsys):
    msg = error(capsys, "cost", "barrier", "--cluster", "dgx-h100", "--size", "4")
    assert "NCCL has no barrier" in msg and "all-reduce" in msg
    msg = error(capsys, "crossover", "all-to-all", "--cluster", "dgx-h100")
    assert "grouped sends and receives" in msg
