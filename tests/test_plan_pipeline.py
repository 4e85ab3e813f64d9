"""Pipeline schedules: Megatron-LM's 1F1B and interleaved orders, timed, against the bubble
formula (m + (p-1)/v)(t_f + t_b) of Narayanan et al. 2021."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.errors import RingtreeError
from ringtree.plan.pipeline import B, F, bubble_fraction, check_schedule, simulate, stage_order


@st.composite
def schedules(draw):
    p = draw(st.integers(1, 8))
    v = draw(st.integers(1, 4)) if p > 1 else 1
    m = p * draw(st.integers(1, 6)) if v > 1 else draw(st.integers(1, 24))
    return p, m, v


@given(schedules())
@settings(max_examples=60, deadline=None)
def test_every_chunk_runs_once_forward_before_backward(case):
    p, m, v = case
    for i in range(p):
        order = stage_order(i, p, m, v)
        assert sorted(order) == sorted((k, mb, c) for k in (F, B) for mb in range(m)
                                       for c in range(v))
        seen = set()
        for kind, mb, c in order:
            if kind == B:
                assert (F, mb, c) in seen
            seen.add((kind, mb, c))


@given(schedules(), st.floats(0.1, 3.0), st.floats(0.1, 3.0))
@settings(max_examples=60, deadline=None)
def test_equal_stages_take_m_plus_p_minus_1_over_v_micro_batches(case, tf, tb):
    p, m, v = case
    spans = simulate(p, m, v, tf / v, tb / v)
    end = max(s.end_s for s in spans)
    if m >= p or v == 1:
        assert end == pytest.approx((m + (p - 1) / v) * (tf + tb), rel=1e-9)
    # no stage runs two things at once
    for i in range(p):
        mine = sorted((s for s in spans if s.stage == i), key=lambda s: s.start_s)
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in zip(mine, mine[1:], strict=False))


def test_bubble_fraction_and_megatrons_rule():
    assert bubble_fraction(8, 64) == pytest.approx(7 / 64)
    assert bubble_fraction(8, 64, 3) == pytest.approx(7 / 192)
    check_schedule(8, 64, 3)
    with pytest.raises(RingtreeError, match="multiple of pp=8"):
        check_schedule(8, 12, 2)


def _pp_sends(v, overlap):
    from ringtree.cost.clusters import get_cluster
    from ringtree.plan.placement import on_cluster
    from ringtree.plan.planner import plan
    from ringtree.plan.presets import get_model
    from ringtree.plan.record import Training
    from ringtree.plan.strategy import Layout

    tr = Training(global_batch=64, pp_overlap=overlap)
    lay = Layout("zero1", 2, 8, 2, True, v=v)
    p = plan(get_model("70b"), on_cluster(get_cluster("dgx-h100"), 4), lay, tr, with_verdict=False)
    (send,) = [c for c in p.to_json()["collectives"] if c["group"] == "pp"]
    return send, p.step_time_s


@pytest.mark.parametrize("v", [1, 2, 4])
def test_overlapped_pipeline_sends_hide_only_under_interleaving(v):
    # Megatron-Core's overlap_p2p_comm (set by Megatron-Bridge when pp > 1 and v > 1): the
    # sends hide behind the micro-batch's compute, which on 70B with tp 8 is far longer
    plain, step = _pp_sends(v, False)
    hidden, step_o = _pp_sends(v, True)
    assert plain["exposed_s"] == pytest.approx(plain["time_s"], rel=1e-9) and plain["time_s"] > 0
    if v == 1:
        assert hidden["exposed_s"] == plain["exposed_s"] and step_o == step
    else:
        assert hidden["exposed_s"] == 0.0
        # the step loses the sends of its 32 micro-batches and the bubble's (p - 1) / v waits
        assert step - step_o == pytest.approx(plain["exposed_s"] * (1 + 1 / (v * 32)), rel=1e-6)
