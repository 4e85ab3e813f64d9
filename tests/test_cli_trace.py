"""The trace command, through the same entry point as the console script."""

import json
import xml.etree.ElementTree as ET

import pytest

from conftest import refused
from ringtree.cli import main


def test_trace_all_reduce_json(capsys):
    assert main(["trace", "all-reduce", "-n", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["steps"]) == 6
    after3 = data["steps"][2]["complete"]
    assert after3 == [[(i + 1) % 4] for i in range(4)]
    assert data["steps"][-1]["complete"] == [[0, 1, 2, 3]] * 4
    assert data["bytes_sent"] == [2 * 3 * (1 << 20) // 4 // 4 * 4] * 4


def test_a_barrier_traces_empty_messages_whatever_the_size(capsys):
    assert main(["trace", "barrier", "-n", "4", "--size", "8MiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["steps"]) == 2 and data["bytes_sent"] == [0] * 4  # log2 4 rounds


def test_trace_table_shows_six_steps(capsys):
    assert main(["trace", "all_reduce", "-n", "4"]) == 0
    out = capsys.readouterr().out
    assert sum(line.strip("│ ").startswith("step ") for line in out.splitlines()) == 6


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "all-reduce", "-n", "0"],
        ["trace", "all-reduce", "-n", "-3"],
        ["trace", "nonsense", "-n", "4"],
        ["trace", "all-reduce", "-n", "4", "--algorithm", "nonsense"],
        ["trace", "reduce", "-n", "4", "--root", "7"],
        ["trace", "all-reduce", "-n", "4", "--size", "-5"],
    ],
)
def test_bad_input_is_one_line_exit_2(argv, capsys):
    refused(capsys, argv)


@pytest.mark.multiproc
def test_trace_writes_svg_html_and_chrome_files(tmp_path, run_cli):
    svg, page, chrome = tmp_path / "r.svg", tmp_path / "r.html", tmp_path / "r.json"
    proc = run_cli("trace", "all-reduce", "-n", "4", "--json", "--svg", str(svg),
                   "--html", str(page), "--chrome", str(chrome))
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["steps"]) == 6  # stdout stays the data
    assert all(p.exists() for p in (svg, page, chrome))
    assert str(svg) in proc.stderr and "loopback" in proc.stderr
    doc = ET.parse(svg).getroot()
    assert sum(e.get("class") == "panel step" for e in doc.iter()) == 6
    assert 'data-step="6"' in page.read_text()
    trace = json.loads(chrome.read_text())
    sends = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "send":
            sends[e["tid"]] = sends.get(e["tid"], 0) + e["args"]["bytes"]
    assert sends == {r: 2 * 3 * (1 << 20) // 4 // 4 * 4 for r in range(4)}


@pytest.mark.multiproc
def test_trace_file_errors_are_one_line_and_come_before_any_output(tmp_path, run_cli):
    proc = run_cli("trace", "all-reduce", "-n", "4", "--svg", str(tmp_path / "no" / "x.svg"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("ringtree: error: argument --svg: cannot write")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("trace", "all-gather", "-n", "40", "--html", str(tmp_path / "x.html"))
    assert proc.returncode == 2 and proc.stdout == "" and "40 ranks" in proc.stderr


@pytest.mark.multiproc
def test_trace_chrome_uses_the_link_given(tmp_path, run_cli):
    # 4 ranks, 1 MiB: 262144 B per step at 1 GB/s plus 10 us of latency, 6 steps
    chrome = tmp_path / "t.json"
    proc = run_cli("trace", "all-reduce", "-n", "4", "--link", "custom:bw=1GB/s,lat=10us",
                   "--chrome", str(chrome))
    assert proc.returncode == 0, proc.stderr
    trace = json.loads(chrome.read_text())
    end_us = max(e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert end_us == pytest.approx(6 * (10 + 262144 / 1e9 * 1e6), abs=1e-3)
    assert trace["otherData"]["link"] == "custom:bw=1GB/s,lat=10us"
