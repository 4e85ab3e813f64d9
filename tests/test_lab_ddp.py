"""The DDP lab on two real gloo processes: ringtree's hook trains the grammar tutor to the same
parameters as PyTorch's own all-reduce, identical on every rank; the loss goes down; every
bucket's bytes are the schedule's; the Chrome trace holds one track per rank whose send and
receive bytes add up to the transport's counts.

One lab run (two processes, both runs, a few steps) serves every test here: process start-up
costs seconds on two cores."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ringtree.algorithms import BuildSpec, build
from ringtree.collectives import Collective
from ringtree.cost.models import predict
from ringtree.lab.chrome import lab_chrome_trace
from ringtree.lab.ddp import LabConfig, run_lab
from ringtree.lab.tutor import build_tutor
from ringtree.procs.launch import Launch, RankOutcome
from ringtree.procs.run import RunFailed
from ringtree.runtime.auto import link_for

STEPS = 5


@pytest.fixture(scope="module")
def lab():
    return run_lab(LabConfig(ranks=2, steps=STEPS, algorithm="auto", trace=True, seed=5))


def initial_params(seed):
    return torch.cat([p.detach().reshape(-1) for p in build_tutor(seed).parameters()]).numpy()


@pytest.mark.multiproc
def test_every_rank_ends_with_the_same_parameters(lab):
    for run in ("torch", "ringtree"):
        p0, p1 = (r.params for r in lab.runs[run])
        assert p0.shape == (lab.n_params,)
        np.testing.assert_array_equal(p0, p1, err_msg=run)
    assert lab.rank_spread("ringtree") == 0.0


@pytest.mark.multiproc
def test_ringtree_trains_like_pytorch(lab):
    ours, theirs = lab.runs["ringtree"][0].params, lab.runs["torch"][0].params
    start = initial_params(5)
    assert np.max(np.abs(theirs - start)) > 1e-3  # training moved the weights
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    for rank in range(2):
        np.testing.assert_allclose(
            lab.runs["ringtree"][rank].losses, lab.runs["torch"][rank].losses, rtol=1e-5
        )


@pytest.mark.multiproc
def test_the_loss_goes_down(lab):
    losses = lab.mean_losses("ringtree")
    assert len(losses) == STEPS
    assert losses[-1] < 0.9 * losses[0]


@pytest.mark.multiproc
def test_bucket_records_match_the_schedule_and_the_model(lab):
    link = link_for("gloo")  # what the hook prices: the loopback model on this machine
    for rr in lab.runs["ringtree"]:
        assert sorted({b["step"] for b in rr.buckets}) == list(range(1, STEPS + 1))
        for step in range(1, STEPS + 1):
            mine = [b for b in rr.buckets if b["step"] == step]
            assert sum(b["bytes"] for b in mine) == 4 * lab.n_params  # fp32 gradients
        for b in rr.buckets:
            count = b["bytes"] // 4
            s = build(Collective.ALL_REDUCE, b["algorithm"], 2, n_chunks=b["n_chunks"])
            assert b["bytes_sent"] == s.bytes_sent(rr.rank, count, 4)
            assert b["bytes_received"] == s.bytes_received(rr.rank, count, 4)
            p = predict(Collective.ALL_REDUCE, b["algorithm"], 2, b["bytes"], link, itemsize=4,
                        spec=BuildSpec(n_chunks=b["n_chunks"]))
            assert b["predicted_s"] == pytest.approx(p.time_s)
            assert 0 < b["measured_s"] == pytest.approx(b["t_end_s"] - b["t_start_s"])
    for rr in lab.runs["torch"]:
        assert {b["algorithm"] for b in rr.buckets} == {"gloo"}
        assert len({b["step"] for b in rr.buckets}) == STEPS


@pytest.mark.multiproc
def test_trace_has_a_track_per_rank_and_the_transport_bytes(lab, tmp_path):
    trace = json.loads(json.dumps(lab_chrome_trace(lab)))  # loads with json
    events = trace["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    for pid in (0, 1):
        ranks = {names[(p, t)].split(" (")[0] for p, t in names if p == pid}
        assert ranks == {"rank 0", "rank 1"}  # one track per rank (plus lanes of a rank)
    assert all((e["pid"], e["tid"]) in names for e in slices)
    for rr in lab.runs["ringtree"]:
        for kind, counted in (("send", "bytes_sent"), ("recv", "bytes_received")):
            traced = sum(e["args"]["bytes"] for e in slices if e["cat"] == kind and e["pid"] == 1
                         and names[(1, e["tid"])].startswith(f"rank {rr.rank}"))
            assert traced == sum(b[counted] for b in rr.buckets) > 0
    buckets = [e for e in slices if e["cat"] == "bucket"]
    assert len(buckets) == sum(len(rr.buckets) for runs in lab.runs.values() for rr in runs)
    steps = [e for e in slices if e["cat"] == "step"]
    assert len(steps) == 2 * 2 * STEPS


@pytest.mark.multiproc
def test_trace_slices_of_a_track_nest_and_backward_holds_the_buckets(lab):
    """Chrome's X slices of one track must nest or be disjoint; every step has a backward
    slice inside it, and every bucket's all-reduce ends inside its step's backward pass (DDP
    waits for every bucket before backward returns)."""
    events = lab_chrome_trace(lab)["traceEvents"]
    by_track = {}
    for e in (e for e in events if e["ph"] == "X"):
        by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_track.values():
        spans.sort(key=lambda x: (x[0], -x[1]))
        open_ends = []
        for start, end in spans:
            while open_ends and open_ends[-1] <= start + 1e-3:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-3  # nests in the open slice
            open_ends.append(end)
    for runs in lab.runs.values():
        for rr in runs:
            assert len(rr.backward_start_s) == len(rr.step_start_s) == STEPS
            for k in range(STEPS):
                assert rr.step_start_s[k] <= rr.backward_start_s[k] <= rr.backward_end_s[k]
                assert rr.backward_end_s[k] <= rr.step_end_s[k]
                for b in (b for b in rr.buckets if b["step"] == k + 1):
                    assert rr.backward_start_s[k] <= b["t_start_s"] <= b["t_end_s"]
                    assert b["t_end_s"] <= rr.backward_end_s[k]
    backward = [e for e in events if e["ph"] == "X" and e["cat"] == "backward"]
    assert len(backward) == 2 * 2 * STEPS


#: The fork server the launcher forks ranks from (ringtree.procs.forked), which lives as long
#: as this process.
HELPERS = (b"ringtree.procs.forkserver",)


def _children():
    """Processes whose parent is this one (Linux /proc), zombies and the HELPERS excluded."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z" and not any(
                    h in cmdline for h in HELPERS):
                out.append(int(entry.name))
    return out


