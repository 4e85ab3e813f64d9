"""The textbook and alpha-beta models, through predict(): the seed's figures, exact bytes,
agreement with the schedule-derived cost, closed-form use, two-level links."""

import doctest

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringtree.cost.models as predict_module
from ringtree.algorithms import Algorithm, BuildSpec, algorithms_for, build, registry
from ringtree.collectives import Collective
from ringtree.cost.forms import Estimate
from ringtree.cost.forms import base as forms_base
from ringtree.cost.links import get_link, parse_link
from ringtree.cost.models import parse_model, predict
from ringtree.cost.terms import FLAT, INTER, INTRA, Terms, max_bytes_sent, schedule_terms
from ringtree.errors import RingtreeError
from ringtree.schedule import Schedule

SEED = [("nvlink4", 28 / 900), ("pcie4", 28 / 64), ("ib-hdr", 28 / 25), ("10gbe", 28 / 1.25)]
RING = [c for c in Collective if "ring" in algorithms_for(c)]


def test_doctests():
    assert doctest.testmod(predict_module).failed == 0


@pytest.mark.parametrize("link, seconds", SEED)
def test_textbook_reproduces_the_seed(link, seconds):
    # 7B fp16 gradients = 14 GB; ~2S = 28 GB per worker; time = 28 GB / nominal bandwidth
    p = predict("all-reduce", "ring", 8, 14 * 10**9, get_link(link), "textbook", itemsize=2)
    assert p.size_bytes == 14e9
    assert p.bytes_sent_per_worker == 28e9
    assert p.time_s == pytest.approx(seconds, rel=1e-12)
    assert p.latency_s == 0 and p.steps == 14


def test_textbook_tutor_and_other_collectives():
    p = predict("all-reduce", "ring", 2, 10**6, get_link("loopback"), "textbook", itemsize=2)
    assert p.bytes_sent_per_worker == 2e6
    for c in (Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.BROADCAST,
              Collective.REDUCE):
        assert (
            predict(c, "ring", 8, 10**6, get_link("pcie4"), "textbook").bytes_sent_per_worker == 1e6
        )
    assert predict("all-reduce", "ring", 1, 10**6, get_link("pcie4"), "textbook").time_s == 0


def test_alpha_beta_seed_case_exact_bytes():
    p = predict("all-reduce", "ring", 8, 14 * 10**9, get_link("nvlink4"), itemsize=2)
    assert p.model == "alpha-beta"
    assert p.bytes_sent_per_worker == 24.5e9  # 2 (N-1)/N S
    assert p.textbook_bytes == 28e9
    assert p.steps == 14
    assert p.latency_s == pytest.approx(14 * 3.4e-6)
    assert p.bandwidth_s == pytest.approx(24.5e9 / 370e9)
    assert p.time_s == pytest.approx(14 * 3.4e-6 + 24.5e9 / 370e9)


@given(n=st.integers(1, 300), per_rank=st.integers(0, 10**6), itemsize=st.sampled_from([1, 2, 4]))
def test_alpha_beta_ring_all_reduce_matches_the_formula(n, per_rank, itemsize):
    # divisible sizes: exactly 2(N-1)/N S bytes and 2(N-1) steps of S/N each
    size = n * per_rank * itemsize
    link = get_link("ib-hdr")
    p = predict("all-reduce", "ring", n, size, link, itemsize=itemsize)
    assert p.bytes_sent_per_worker == 2 * (n - 1) * size // n
    assert p.steps == 2 * (n - 1)
    expected = 2 * (n - 1) * link.alpha_s + 2 * (n - 1) * (size / n) / link.bandwidth_Bps
    assert p.time_s == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("collective", RING, ids=lambda c: c.value)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
