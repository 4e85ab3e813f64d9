"""The one-machine model: terms hand-computed for small schedules, against a plain loop for
every algorithm, and its use by predict (with the plain fallback)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.algorithms import BuildSpec, algorithms_for, build, get_algorithm
from ringtree.collectives import Collective
from ringtree.cost.host import (
    HOST_MAX_RANKS,
    HostLink,
    HostModel,
    HostTerms,
    available_cores,
    host_terms,
    on_cores,
    prices_on_host,
    under_load,
)
from ringtree.cost.links import LOCAL_HOSTS
from ringtree.cost.models import predict
from ringtree.cost.select import choose
from ringtree.errors import RingtreeError
from ringtree.schedule import Action

MODEL = HostModel(cores=2, alpha_s=50e-6, message_s=100e-6, bandwidth_Bps=2e9,
                  gamma_s_per_byte=1 / 5e9)
LINK = HostLink("test", bandwidth_Bps=1e9, alpha_s=1e-4, gamma_s_per_byte=0.0, host=MODEL)


def test_ring_all_reduce_on_two_ranks_by_hand():
    s = build(Collective.ALL_REDUCE, "ring", 2)
    # each step: both ranks send 16 B and receive 16 B (2 messages, 32 B each); RS reduces
    assert host_terms(s, 8, 4, cores=2) == HostTerms(2, 4, 64, 16)
    # one core: the step costs both ranks' work
    assert host_terms(s, 8, 4, cores=1) == HostTerms(2, 8, 128, 32)


def test_tree_all_reduce_on_four_ranks_by_hand():
    s = build(Collective.ALL_REDUCE, "tree", 4, n_chunks=1)
    # steps: two leaves -> parents (4 ranks busy), child -> root, root -> child, two copies
    # down; 16 B each. On 2 cores the two-transfer steps cost 2 messages and 32 B each.
    assert host_terms(s, 4, 4, cores=2) == HostTerms(4, 6, 96, 32)
    assert host_terms(s, 4, 4, cores=4) == HostTerms(4, 4, 64, 32)


def loop_terms(s, count, itemsize, cores):  # noqa: ANN001, ANN201
    """The model written as a plain loop (the reference)."""
    sizes = s.chunk_sizes(count)
    out = [0.0, 0.0, 0.0]
    for step in s.steps:
        m, b, g = [0] * s.n_ranks, [0] * s.n_ranks, [0] * s.n_ranks
        for t in step.transfers:
            nb = sizes[t.chunk] * itemsize
            m[t.src] += 1
            m[t.dst] += 1
            b[t.src] += nb
            b[t.dst] += nb
            if t.action is Action.REDUCE:
                g[t.dst] += nb
        for i, x in enumerate((m, b, g)):
            out[i] += max(max(x), sum(x) / cores)
    return HostTerms(s.n_steps, *out)


@given(
    col=st.sampled_from(list(Collective)),
    n=st.integers(1, 9),
    count=st.integers(0, 200),
    cores=st.integers(1, 12),
    data=st.data(),
)
def test_terms_equal_a_plain_loop_for_every_algorithm(col, n, count, cores, data):
    alg = data.draw(st.sampled_from([a for a in algorithms_for(col) if a != "hierarchical"]))
    root = data.draw(st.integers(0, n - 1))
    chunks = data.draw(st.sampled_from([None, 1, 3]))
    s = build(col, alg, n, root=root, n_chunks=chunks)
    got, want = host_terms(s, count, 4, cores), loop_terms(s, count, 4, cores)
    assert got.steps == want.steps
    for a, b in zip((got.messages, got.wire_bytes, got.reduce_bytes),
                    (want.messages, want.wire_bytes, want.reduce_bytes), strict=True):
        assert a == pytest.approx(b)
    if cores >= n:  # enough cores: only the busiest rank counts, more cores change nothing
        assert host_terms(s, count, 4, cores + 5) == got


def test_predict_prices_a_host_link_with_the_one_machine_model():
    p = predict("all-reduce", "ring", 4, 1 << 20, LINK, itemsize=4)
    t = host_terms(build(Collective.ALL_REDUCE, "ring", 4), 1 << 18, 4, 2)
    assert p.time_s == pytest.approx(t.time_s(MODEL))
    assert p.latency_s == pytest.approx(t.steps * 50e-6 + t.messages * 100e-6)
    assert p.bandwidth_s == pytest.approx(t.wire_bytes / 2e9)


def test_beyond_the_rank_limit_a_host_link_refuses_and_on_nodes_is_a_plain_link():
    # one machine's processes past the limit: an error, not a switch to the plain fit (whose
    # figure jumped 2.6x from N=256 to 257 on a calibrated profile)
    predict("all-reduce", "ring", HOST_MAX_RANKS, 1 << 20, LINK, itemsize=4)
    with pytest.raises(RingtreeError, match="prices up to 256 of them, not N=257"):
        predict("all-reduce", "ring", HOST_MAX_RANKS + 1, 1 << 20, LINK, itemsize=4)
    plain = replace(LINK, host=None)
    spec = BuildSpec(ranks_per_node=2)
    a = predict("all-reduce", "hierarchical", 4, 1 << 20, LINK, itemsize=4, spec=spec)
    b = predict("all-reduce", "hierarchical", 4, 1 << 20, plain, itemsize=4, spec=spec)
    assert a.time_s == b.time_s


def test_auto_on_a_host_link_prefers_idle_ranks_when_oversubscribed():
    # 4 processes on 2 cores: recursive doubling keeps all 4 busy in both of its steps,
    # the tree leaves half of them idle in two of four steps -> tree at small sizes
    model = replace(MODEL, alpha_s=0.0, message_s=200e-6)
    link = replace(LINK, host=model)
    assert choose("all-reduce", 4, 64 << 10, link, itemsize=4).algorithm == "tree"


def test_available_cores_and_a_link_under_load():
    assert available_cores(2, 0.5) == 1.5
    assert available_cores(2, 0.0) == 2
    assert available_cores(2, 1.9) == 0.5  # never under a quarter of the machine
    loaded = under_load(LINK, 1.0)
    assert loaded.host.cores == 1.0 and loaded.alpha_s == LINK.alpha_s
    assert under_load(LINK, 0.0) is LINK
    plain = replace(LINK, host=None)
    assert under_load(plain, 1.0) is plain
    # 4 ranks that all work in every step: half the cores, twice the machine's share
    t2 = host_terms(build(Collective.ALL_REDUCE, "ring", 4), 1 << 20, 4, 2)
    t1 = host_terms(build(Collective.ALL_REDUCE, "ring", 4), 1 << 20, 4, 1)
    assert t1.wire_bytes == 2 * t2.wire_bytes and t1.messages == 2 * t2.messages
    slow = predict("all-reduce", "ring", 4, 1 << 20, loaded, itemsize=4)
    fast = predict("all-reduce", "ring", 4, 1 << 20, LINK, itemsize=4)
    assert slow.time_s > fast.time_s


def busiest_messages(s) -> int:  # noqa: ANN001
    """Sum over steps of the most messages one rank sends plus receives, one per peer and
    direction (a plain loop)."""
    total = 0
    for step in s.steps:
        peers: dict[int, set] = {}
        for t in step.transfers:
            peers.setdefault(t.src, set()).add(("to", t.dst))
            peers.setdefault(t.dst, set()).add(("from", t.src))
        total += max((len(p) for p in peers.values()), default=0)
    return total


@pytest.mark.parametrize("kind", ["loopback", "mpi-shm"])
@pytest.mark.parametrize("n", [2, 3, 4, 8, 300])
def test_a_host_model_whose_ranks_poll_prices_what_the_link_they_see_does(kind, n):
    """The engine's presets are one-machine models too: their ranks poll, so every step loads
    the cores with all N of them: predict on the model == alpha-beta on on_cores(), except
    that the loopback one prices each message (o) beyond a step's one each way for the
    algorithms that are not pipelined: their latency is (steps (alpha - 2 o) + messages o) x
    (N/C)^2.7, messages counted from the schedule."""
    host = LOCAL_HOSTS[kind]
    seen = on_cores(host, n)
    assert (seen == host.plain) == (n <= host.host.cores)
    o = host.host.message_s
    assert (o > 0) == (kind == "loopback")
    grow = max(1.0, n / host.host.cores) ** host.host.overload.latency
    for col in Collective:
        for alg in algorithms_for(col):
            if alg == "hierarchical":
                continue
            spec = BuildSpec(root=n - 1)
            a = predict(col, alg, n, 1 << 20, host, itemsize=4, spec=spec)
            b = predict(col, alg, n, 1 << 20, seen, itemsize=4, spec=spec)
            assert (a.bandwidth_s, a.reduce_s, a.steps) == (b.bandwidth_s, b.reduce_s, b.steps)
            if o == 0 or n > HOST_MAX_RANKS or get_algorithm(col, alg).pipelined:
                assert a == b  # pipelined: priced per step (polls_per_message's doc)
                continue
            s = build(col, alg, n, root=n - 1)
            extra = (busiest_messages(s) - 2 * s.n_steps) * o * grow
            assert a.latency_s == pytest.approx(b.latency_s + extra)
    # ... and ties go to the first registered, as on any link (not to the fewest steps)
    assert not prices_on_host(host, n, BuildSpec())


def test_the_per_message_cost_splits_the_measured_step():
    """A polling model keeps the link's alpha for a step of one message each way."""
    link = LOCAL_HOSTS["loopback"]
    assert link.host.alpha_s + 2 * link.host.message_s == pytest.approx(link.alpha_s)
    with pytest.raises(ValueError, match="within alpha"):
        HostLink.polling(link.plain, 2, link.host.overload, message_s=link.alpha_s)
