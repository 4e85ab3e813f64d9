"""``ringtree cost`` and ``ringtree links``: the seed's figures as printed, JSON keys, no torch,
bad input."""

import json
import subprocess
import sys

import pytest

from ringtree.cli import main
from ringtree.cost.links import PRESETS

SEED_7B = ["cost", "all-reduce", "--params", "7e9", "--dtype", "fp16", "-n", "8",
           "--link", "nvlink4", "pcie4", "ib-hdr", "10gbe", "--compute", "200ms"]
TUTOR = ["cost", "all-reduce", "--params", "500k", "--dtype", "fp16", "-n", "2", "--link",
         "loopback", "--model", "textbook", "--comm-time", "1ms", "--price-cluster-hour", "0.70",
         "--hours", "3"]


def rows(capsys, argv):
    assert main([*argv, "--json"]) == 0
    return {r["link"]: r for r in json.loads(capsys.readouterr().out)["rows"]}


def table_rows(capsys, argv):
    """The table's data lines, each split into its cells."""
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    return {
        cells[0]: cells
        for line in lines
        if line.startswith("│") and (cells := [c.strip() for c in line.strip("│").split("│")])[0]
    }


def test_seed_7b_textbook_table(capsys):
    t = table_rows(capsys, [*SEED_7B, "--model", "textbook"])
    # link, bandwidth used, sent per worker, steps, latency, bandwidth term, time, overhead
    assert t["nvlink4"][2:] == ["28 GB (~2S)", "14", "-", "31 ms", "31 ms (31.11)", "15 % (15.56)"]
    assert t["pcie4"][2:] == ["28 GB (~2S)", "14", "-", "440 ms", "440 ms (437.5)",
                              "220 % (218.8)"]
    assert t["ib-hdr"][2:] == ["28 GB (~2S)", "14", "-", "1.12 s", "1.12 s", "560 %"]
    assert t["10gbe"][2:6] == ["28 GB (~2S)", "14", "-", "22 s"]
    assert t["10gbe"][6] == "22 s (22.4)"
    assert t["nvlink4"][1] == "900 GB/s nominal (both ways)"
    assert t["ib-hdr"][1] == "25 GB/s nominal"


def test_seed_7b_alpha_beta_table(capsys):
    t = table_rows(capsys, SEED_7B)
    assert t["nvlink4"][1] == "370 GB/s, alpha 3.4 us"
    assert t["nvlink4"][2:5] == ["24.5 GB (~2S = 28 GB)", "14", "48 us"]
    assert t["nvlink4"][6] == "66 ms (66.26)"


def test_seed_7b_json(capsys):
    r = rows(capsys, [*SEED_7B, "--model", "textbook", "--price-gpu-hour", "30",
                      "--steps-per-second", "1"])
    for link, gbps in (("nvlink4", 900), ("pcie4", 64), ("ib-hdr", 25), ("10gbe", 1.25)):
        x = r[link]
        assert x["bytes_sent_per_worker"] == 28e9
        assert x["size_bytes"] == 14e9 and x["workers"] == 8
        assert (x["algorithm"], x["model"]) == ("ring", "textbook")
        assert x["time_s"] == pytest.approx(28 / gbps)
        assert x["overhead"] == pytest.approx(28 / gbps / 0.2)
    assert r["nvlink4"]["usd_per_step"] == pytest.approx(28 / 900 * 30 / 3600 * 8)
    assert r["nvlink4"]["usd_per_day"] == pytest.approx(28 / 900 * 30 / 3600 * 8 * 86400)
    exact = rows(capsys, SEED_7B)["nvlink4"]
    assert exact["bytes_sent_per_worker"] == 24.5e9 and exact["model"] == "alpha-beta"


def test_json_keys_exactly_as_asked(capsys):
    plain = rows(capsys, ["cost", "all-reduce", "--size", "1GB", "-n", "4", "--link", "pcie4"])
    issue_keys = {"link", "algorithm", "model", "workers", "size_bytes",
                  "bytes_sent_per_worker", "steps", "time_s"}
    assert issue_keys <= set(plain["pcie4"])
    assert not {"overhead", "usd_per_step", "usd_per_day", "usd_per_job"} & set(plain["pcie4"])
    full = rows(capsys, [*TUTOR[:-8], "--compute", "10ms", "--price-gpu-hour", "1", "--hours",
                         "2"])
    assert {"overhead", "usd_per_step", "usd_per_day", "usd_per_job", "usd_comm_per_job"} <= set(
        full["loopback"]
    )


def test_seed_grammar_tutor(capsys):
    x = rows(capsys, TUTOR)["loopback"]
    assert x["size_bytes"] == 1e6 and x["bytes_sent_per_worker"] == 2e6
    assert x["usd_per_step"] == pytest.approx(1e-3 * 0.70 / 3600)
    assert x["usd_per_job"] == pytest.approx(2.1)
    t = table_rows(capsys, TUTOR)["loopback"]
    assert t[2] == "2 MB (~2S)"
    assert t[-3:] == ["$1.9e-7 (1.944e-7)", "$0.0168", "$2.1e-3"]
    assert main(TUTOR) == 0
    out = capsys.readouterr().out
    assert "1 MB buffer" in out and "3-hour job costs $2.1 of compute" in out


def test_seed_dollars_in_the_table(capsys):
    t = table_rows(capsys, ["cost", "all-reduce", "--params", "7e9", "--dtype", "fp16", "-n",
                            "8", "--link", "nvlink4", "--model", "textbook",
                            "--price-gpu-hour", "30"])
    assert t["nvlink4"][-2:] == ["$2.1e-3 (2.074e-3)", "$180 (179.2)"]


