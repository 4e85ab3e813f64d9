"""--search: the space it tries, steps equal to the planner's, only fitting plans ranked."""

from dataclasses import replace

import pytest

from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.search import _groups, _Scorer, candidates, search
from ringtree.plan.strategy import Layout, parse_flavors

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

H100 = get_cluster("dgx-h100")


def test_search_ranks_fitting_plans_best_first():
    c = on_cluster(H100, 8)
    found = search(PRESETS["13b"], c, Training(global_batch=64), top=4)
    assert found.considered > 1000 and 0 < found.fitting < found.considered
    steps = [p.step_time_s for p in found.plans]
    assert steps == sorted(steps) and all(p.fits_memory for p in found.plans)
    assert found.limits.startswith("compute ")
    assert len(found.to_json()["plans"]) == 4


def test_scored_steps_equal_the_planners():
    """The search assembles steps from cached parts; they must be the planner's."""
    m, c = PRESETS["mixtral-8x7b"], on_cluster(H100, 4)
    tr = Training(global_batch=64)
    scorer = _Scorer(m, c, tr)
    checked = 0
    for k, g in enumerate(_groups(m, c, tr, c.nodes, None)):
        if k % 7:
            continue
        for rc in ("none", "full"):
            for flavor, step in scorer.steps(g, rc, c):
                lay = Layout(flavor, g.dp, g.tp, g.pp, g.sp, g.cp, g.ep, g.v)
                p = plan(m, c, lay, replace(tr, micro_batch=g.b, recompute=rc),
                         with_verdict=False)
                assert p.fits_memory
                assert step == pytest.approx(p.step_time_s, rel=1e-9)
                checked += 1
    assert checked > 20


def test_fixed_settings_and_frameworks_narrow_the_space():
    m, c = PRESETS["7b"], on_cluster(get_cluster("dgx-a100"), 2)
    tr = Training(global_batch=32, micro_batch=2, recompute="full")
    every = list(candidates(m, c, tr, 2, None, None))
    fixed = list(candidates(m, c, tr, 2, 2, "full"))
    assert {x.micro_batch for x in fixed} == {2} and {x.recompute for x in fixed} == {"full"}
    assert len(fixed) < len(every)
    ds = list(candidates(m, c, replace(tr, framework="deepspeed"), 2, None, None))
    assert all(x.layout.v == 1 and not x.layout.sp and x.layout.cp == 1 for x in ds)
    assert all(x.layout.flavor in ("ddp", "zero1") for x in ds if x.layout.pp > 1)


def test_flavours_parse_in_order_and_narrow_the_space():
    assert parse_flavors("fsdp, zero2") == ("zero2", "zero3")
    assert parse_flavors("ZeRO-1,ddp") == ("ddp", "zero1")
    for bad in ("zero4", "", ","):
        with pytest.raises(RingtreeError, match="data-parallel flavours"):
            parse_flavors(bad)
    m, c = PRESETS["7b"], on_cluster(get_cluster("dgx-a100"), 2)
    tr = Training(global_batch=32)
    every = list(candidates(m, c, tr, 2, None, "none"))
    z2 = list(candidates(m, c, tr, 2, None, "none", ("zero2",)))
    assert z2 == [x for x in every if x.layout.flavor == "zero2"]
    ds = replace(tr, framework="deepspeed")  # no ZeRO-2 beside DeepSpeed's pipeline
    assert all(x.layout.pp == 1 for x in candidates(m, c, ds, 2, None, "none", ("zero2",)))


def test_cost_objective_tries_fewer_nodes():
    c = replace(on_cluster(H100, 4), price_gpu_hour=2.0)
    found = search(PRESETS["7b"], c, Training(global_batch=64), top=3, objective="cost")
    assert found.considered > len(list(candidates(PRESETS["7b"], c, Training(global_batch=64),
                                                  4, None, None)))
    costs = [p.to_json()["usd_per_million_tokens"] for p in found.plans]
    assert costs == sorted(costs)


