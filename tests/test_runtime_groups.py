"""Per-group state without processes: ranks per node from the launcher's layout, torch's root
semantics on a group, and the one cache per group."""

from __future__ import annotations

import numpy as np
import pytest

from ringtree.errors import RingtreeError
from ringtree.events import Recorder
from ringtree.runtime import api, calls, run_ranks
from ringtree.runtime.groups import Group, Settings, nodes_of
from ringtree.runtime.tape import compile_tape as tape_of


@pytest.mark.parametrize(("ranks", "local", "want"), [
    ((0, 1, 2, 3), 2, 2), ((0, 1, 2, 3), 4, 4), ((0, 1, 2, 3), 8, 4), ((4, 5, 6, 7), 2, 2),
    ((1, 2, 3), 2, None),        # node 0 holds one member, node 1 two
    ((0, 2, 4, 6), 2, 1),        # one member on each of four nodes
    ((0, 2, 1, 3), 2, None),     # a node's members are not consecutive in the group
    ((0, 1, 2, 3), None, None),  # no launcher: unknown
])
def test_ranks_per_node_from_the_launcher_layout(ranks, local, want):
    assert nodes_of(ranks, local) == want


class _Stub:
    rank, size, kind, stale_sends = 1, 3, "local", False


def group(ranks: tuple[int, ...]) -> Group:
    s = Settings(timeout_s=1, check="off", slice_bytes=1 << 20, algo="", duplex=True)
    return Group(_Stub(), s, ranks, "test")  # type: ignore[arg-type]


def test_roots_are_global_ranks_or_group_ranks_as_in_torch():
    g = group((1, 2, 3))
    assert g.root(2, None, "src") == 1 and g.root(None, 2, "src") == 2
    with pytest.raises(RingtreeError, match=r"^src=0 is not a rank of this group: its global "
                       r"ranks are 1..3 \(use group_src="):
        g.root(0, None, "src")
    with pytest.raises(RingtreeError, match="give src= or group_src=, not both"):
        g.root(1, 0, "src")
    with pytest.raises(RingtreeError, match="give the root"):
        g.root(None, None, "dst")
    with pytest.raises(RingtreeError, match=r"group_dst=3 is not a rank of this group \(0..2\)"):
        g.root(None, 3, "dst")


def test_a_call_shape_is_planned_once_per_group(monkeypatch):
    tapes = []  # the tape is worked out with the plan, once, not on each call
    monkeypatch.setattr(calls, "compile_tape", lambda prog: tapes.append(prog) or tape_of(prog))

    def body(t):
        rec = Recorder(t.rank, messages=False)
        for _ in range(3):
            api.all_reduce(np.ones(100), group=t, recorder=rec, algorithm="ring")
        api.all_reduce(np.ones(101), group=t, recorder=rec, algorithm="ring")
        plans = list(t.engine_group.plans.values())
        assert all(p.tape == tape_of(p.program) for p in plans)
        return len(plans), [c.count for c in rec.calls]

    for plans, counts in run_ranks(2, body):
        assert plans == 2 and counts == [100, 100, 100, 101]
    assert len(tapes) == 2 * 2  # two shapes on each of two ranks


def test_the_first_call_of_a_shape_exchanges_fingerprints_later_ones_do_not():
    def body(t):
        ctl = t.control()
        sent = []
        for _ in range(3):
            api.all_reduce(np.ones(64), group=t)
            sent.append(ctl.messages_sent)
        api.all_reduce(np.ones(64), group=t, check="always")
        sent.append(ctl.messages_sent)
        return sent

    assert run_ranks(3, body) == [[2, 2, 2, 4]] * 3
