"""The pricing seam: both implementations answer the three calls of ringtree.cost.pricer,
each as its own model says (select.choose on links, nccl.predict on a cluster as built), with
the group's placement deciding the links, and cached."""

from __future__ import annotations

import pytest

from ringtree.algorithms import BuildSpec
from ringtree.collectives import Collective
from ringtree.cost.clusters import get_cluster
from ringtree.cost.link_pricer import LinkPricer
from ringtree.cost.links import get_link
from ringtree.cost.nccl import predict
from ringtree.cost.nccl.pricer import P2P_INTRA_S, NcclPricer
from ringtree.cost.pricer import CallTime, GroupShape, Pricer
from ringtree.cost.select import choose
from ringtree.cost.terms import INTER, INTRA

AR = Collective.ALL_REDUCE
NV, IB = get_link("nvlink4"), get_link("ib-hdr")
TWO = {INTRA: NV, INTER: IB}


def pricers() -> list[Pricer]:
    return [LinkPricer(TWO, env={}), NcclPricer(get_cluster("dgx-h100"))]


@pytest.mark.parametrize("pricer", pricers(), ids=["links", "nccl"])
def test_every_pricer_answers_the_three_calls(pricer):
    shape = GroupShape(16, 2, 8)
    for got in (pricer.call(AR, shape, 2**30, 2), pricer.point_to_point(shape, 2**20),
                pricer.all_to_all(shape, 2**24)):
        assert isinstance(got, CallTime) and got.time_s > got.latency_s > 0
        assert got.bytes_sent > 0 and got.record()["time_s"] == got.time_s
    assert pricer.call(AR, shape, 2**30, 2) is pricer.call(AR, shape, 2**30, 2)  # cached


def test_links_by_where_the_group_sits():
    p = LinkPricer(TWO, env={})
    inside = p.call(AR, GroupShape(8, 1, 8), 2**30, 2)
    assert inside.time_s == choose(AR, 8, 2**30, NV, itemsize=2, env={}).chosen.time_s
    spread = p.call(AR, GroupShape(32, 4, 8), 2**30, 2)
    want = choose(AR, 32, 2**30, TWO, itemsize=2, spec=BuildSpec(ranks_per_node=8), env={})
    assert (spread.algorithm, spread.time_s) == (want.algorithm, want.chosen.time_s)
    uneven = p.call(AR, GroupShape(12, 2, None), 2**30, 2)
    assert uneven.time_s == choose(AR, 12, 2**30, IB, itemsize=2, env={}).chosen.time_s
    # a send crosses one link: alpha + S / bandwidth
    send = p.point_to_point(GroupShape(2, 2, 1), 10**9)
    assert send.time_s == pytest.approx(IB.alpha_s + 10**9 / IB.bandwidth_Bps)
    assert send.record() == {"algorithm": "p2p", "time_s": send.time_s,
                             "bytes_sent_per_worker": 10**9, "latency_s": IB.alpha_s}


def test_a_given_algorithm_and_the_environment():
    forced = LinkPricer(NV, env={"RINGTREE_ALGO": "tree"}).call(AR, GroupShape(8, 8, None),
                                                                2**30, 4)
    assert forced.algorithm == "tree" and forced.forced
    given = LinkPricer(NV, algorithm="ring").call(AR, GroupShape(8, 8, None), 2**30, 4)
    assert given.algorithm == "ring" and not given.forced
    assert given.record()["n_chunks"] is None


def test_nccl_is_the_nccl_models_call():
    h100 = get_cluster("dgx-h100")
    got = NcclPricer(h100, {"NCCL_ALGO": "Tree"}).call(AR, GroupShape(32, 4, 8), 2**28, 2)
    want = predict(AR, 2**28, h100, 4, gpus_per_node=8, env={"NCCL_ALGO": "Tree"})
    assert (got.algorithm, got.time_s, got.forced) == ("nccl tree/" + want.protocol,
                                                       want.time_s, True)
    assert got.latency_s == want.latency_s + want.host_s
    assert got.bytes_sent == 2**28 * 2 * 31 / 32  # bus bytes: 2 (n-1)/n S
    assert got.record() == want.record()
    inside = NcclPricer(h100).point_to_point(GroupShape(8, 1, 8), 0)
    assert inside.time_s == P2P_INTRA_S