def test_search_needs_a_cluster_as_built():
    from ringtree.cost.terms import Link
    from ringtree.plan.placement import Placement

    links = Placement(2, 8, Link("a", 1e11), Link("b", 1e10))
    with pytest.raises(RingtreeError, match="cluster as built"):
        search(PRESETS["7b"], links, Training())


def test_all_gather_context_parallelism_exposes_its_transfers():
    """cp_overlap=False (Llama 3's all-gather CP, Dubey et al. 2024 3.3.2): the key/value
    transfers hide nothing, the step grows by what ring attention hid of them, and a layout
    without CP does not change."""
    m, c = PRESETS["llama3-8b"], on_cluster(H100, 4)
    lay = Layout("zero1", 8, 2, 1, True, 2)
    ring = plan(m, c, lay, Training(global_batch=64), with_verdict=False)
    gather = plan(m, c, lay, Training(global_batch=64, cp_overlap=False), with_verdict=False)
    pairs = list(zip(ring.collectives, gather.collectives, strict=True))
    cp_ops = [(a, b) for a, b in pairs if a.op.group == "cp"]
    assert cp_ops and all(b.exposed_s == pytest.approx(b.time_s) for _, b in cp_ops)
    assert all(a.exposed_s == b.exposed_s for a, b in pairs if a.op.group != "cp")
    hidden = sum(b.exposed_s - a.exposed_s for a, b in cp_ops)
    assert hidden > 0
    assert gather.step_time_s - ring.step_time_s == pytest.approx(hidden, rel=1e-6)
    flat = Layout("zero1", 16, 2, 1, True, 1)
    a = plan(m, c, flat, Training(global_batch=64), with_verdict=False)
    b = plan(m, c, flat, Training(global_batch=64, cp_overlap=False), with_verdict=False)
    assert a.step_time_s == b.step_time_s


def test_space_caps_the_degrees_and_v_reaches_one_layer_per_chunk():
    from ringtree.plan.search import Space

    m, c = PRESETS["70b"], on_cluster(H100, 8)  # 80 layers
    tr = Training(global_batch=256)
    every = list(candidates(m, c, tr, 8, 1, "full"))
    vs = {x.layout.v for x in every if x.layout.pp == 4}
    assert {10, 20} <= vs and 9 not in vs  # beyond 8 only where pp x v divides the layers
    capped = list(candidates(m, c, tr, 8, 1, "full", space=Space(max_tp=1, max_v=4)))
    assert capped and all(x.layout.tp == 1 and x.layout.v <= 4 for x in capped)
    assert len(capped) < len(every)
    moe = list(candidates(PRESETS["mixtral-8x7b"], c, tr, 8, 1, "full", space=Space(max_ep=2)))
    assert {x.layout.ep for x in moe} == {1, 2}


def test_hsdp_is_in_the_fsdp_space_and_scored_as_the_planner_plans_it():
    from ringtree.plan.search import default_flavors

    m, c = PRESETS["llama3-8b"], on_cluster(H100, 4)
    tr = Training(global_batch=32, framework="fsdp")
    assert "hsdp" in default_flavors(tr) and "hsdp" not in default_flavors(Training())
    scorer = _Scorer(m, c, tr)
    checked = 0
    for g in _groups(m, c, tr, c.nodes, 1, default_flavors(tr)):
        for flavor, step in scorer.steps(g, "full", c):
            if flavor != "hsdp":
                continue
            lay = g.layout(flavor)
            assert lay.shard == 8 // (g.tp * g.cp) and lay.hybrid
            p = plan(m, c, lay, replace(tr, recompute="full"), with_verdict=False)
            assert step == pytest.approx(p.step_time_s, rel=1e-9)
            checked += 1
    assert checked >= 3
    assert parse_flavors("hsdp,fsdp") == ("zero3", "hsdp")