def test_comm_time_replaces_the_modelled_time_for_money_only(capsys):
    base = ["cost", "all-reduce", "--size", "1GB", "-n", "8", "--link", "ib-hdr",
            "--compute", "1s", "--price-cluster-hour", "3600"]
    modelled = rows(capsys, base)["ib-hdr"]
    given = rows(capsys, [*base, "--comm-time", "2s"])["ib-hdr"]
    assert given["usd_per_step"] == pytest.approx(2.0)
    assert given["time_s"] == modelled["time_s"] and given["overhead"] == modelled["overhead"]
    assert modelled["usd_per_step"] == pytest.approx(modelled["time_s"])


def test_links_command_lists_every_preset_with_its_source(capsys):
    assert main(["links", "--json"]) == 0
    listed = {x["name"]: x for x in json.loads(capsys.readouterr().out)["links"]}
    assert set(listed) == set(PRESETS)
    assert all(x["source"] for x in listed.values())
    assert listed["nvlink4"]["nominal_Bps"] == 900e9 and listed["nvlink4"]["bandwidth_Bps"] < 450e9
    assert main(["links"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"│ {name} " in out
    assert "nccl-tests#212" in out


def test_trace_with_a_link_adds_step_times(capsys):
    assert main(["trace", "all-reduce", "-n", "4", "--size", "4MB", "--link",
                 "custom:bw=1GB/s,lat=10us", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_times_s"] == pytest.approx([10e-6 + 1e6 / 1e9] * 6)
    assert main(["trace", "all-reduce", "-n", "4", "--size", "4MB", "--link",
                 "custom:bw=1GB/s,lat=10us"]) == 0
    out = capsys.readouterr().out
    assert out.count("1.01 ms") == 6 and "modelled time on custom" in out


@pytest.mark.multiproc
@pytest.mark.parametrize("command", [["cost", "all-reduce", "--size", "1GB", "-n", "8", "--link",
                                      "nvlink4", "--json"], ["links"]])
def test_cost_and_links_do_not_import_torch(command):
    code = (
        "import sys\nfrom ringtree.cli import main\n"
        f"assert main({command!r}) == 0\n"
        "print('torch' in sys.modules, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "False"


@pytest.mark.parametrize(
    "argv",
    [
        ["--size", "12XB"],
        ["--size", "-5GB"],
        ["--size=-5GB"],
        ["--size", "fast"],
        ["--size", "1GB", "--link", "warp-drive"],
        ["--size", "1GB", "--link", "custom:bw=fast"],
        ["--size", "1GB", "-n", "0"],
        ["--size", "1GB", "-n", "-4"],
        ["--size", "1GB", "--compute", "fast"],
        ["--size", "1GB", "--compute", "0s"],
        ["--size", "1GB", "--hours", "3"],
        ["--size", "1GB", "--steps-per-second", "2"],
        ["--size", "1GB", "--comm-time", "1ms"],
        ["--size", "1GB", "--price-gpu-hour", "-3"],
        ["--size", "1GB", "--price-gpu-hour", "3", "--price-cluster-hour", "24"],
        ["--size", "1GB", "--dtype", "fp7"],
        ["--size", "1001", "--dtype", "fp16"],
        ["--params", "7B", "--size", "1GB"],
        ["--params", "seven"],
        ["--size", "1GB", "--algorithm", "warp"],
        ["--size", "1GB", "--model", "magic"],
    ],
)
def test_bad_input_is_one_line_exit_2(argv, capsys):
    base = {"-n": "8", "--link": "nvlink4"}
    for flag, value in base.items():
        if not any(a == flag or a.startswith(flag + "=") for a in argv):
            argv = [*argv, flag, value]
    try:
        code = main(["cost", "all-reduce", *argv])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("ringtree: error:")
    assert out == ""


@pytest.mark.multiproc
@pytest.mark.parametrize(
    "flag, value", [("--size", "-5GB"), ("--link", "warp-drive"), ("--hours", "3")]
)
def test_bad_input_through_the_console_script_has_no_traceback(flag, value, run_cli):
    full = {"--size": "1GB", "-n": "8", "--link": "nvlink4", flag: value}
    proc = run_cli("cost", "all-reduce", *[x for kv in full.items() for x in kv])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("ringtree: error:") and len(proc.stderr.splitlines()) == 1


def test_a_barrier_needs_no_size_other_collectives_do(capsys):
    link = PRESETS["nvlink4"]
    got = rows(capsys, ["cost", "barrier", "-n", "8", "--link", "nvlink4"])["nvlink4"]
    assert got["algorithm"] == "dissemination" and got["size_bytes"] == 0
    assert got["steps"] == 3 and got["time_s"] == pytest.approx(3 * link.alpha_s)  # log2 8
    for extra in (["--size", "8MB"], ["--params", "7e9"]):  # moves nothing, whatever the size
        sized = rows(capsys, ["cost", "barrier", "-n", "8", "--link", "nvlink4", *extra])
        assert sized["nvlink4"]["bytes_sent_per_worker"] == 0
        assert sized["nvlink4"]["time_s"] == pytest.approx(3 * link.alpha_s)
    assert main(["cost", "all-to-all", "-n", "8", "--link", "nvlink4"]) == 2
    assert "give --size S or --params P" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["cost", "run", "crossover", "trace"])
def test_help_names_every_collective(command, capsys):
    assert main([command, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in ("all-to-all", "gather", "scatter", "barrier", "reduce-scatter"):
        assert name in text, (command, name)
