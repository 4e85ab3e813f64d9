"""The step's picture: one track per pipeline stage, spans that add up to the plan's step."""

import json
from xml.etree import ElementTree

import pytest

from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan.picture import chrome_trace, svg
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy
from ringtree.plan.timeline import BUBBLE, COMPUTE, step_events


@pytest.fixture(scope="module")
def piped():
    c = on_cluster(get_cluster("dgx-h100"), 4)
    return plan(PRESETS["13b"], c, parse_strategy("zero1,tp=8,pp=4,v=2,sp"),
                Training(global_batch=32))


def test_every_stage_has_its_forwards_backwards_and_bubble(piped):
    events = step_events(piped)
    stages = {e.stage for e in events}
    assert stages == {0, 1, 2, 3}
    for s in stages:
        kinds = [e.kind for e in events if e.stage == s and e.track == COMPUTE]
        assert kinds.count("forward") == kinds.count("backward") == 32 * 2  # m x v
        assert BUBBLE in kinds
    # the compute track of each stage never overlaps itself
    for s in stages:
        mine = sorted((e for e in events if e.stage == s and e.track == COMPUTE),
                      key=lambda e: e.start_s)
        for a, b in zip(mine, mine[1:], strict=False):
            assert a.start_s + a.dur_s <= b.start_s + 1e-9


def test_the_picture_lasts_about_a_step(piped):
    end = max(e.start_s + e.dur_s for e in step_events(piped))
    assert end == pytest.approx(piped.step_time_s, rel=0.05)


def test_chrome_trace_and_svg_are_well_formed(piped):
    trace = json.loads(json.dumps(chrome_trace(piped)))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len({e["pid"] for e in spans}) == 4 and len({e["tid"] for e in spans}) >= 3
    assert all(e["dur"] >= 0 for e in spans)
    root = ElementTree.fromstring(svg(piped))
    assert root.tag.endswith("svg")


def test_no_picture_without_compute():
    from ringtree.cost.terms import Link
    from ringtree.plan.placement import Placement

    p = plan(PRESETS["7b"], Placement(1, 8, Link("a", 1e11), Link("b", 1e10)),
             parse_strategy("ddp"), Training())
    with pytest.raises(RingtreeError, match="needs its compute"):
        step_events(p)


H100 = get_cluster("dgx-h100")


@pytest.mark.parametrize(
    ("model", "nodes", "strategy", "training"),
    [
        ("70b", 128, "zero3", Training(global_batch=1024)),  # issue 30: 4.76 s drawn, 3.43 s
        ("70b", 16, "zero3,tp=8", Training(global_batch=512)),  # 19 s drawn, 37 s
        ("70b", 8, "ddp,tp=8,pp=4", Training(global_batch=64, dp_overlap="none")),
        ("13b", 4, "zero1,tp=8,pp=4,v=2,sp", Training(global_batch=32, dp_overlap="full")),
        ("13b", 4, "zero3,tp=2,pp=2,cp=2", Training(global_batch=32)),
        ("mixtral-8x7b", 4, "ep=8,tp=2", Training(global_batch=64)),
        ("7b", None, "zero3", Training(compute_s=3.0, global_batch=4096)),
        ("7b", None, "zero2,tp=8,pp=2", Training(compute_s=3.0, global_batch=256)),
    ],
)
def test_the_picture_ends_at_the_plans_step(model, nodes, strategy, training):
    """The trace and the table come from the same figures: the last span of the picture ends
    at the printed step time, on a cluster as built (compute model) and on links (compute
    given), with and without a pipeline."""
    from ringtree.plan.placement import place

    where = on_cluster(H100, nodes) if nodes else place(gpus=512)
    p = plan(PRESETS[model], where, parse_strategy(strategy), training, with_verdict=False)
    end = max(e.start_s + e.dur_s for e in step_events(p))
    assert end == pytest.approx(p.step_time_s, rel=1e-9)
    trace = chrome_trace(p)
    drawn = max(e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert drawn / 1e6 == pytest.approx(trace["otherData"]["step_time_s"], rel=1e-6)
    assert all(e.dur_s >= 0 for e in step_events(p))
