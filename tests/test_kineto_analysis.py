"""Process groups told apart by the ranks' order of calls; the step split as HTA defines it,
by hand; a collective's time over its ranks; what-if reprices nothing away when the model
gives back the measured time."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.cost.models import predict
from ringtree.cost.nccl import predict as nccl_predict
from ringtree.kineto import whatif
from ringtree.kineto.calls import Call, RankTrace, Run, Step
from ringtree.kineto.groups import assign_groups
from ringtree.kineto.instances import instances, lateness
from ringtree.kineto.intervals import EMPTY, merge
from ringtree.kineto.pricing import Priced, Target, nodes_for, price
from ringtree.kineto.split import split


def rank_trace(rank, calls, groups, busy=None, steps=(), world=None, host="h"):
    busy = busy or {"compute": EMPTY, "comm": EMPTY, "memory": EMPTY}
    return RankTrace(f"rank{rank}.json", rank, world, "gloo", "cpu", host, calls, busy,
                     list(steps), groups)


@given(sub=st.lists(st.sampled_from([4, 8, 4000]), max_size=6),
       world=st.lists(st.sampled_from([4, 8, 1024]), min_size=1, max_size=6),
       mix=st.randoms(use_true_random=False))
def test_groups_from_the_order_of_calls(sub, world, mix):
    """Ranks 0, 1 call the world's collectives and their own group's, interleaved at random
    (the same program order on both, each group's order kept); rank 2 only the world's.
    Counts per (size, group size) come out as called."""
    groups = {"0": (0, 1, 2), "1": (0, 1)}
    seq, subs, merged = [("w", s) for s in world], [("s", s) for s in sub], []
    while seq or subs:
        src = seq if not subs or (seq and mix.random() < 0.5) else subs
        merged.append(src.pop(0))
    traces = []
    for r in range(3):
        mine = merged if r < 2 else [c for c in merged if c[0] == "w"]
        calls = [Call(r, "all-reduce", "c10d::allreduce_", count=s, dtype="float32",
                      cpu=(float(i), i + 0.5), work=(float(i), i + 0.5))
                 for i, (_, s) in enumerate(mine)]
        traces.append(rank_trace(r, calls, groups, world=3))
    assign_groups(traces)
    got = {}
    for t in traces:
        for c in t.calls:
            got[(c.count, c.group_size)] = got.get((c.count, c.group_size), 0) + 1
    want = {}
    for s in world:
        want[(s, 3)] = want.get((s, 3), 0) + 3
    for s in sub:
        want[(s, 2)] = want.get((s, 2), 0) + 2
    assert got == want


def test_split_by_hand():
    """Window [0, 100): compute [0, 40) and [60, 70), comm [30, 80), memory [85, 90)."""
    busy = {"compute": merge([0, 60], [40, 70]), "comm": merge([30], [80]),
            "memory": merge([85], [90])}
    s = split(rank_trace(0, [], {}, busy), 0.0, 100.0)
    us = 1e-6
    assert s.compute_s == pytest.approx(50 * us)
    assert s.exposed_comm_s == pytest.approx(30 * us)  # [40, 60) and [70, 80)
    assert s.memory_s == pytest.approx(5 * us)
    assert s.idle_s == pytest.approx(15 * us)  # [80, 85) and [90, 100)
    assert s.compute_s + s.exposed_comm_s + s.memory_s + s.idle_s == pytest.approx(s.time_s)
    assert s.overlap == pytest.approx(20 / 50)  # [30, 40) and [60, 70) of comm's 50


def two_rank_run(starts, ends, kind="all-reduce", host=("h", "h")):
    ranks = []
    for r in range(2):
        c = Call(r, kind, "c10d::x", count=256, dtype="float32", group="0", group_ranks=(0, 1),
                 cpu=(starts[r], starts[r] + 1), work=(starts[r], ends[r]))
        ranks.append(rank_trace(r, [c], {"0": (0, 1)}, world=2, host=host[r]))
    return Run(ranks)


def test_collective_time_is_the_last_rank_to_join():
    found, mismatched = instances(two_rank_run([0.0, 30.0], [50.0, 50.5]))
    assert mismatched == 0 and len(found) == 1
    assert found[0].time_us == pytest.approx(20.5)  # rank 1's span: it joined last
    late = lateness(found, found[0].offsets)
    assert (late[0].rank, late[0].median_us, late[0].last) == (1, 30.0, 1)
    # a root leaves a broadcast early: the time is the last end less the last start
    found, _ = instances(two_rank_run([0.0, 30.0], [31.0, 45.0], "broadcast"))
    assert found[0].time_us == pytest.approx(45.0 - 30.0)


def test_clocks_of_two_hosts_are_aligned_on_common_ends():
    found, _ = instances(two_rank_run([0.0, 1030.0], [50.0, 1050.0], host=("a", "b")))
    assert found[0].offsets == {0: 0.0, 1: 1000.0}
    assert lateness(found, found[0].offsets)[0].median_us == pytest.approx(30.0)


def test_prices_are_the_models():
    h = get_cluster("dgx-h100")
    got = price("all-reduce", 1 << 26, 16, 2, "nccl", Target("h", cluster=h))
    assert got.time_s == nccl_predict("all-reduce", 1 << 26, h, 2).time_s
    assert nodes_for(16, Target("h", cluster=h)) == (2, 8)
    assert nodes_for(4, Target("h", cluster=h)) == (1, 4)
    assert nodes_for(16, Target("h", cluster=h, nodes=4)) == (4, 4)
    from ringtree.cost.host import HostLink
    from ringtree.cost.links import get_link
    link = HostLink(**{k: getattr(get_link("loopback"), k) for k in
                       ("name", "bandwidth_Bps", "alpha_s", "gamma_s_per_byte")})
    gloo = price("reduce-scatter", 1 << 20, 2, 4, "gloo", Target("l", link=link))
    assert gloo.time_s == predict("all-reduce", "ring", 2, 1 << 20, link, itemsize=4).time_s
    assert price("send", 4, 2, 4, "gloo", Target("l", link=link)) is None
    assert price("all-reduce", None, 2, 4, "gloo", Target("l", link=link)) is None


def test_what_if_with_the_measured_times_changes_nothing(monkeypatch):
    busy = {"compute": merge([0.0], [60.0]), "comm": merge([50.0], [90.0]), "memory": EMPTY}
    ranks = []
    for r in range(2):
        c = Call(r, "all-reduce", "c10d::allreduce_", count=256, dtype="float32", group="0",
                 group_ranks=(0, 1), cpu=(50.0, 51.0), work=(50.0 + r, 90.0))
        ranks.append(rank_trace(r, [c], {"0": (0, 1)}, busy, [Step(1, 0.0, 100.0)], world=2))
    run = Run(ranks)
    found, _ = instances(run)
    measured = found[0].time_us * 1e-6
    monkeypatch.setattr(whatif, "price", lambda *a, **k: Priced(measured, "ring"))
    w = whatif.what_if(run, Target("x", cluster=get_cluster("dgx-h100")), None)
    s = w["steps"][0]
    assert s["what_if_time_s"] == pytest.approx(s["time_s"])
    assert s["what_if_exposed_comm_s"] == pytest.approx(s["exposed_comm_s"])
    # twice as fast: the exposed part shrinks by what the faster collective saves
    monkeypatch.setattr(whatif, "price", lambda *a, **k: Priced(measured / 2, "ring"))
    s = whatif.what_if(run, Target("x", cluster=get_cluster("dgx-h100")), None)["steps"][0]
    assert s["what_if_time_s"] == pytest.approx(s["time_s"] - measured / 2)


def test_weak_scaling_sizes():
    ag = Call(0, "all-gather", "x", count=1024, dtype="float32", group_ranks=tuple(range(8)))
    ar = Call(0, "all-reduce", "x", count=1024, dtype="float32", group_ranks=tuple(range(8)))
    tp = Call(0, "all-reduce", "x", count=1024, dtype="float32", group_ranks=(0, 1))
    assert whatif.scaled(ag, 8, 32) == (4096 * 4, 32)  # each rank's part kept
    assert whatif.scaled(ar, 8, 32) == (4096, 32)
    assert whatif.scaled(tp, 8, 32) == (4096, 2)  # a group inside the run keeps its size
