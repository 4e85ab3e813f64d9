"""What compute hides: TP-communication and pipeline-send overlap as options, and expert
parallelism's all-to-alls on the critical path, priced on the group's placement."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.cost.clusters import get_cluster
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy

H100 = get_cluster("dgx-h100")
BASE = Training(global_batch=256, recompute="selective")


def step(strategy, training=BASE, model=PRESETS["70b"], nodes=8):
    return plan(model, on_cluster(H100, nodes), parse_strategy(strategy), training,
                with_verdict=False)


def test_tp_comm_overlap_hides_the_forward_collectives_behind_the_forward_gemms():
    off = step("zero1,tp=8,pp=2,sp")
    on = step("zero1,tp=8,pp=2,sp", replace(BASE, tp_comm_overlap=True))
    for c_off, c_on in zip(off.collectives, on.collectives, strict=True):
        if c_on.op.group == "tp" and c_on.op.phase == "forward":
            window = on.micro.layers * on.micro.wgrad * on.micro_batches
            assert c_on.exposed_s == pytest.approx(max(0.0, c_off.exposed_s - window))
    assert on.step_time_s < off.step_time_s


@settings(max_examples=12, deadline=None)
@given(strategy=st.sampled_from(["zero1,tp=8,pp=2,sp", "zero1,tp=4,pp=4,v=2", "ddp,tp=8,pp=8"]),
       rc=st.sampled_from(["none", "selective", "full"]))
def test_overlap_options_never_slow_a_step(strategy, rc):
    tr = replace(BASE, recompute=rc)
    off = step(strategy, tr)
    for on in (replace(tr, tp_comm_overlap=True), replace(tr, pp_overlap=True)):
        assert step(strategy, on).step_time_s <= off.step_time_s * (1 + 1e-12)


def test_pp_overlap_hides_the_sends():
    on = step("zero1,tp=4,pp=4,v=2", replace(BASE, pp_overlap=True))
    assert all(c.exposed_s == 0 for c in on.collectives if c.op.group == "pp")


def a2a_per_byte(p):
    cs = [c for c in p.collectives if c.op.kind == "all-to-all"]
    return sum(c.time_s for c in cs) / sum(c.bytes_per_gpu for c in cs)


def test_expert_all_to_all_across_nodes_costs_more_per_byte_and_is_exposed():
    # the acceptance's deepseek-v3-like on 64 DGX H100, zero1,pp=16, full recomputation
    tr = Training(global_batch=1024, recompute="full")
    m = PRESETS["deepseek-v3-like"].with_overrides(seq_len=4096)
    e8, e32 = (step(f"zero1,pp=16,ep={ep}", tr, m, 64) for ep in (8, 32))
    assert a2a_per_byte(e32) >= 2 * a2a_per_byte(e8)
    for p in (e8, e32):  # on the critical path (Megatron-Core's default schedule)
        assert all(c.exposed_s == c.time_s for c in p.collectives if c.op.kind == "all-to-all")
    assert e32.step_time_s > e8.step_time_s


@settings(max_examples=10, deadline=None)
@given(ep=st.sampled_from([2, 4, 8]))
def test_crossing_a_node_never_makes_the_all_to_all_cheaper(ep):
    tr = Training(global_batch=64, recompute="full")
    m = PRESETS["mixtral-8x7b"]
    inside = step(f"zero1,ep={ep}", tr, m, 8)  # ep consecutive ranks: inside a node
    half = ep // 2  # nodes of ep/2 GPUs: the same 64 GPUs, each ep group over two nodes
    across = plan(m, on_cluster(replace(H100, gpus_per_node=half), 64 // half),
                  parse_strategy(f"zero1,ep={ep}"), tr, with_verdict=False)
    assert [c.shape.nodes for c in across.collectives if c.op.kind == "all-to-all"][0] == 2
    assert a2a_per_byte(across) >= a2a_per_byte(inside)


def test_ep_overlap_hides_each_pass_behind_the_adjacent_micro_batchs_other_pass():
    tr = Training(global_batch=64, recompute="selective")
    m = PRESETS["mixtral-8x7b"]
    off = step("zero1,ep=8", tr, m, 8)
    on = step("zero1,ep=8", replace(tr, ep_overlap=True), m, 8)
    for c in on.collectives:
        if c.op.kind == "all-to-all":
            window = on.micro.backward if c.op.phase == "forward" else on.micro.forward
            assert c.exposed_s == pytest.approx(
                max(0.0, c.time_s - window * on.micro_batches))
    assert on.step_time_s <= off.step_time_s