@pytest.mark.parametrize("count", [0, 1, 7, 1000, 12345])
def test_alpha_beta_equals_the_schedule_derived_cost(collective, n, count):
    # the reference: terms counted step by step from the schedule the engine would run
    link = parse_link("custom:bw=10GB/s,lat=7us,reduce=40GB/s")
    spec = BuildSpec(root=n - 1, n_chunks=3)
    s = build(collective, "ring", n, root=spec.root, n_chunks=spec.n_chunks)
    terms = schedule_terms(s, count, 4)
    want = sum(
        t.steps * link.alpha_s + t.wire_bytes / link.bandwidth_Bps + t.reduce_bytes / 40e9
        for t in terms.values()
    )
    p = predict(collective, "ring", n, count * 4, link, itemsize=4, spec=spec)
    assert p.time_s == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert p.bytes_sent_per_worker == max_bytes_sent(s, count, 4)
    assert p.steps == sum(t.steps for t in terms.values())
    assert p.reduce_s == pytest.approx(sum(t.reduce_bytes for t in terms.values()) / 40e9)


def test_predict_uses_closed_forms_not_schedules(monkeypatch):
    def no_schedules(*args, **kwargs):
        raise AssertionError("predict built a schedule")

    monkeypatch.setattr(Schedule, "__post_init__", no_schedules)
    with pytest.raises(AssertionError):  # the trap works
        build("all-reduce", "ring", 4)
    p = predict("all-reduce", "ring", 4096, 14 * 10**9, get_link("ib-ndr"), itemsize=2)
    assert p.steps == 2 * 4095
    assert p.bytes_sent_per_worker == pytest.approx(2 * 4095 / 4096 * 14e9, rel=1e-6)


def test_two_level_links_price_each_level_on_its_link(monkeypatch):
    def two_level(n, count, itemsize, spec):
        return Estimate({INTRA: Terms(6, 600.0, 0), INTER: Terms(2, 200.0, 0)}, 800)

    key = (Collective.ALL_REDUCE, "two-level-test")
    monkeypatch.setitem(forms_base.FORMS, key, two_level)
    monkeypatch.setitem(registry._REGISTRY, key, Algorithm(*key, builder=None))  # type: ignore[arg-type]
    intra = parse_link("custom:bw=100B/s,lat=1s")
    inter = parse_link("custom:bw=10B/s,lat=5s")
    p = predict("all-reduce", "two-level-test", 8, 1000, {INTRA: intra, INTER: inter})
    assert p.latency_s == 6 * 1 + 2 * 5
    assert p.bandwidth_s == 600 / 100 + 200 / 10
    assert p.link == "custom:bw=100B/s,lat=1s+custom:bw=10B/s,lat=5s"
    # one link serves every level
    assert predict("all-reduce", "two-level-test", 8, 1000, intra).latency_s == 8
    # the textbook uses the inter-node link's nominal bandwidth
    assert predict("all-reduce", "two-level-test", 8, 1000, {INTRA: intra, INTER: inter},
                   "textbook").time_s == 2000 / 10


def test_flat_algorithm_on_two_levels_is_limited_by_the_inter_link():
    links = {INTRA: get_link("nvlink4"), INTER: get_link("ib-hdr")}
    both = predict("all-reduce", "ring", 16, 10**9, links)
    assert both.time_s == predict("all-reduce", "ring", 16, 10**9, get_link("ib-hdr")).time_s
    assert set(both.cost) == {FLAT}
    with pytest.raises(RingtreeError, match="flat"):
        predict("all-reduce", "ring", 16, 10**9, {INTRA: get_link("nvlink4")})


@pytest.mark.parametrize(
    "kwargs, match",
    [({"n_ranks": 0}, "workers"), ({"size_bytes": -1}, "size"), ({"size_bytes": 3, "itemsize": 2},
     "whole number"), ({"model": "magic"}, "cost model"), ({"algorithm": "warp"}, "warp")],
)
def test_bad_requests(kwargs, match):
    args = {"collective": "all-reduce", "algorithm": "ring", "n_ranks": 4, "size_bytes": 1024,
            "links": get_link("pcie4")} | kwargs
    with pytest.raises(RingtreeError, match=match):
        predict(**args)


def test_model_names():
    assert parse_model("alpha_beta") == parse_model("AlphaBeta") == "alpha-beta"
    assert parse_model("textbook") == "textbook"