@pytest.mark.multiproc
def test_a_failing_rank_is_one_line_and_nothing_is_left():
    """A corpus shorter than one window: every rank raises while building its first batch."""
    with pytest.raises(RunFailed, match=r"^rank \d: RingtreeError: stream of 10 tokens is "
                       r"shorter than a window of 32") as e:
        run_lab(LabConfig(ranks=2, steps=2, corpus_tokens=10, timeout_s=60))
    assert "\n" not in str(e.value)
    assert _children() == []


@pytest.mark.multiproc
def test_a_lab_past_its_time_is_stopped():
    start = time.monotonic()
    with pytest.raises(RunFailed, match="did not finish within 3 s"):
        run_lab(LabConfig(ranks=2, steps=100_000, timeout_s=3))
    assert time.monotonic() - start < 30
    assert _children() == []


def test_failure_message_puts_the_cause_first():
    def outcome(ranks, timed_out=False):
        return Launch([RankOutcome(*r) for r in ranks], timed_out)

    broke = {"error": "rank 0: RuntimeError: Connection reset by peer", "failed_at_s": 5.0}
    boom = {"error": "rank 1: ValueError: boom", "failed_at_s": 4.0}
    assert outcome([(0, broke, 1), (1, boom, 1)]).failure_message(60) == (
        "rank 1: ValueError: boom; rank 0: RuntimeError: Connection reset by peer"
    )
    assert outcome([(0, broke, 1), (1, None, -9)]).failure_message(60) == (
        "rank 1 died (signal 9); rank 0: RuntimeError: Connection reset by peer"
    )
    assert outcome([(0, None, -9), (1, None, -9)], timed_out=True).failure_message(7) == (
        "the ranks did not finish within 7 s"
    )
    assert outcome([(0, None, 2, "Segmentation fault")]).failure_message(7) == (
        "rank 0 exited with status 2: Segmentation fault"
    )
