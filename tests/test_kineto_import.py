"""Importing real traces (tests/data/kineto): every collective with the kind, nccl-tests size,
group and count that an independent reading gives -- the script that made the trace, or the
raw JSON read with the standard library."""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from ringtree.errors import RingtreeError
from ringtree.kineto.load import load_run

DATA = Path(__file__).parent / "data" / "kineto"


def counts(run):
    return Counter((c.collective, c.size_bytes, c.group_size) for c in run.calls)


def raw(name):
    with gzip.open(DATA / name, "rt") as f:
        return json.load(f)["traceEvents"]


def test_cpu_gloo_three_ranks_two_groups():
    """tests/data/kineto/cpu_collectives.py, per rank (rank 2 is not in the group [0, 1])."""
    run = load_run([str(DATA / "cpu-3ranks")])
    f = 4  # float32
    want = {("all-reduce", 262144 * f, 3): 9, ("all-gather", 65536 * f * 3, 3): 3,
            ("reduce-scatter", 16384 * f * 3, 3): 3, ("all-reduce", 1000 * f, 2): 4,
            ("broadcast", 262144 * f, 3): 3, ("barrier", 0, 3): 3,
            ("all-gather", 100 * f * 3, 3): 3, ("all-to-all", 1200 * f, 3): 3,
            ("reduce", 300 * f, 3): 3, ("all-reduce", 2000 * f, 3): 3,
            ("send", 500 * f, 3): 1, ("recv", 500 * f, 3): 1}
    assert counts(run) == want
    assert [r.rank for r in run.ranks] == [0, 1, 2] and run.backend == "gloo"
    # every collective's work is gloo's span on a worker thread, after its call
    for c in run.calls:
        if c.collective not in ("send", "recv"):
            assert c.work is not None and c.work[0] >= c.cpu[0] - 1 and c.thread != c.stream
    rs = [c for c in run.calls if c.collective == "reduce-scatter"]
    assert {c.work_collective for c in rs} == {"all-reduce"}  # what gloo runs for it
    assert next(c for c in run.calls if c.collective == "send").peer == 1


def test_lab_ddp_trace_has_steps_and_load():
    run = load_run([str(DATA / "lab-ddp")])
    assert [[s.number for s in r.steps] for r in run.ranks] == [[2], [2]]
    # the tutor's 479,024 fp32 gradients in one bucket (docs/lab.md), and DDP's buffers
    assert counts(run)[("all-reduce", 479024 * 4, 2)] == 2
    assert all("other_cores" in r.meta["ringtree_load"] for r in run.ranks)
    assert not run.warnings


def test_hta_cpu_only_work_spans_alone():
    run = load_run([str(DATA / "hta-cpu-only-rank34.json.gz")])
    want = Counter()
    for e in raw("hta-cpu-only-rank34.json.gz"):
        if e.get("name") == "gloo:all_reduce":
            want[("all-reduce", e["args"]["Input Dims"][0][0] * 4, 300)] += 1
    assert counts(run) == want and sum(want.values()) == 10
    assert run.ranks[0].rank == 34 and [s.number for s in run.ranks[0].steps] == [551]


def test_hta_nccl_record_param_comms_and_kernels():
    name = "hta-nccl-a100-2gpu.json.gz"
    run = load_run([str(DATA / name)])
    ev = raw(name)
    kinds = {"allreduce": "all-reduce", "broadcast": "broadcast"}
    item = {"Float": 4, "Long": 8}
    want = Counter((kinds[e["args"]["Collective name"]],
                    e["args"]["In msg nelems"] * item[e["args"]["dtype"]], 2)
                   for e in ev if e.get("name") == "record_param_comms"
                   and e["args"].get("Collective name") in kinds)
    assert counts(run) == want and sum(want.values()) == 7
    kernels = {e["name"] for e in ev if e.get("cat") == "kernel" and "nccl" in e["name"]}
    for c in run.calls:
        assert c.kernel in kernels and c.kernel_algorithm == "RING" and c.group == "0"
        assert c.stream.startswith("stream") and c.work[0] > c.cpu[0]


def test_hta_old_nccl_sizes_from_annotations():
    name = "hta-trace-diff-a100-rank3.json.gz"
    run = load_run([str(DATA / name)])
    item = {"float": 4, "int": 4}
    want = Counter()
    for e in raw(name):
        if e.get("cat") == "user_annotation" and e["name"] in ("nccl:all_to_all",
                                                                "nccl:all_reduce"):
            dims = e["args"]["Input Dims"][0]
            n = 1
            for d in dims:
                n *= d
            kind = "all-to-all" if "to_all" in e["name"] else "all-reduce"
            want[(kind, n * item[e["args"]["Input type"][0]], 8)] += 1
    assert counts(run) == want and sum(want.values()) == 10
    assert all(c.kernel.startswith("ncclKernel_") for c in run.calls)


def test_deepep_kernels():
    run = load_run([str(DATA / "deepep-like-ep64.json.gz")])
    labels = Counter(c.label for c in run.calls)
    assert labels == {"DeepEP dispatch": 8, "DeepEP combine": 8, "DeepEP cached_notify": 12,
                      "DeepEP notify_dispatch": 4}
    assert {c.group_size for c in run.calls} == {64} and run.device == "gpu"
    assert all(c.size_bytes is None and c.work for c in run.calls)


def test_two_traces_of_one_rank_and_empty_folders(tmp_path):
    one = DATA / "hta-cpu-only-rank34.json.gz"
    with pytest.raises(RingtreeError, match="two traces of rank 34"):
        load_run([str(one), str(one)])
    with pytest.raises(RingtreeError, match="holds no trace"):
        load_run([str(tmp_path)])
    with pytest.raises(RingtreeError, match="no such trace"):
        load_run([str(tmp_path / "x.json")])


def test_missing_fields_are_warnings(tmp_path):
    p = tmp_path / "worker7.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 1, "dur": 5, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "dur": 5},
    ]}))
    run = load_run([str(p)])
    assert run.ranks[0].rank == 7
    text = " ".join(run.warnings)
    for part in ("no distributedInfo.rank", "1 events without ts/dur", "1 of 1 collectives have "
                 "no size", "no ProfilerStep#N markers"):
        assert part in text
