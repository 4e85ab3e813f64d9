"""``ringtree profile``: the JSON contract on real traces, predictions from the models, the
annotated Chrome trace, what-if, and one-line errors for bad input."""

import json
from pathlib import Path

import pytest

from ringtree.cli import main
from ringtree.cost.clusters import get_cluster
from ringtree.cost.nccl import predict as nccl_predict

DATA = Path(__file__).parent / "data" / "kineto"
PROFILE = """[profile]
format = 1

[links.gloo]
name = "test"
backend = "gloo"
n_ranks = 2
alpha_s = 0.0004
bandwidth_Bps = 1.0e9

[links.gloo.host]
cores = 2
alpha_s = 0.0004
bandwidth_Bps = 2.0e9
"""


def run_json(argv, capsys):
    assert main(["profile", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract_on_the_lab_trace(tmp_path, capsys):
    toml = tmp_path / "me.toml"
    toml.write_text(PROFILE)
    d = run_json([str(DATA / "lab-ddp"), "--profile", str(toml)], capsys)
    row = next(r for r in d["collectives"] if r["collective"] == "all-reduce")
    for key in ("collective", "size_bytes", "group_size", "count", "measured_s", "predicted_s"):
        assert key in row
    assert (row["size_bytes"], row["group_size"], row["count"]) == (479024 * 4, 2, 2)
    assert row["ratio"] == pytest.approx(row["measured_s"] / row["predicted_s"])
    (step,) = d["steps"]
    assert step["step"] == 2
    parts = step["compute_s"] + step["exposed_comm_s"] + step["memory_s"] + step["idle_s"]
    assert parts == pytest.approx(step["time_s"])
    assert d["load"]["free_cores"] < 2  # priced for the cores the lab's run had


def test_cluster_predictions_are_the_nccl_models(capsys):
    d = run_json([str(DATA / "hta-nccl-a100-2gpu.json.gz"), "--cluster", "dgx-a100"], capsys)
    a100 = get_cluster("dgx-a100")
    for r in d["collectives"]:
        want = nccl_predict(r["collective"], r["size_bytes"], a100, 1, gpus_per_node=2)
        assert r["predicted_s"] == pytest.approx(want.time_s)
        assert r["kernel"] == "RING_LL"


def test_chrome_has_a_predicted_slice_per_priced_call(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["profile", str(DATA / "cpu-3ranks"), "--cluster", "dgx-h100", "--chrome",
                 str(out), "-q"]) == 0
    t = json.loads(out.read_text())
    predicted = [e for e in t["traceEvents"] if e.get("cat") == "ringtree_prediction"]
    calls = [e for e in t["traceEvents"] if str(e.get("name", "")).startswith("c10d::")]
    priced = [e for e in calls if not e["name"].startswith(("c10d::send", "c10d::recv",
                                                            "c10d::barrier"))]
    assert len(predicted) == len(priced) == 34  # 39 calls but 3 barriers, a send, a recv
    assert len({e["pid"] for e in calls}) == 3  # one process per rank, kept apart


def test_what_if(capsys):
    d = run_json([str(DATA / "hta-trace-diff-a100-rank3.json.gz"), "--cluster", "dgx-a100",
                  "--what-if-cluster", "dgx-h100", "--what-if-nodes", "4"], capsys)
    w = d["what_if"]
    assert (w["ranks"], w["from_ranks"], w["target"]) == (32, 8, "dgx-h100")
    assert len(w["steps"]) == 1 and w["assumptions"]
    assert w["steps"][0]["what_if_time_s"] > 0


def test_tables_print(capsys):
    assert main(["profile", str(DATA / "deepep-like-ep64.json.gz")]) == 0
    out = capsys.readouterr().out
    assert "all-to-all (DeepEP dispatch)" in out and "critical path" in out


@pytest.mark.parametrize(("text", "argv", "message"), [
    ('{"traceEvents": [{"name": "x"', [], "is truncated"),
    ('{"hello": 1}', [], "is not a Kineto trace"),
    ('{"traceEvents": []}', [], "hold no collective and no ProfilerStep"),
    ('{"traceEvents": []}', ["--nodes", "2"], "--nodes needs --cluster"),
    ('{"traceEvents": []}', ["--what-if-nodes", "2"], "--what-if-nodes needs --what-if-cluster"),
    ('{"traceEvents": []}', ["--cluster", "nope"], "unknown cluster 'nope'"),
    ('{"traceEvents": []}', ["--profile", "/nonexistent.toml"], "cannot read profile"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, text, argv, message):
    p = tmp_path / "t.json"
    p.write_text(text)
    try:
        code = main(["profile", str(p), *argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
