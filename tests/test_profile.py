"""Profiles: written and read back, used as a link by cost, crossover and plan, and bad
files refused in one line with exit status 2."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from ringtree.algorithms import BuildSpec
from ringtree.cli import main
from ringtree.cost.host import HostLink, HostModel
from ringtree.cost.links import parse_link
from ringtree.cost.models import predict
from ringtree.cost.profile import link_table, load_profile, toml_text, write_profile
from ringtree.cost.select import choose
from ringtree.errors import RingtreeError

LINK = HostLink(
    "gloo-4x2cores", bandwidth_Bps=9.5e8, alpha_s=3.3e-4, gamma_s_per_byte=1.25e-10,
    note='fitted on 4 gloo processes "here"', source="ringtree calibrate",
    host=HostModel(2, 6.0e-5, 1.8e-4, 1.9e9, 2.5e-10, n_ranks=4),
)


def write(tmp_path, tables=None) -> str:  # noqa: ANN001
    path = tmp_path / "p.toml"
    extra = {"backend": "gloo", "n_ranks": 4, "fit": {"sizes": [32768, 131072]}}
    write_profile(path, tables or {"links": {"gloo": link_table(LINK, extra)}}, "a header")
    return str(path)


def test_write_then_read_gives_the_same_link(tmp_path):
    path = write(tmp_path)
    got = load_profile(path)
    assert got.host == LINK.host
    assert (got.name, got.bandwidth_Bps, got.alpha_s, got.gamma_s_per_byte, got.note) == (
        LINK.name, LINK.bandwidth_Bps, LINK.alpha_s, LINK.gamma_s_per_byte, LINK.note,
    )
    text = Path(path).read_text()
    data = tomllib.loads(text)
    assert data["profile"]["format"] == 1 and data["links"]["gloo"]["fit"]["sizes"][1] == 131072
    assert text.startswith("# a header\n")


def test_toml_writer_round_trips_through_tomllib():
    data = {"a": 1, "b": {"c": [1.5, 2e-9], "d": {"e": 'x\\y "q"', "f": True}}, "g": "h"}
    assert tomllib.loads(toml_text(data)) == data


def test_a_profile_names_its_links_and_picks_one(tmp_path):
    other = HostLink("mpi-4x2cores", bandwidth_Bps=2e9, alpha_s=1e-5)
    tables = {"links": {"gloo": link_table(LINK), "mpi": link_table(other)}}
    path = write(tmp_path, tables)
    assert load_profile(path).name == "gloo-4x2cores"
    assert load_profile(path + "#mpi").bandwidth_Bps == 2e9
    assert load_profile(path + "#mpi").host is None
    assert parse_link(path + "#mpi").name == "mpi-4x2cores"
    with pytest.raises(RingtreeError, match="no link 'nccl': it has gloo, mpi"):
        load_profile(path + "#nccl")


def test_cost_uses_the_profile_as_a_link(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["cost", "all-reduce", "-n", "4", "--size", "16MiB", "--algorithm", "ring",
                 "--profile", path, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    want = predict("all-reduce", "ring", 4, 16 << 20, LINK, itemsize=4).time_s
    assert row["time_s"] == pytest.approx(want)
    assert main(["cost", "all-reduce", "-n", "4", "--size", "16MiB", "--link", path,
                 "pcie4", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    spec = BuildSpec(n_chunks=rows[0]["n_chunks"])
    assert rows[0]["time_s"] == pytest.approx(
        predict("all-reduce", rows[0]["algorithm"], 4, 16 << 20, LINK, itemsize=4,
                spec=spec).time_s
    )
    assert main(["cost", "all-reduce", "-n", "4", "--size", "16MiB", "--profile", path]) == 0
    assert "through the CPU" in capsys.readouterr().out


def test_crossover_and_plan_take_the_profile(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["crossover", "all-reduce", "-n", "4", "--profile", path, "--max-size",
                 "64MiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["link"] == "gloo-4x2cores" and data["auto_by_size"]
    assert main(["plan", "--params", "10M", "--gpus", "4", "--profile", path, "--compute",
                 "100ms", "--json"]) == 0
    (call,) = json.loads(capsys.readouterr().out)["plans"][0]["collectives"]
    choice = choose("all-reduce", 4, 10**7 * 2, LINK, itemsize=2)  # 10M fp16 gradients
    assert call["algorithm"] == choice.algorithm
    assert call["time_s"] == pytest.approx(choice.chosen.time_s)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[links.gloo\n", "not valid TOML"),
        ("[profile]\nformat = 1\n", "no [links.NAME] table"),
        ("[links.gloo]\nalpha_s = 1e-4\n", "lacks bandwidth_Bps"),
        ("[links.gloo]\nalpha_s = 1e-4\nbandwidth_Bps = -5\n", "bandwidth_Bps must be a numb"),
        ("[links.gloo]\nalpha_s = 'fast'\nbandwidth_Bps = 1e9\n", "alpha_s must be a number >= 0"),
        ("[links.gloo]\nalpha_s = 0\nbandwidth_Bps = 1e9\n[links.gloo.host]\ncores = 0\n",
         "host: cores must be a number > 0"),
        ("[links.gloo]\nalpha_s = 0\nbandwidth_Bps = 1e9\n[links.gloo.host]\ncores = 2\n"
         "alpha_s = 0\n", "lacks bandwidth_Bps"),
        ("links = 3\n", "no [links.NAME] table"),
    ],
)
def test_malformed_profiles_are_one_line_errors_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.toml"
    path.write_text(content)
    with pytest.raises(RingtreeError, match=message.replace("[", r"\[").replace(".", r"\.")):
        load_profile(str(path))
    for argv in (
        ["cost", "all-reduce", "-n", "4", "--size", "1MB", "--profile", str(path)],
        ["crossover", "all-reduce", "-n", "4", "--profile", str(path)],
        ["validate", "--profile", str(path), "-n", "2"],
    ):
        with pytest.raises(SystemExit) as e:
            _exit(main(argv))
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("ringtree: error: ") and err.count("\n") == 1
        assert "Traceback" not in err


def _exit(code: int) -> None:
    raise SystemExit(code)


def test_an_unreadable_profile_is_a_one_line_error(tmp_path, capsys):
    missing = str(tmp_path / "nope.toml")
    assert main(["validate", "--profile", missing, "-n", "2"]) == 2
    err = capsys.readouterr().err
    assert "cannot read profile" in err and err.count("\n") == 1
    assert main(["cost", "all-reduce", "-n", "4", "--size", "1MB"]) == 2
    assert "give --link" in capsys.readouterr().err
