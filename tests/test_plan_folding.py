"""Megatron-Core's MoE parallel folding (expert_tensor_parallel_size=1): the expert-parallel
groups run over tp x cp x dp ranks, experts whole on each GPU; hand-computed figures."""

import pytest

from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan import volumes as vol
from ringtree.plan.compute import Device, Slice, layer_time
from ringtree.plan.groups import group_shape
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import get_model
from ringtree.plan.record import Training
from ringtree.plan.strategy import parse_strategy

H100 = Device.of(get_cluster("dgx-h100").gpu)
MIXTRAL = get_model("mixtral-8x7b")
FOLDED = parse_strategy("zero1,tp=2,pp=8,ep=32,etp=1,v=4,sp").resolve(256)


def test_folded_layout_spans_tp_and_dp():
    # 256 GPUs / (tp 2 x pp 8) = dp 16; ep 32 = tp 2 x 16 dp ranks: one expert group per stage
    assert (FOLDED.dp, FOLDED.ep, FOLDED.ep_dp, FOLDED.edp, FOLDED.expert_tp) == (16, 32, 16, 1, 1)
    assert FOLDED.name == "zero1,tp=2,pp=8,v=4,ep=32,etp=1,sp"
    assert parse_strategy(FOLDED.name).resolve(256) == FOLDED
    # ranks t + 2 d of one stage: 32 consecutive ranks, 4 nodes of 8
    ep = group_shape(FOLDED, "ep", 8)
    assert (ep.size, ep.nodes, ep.per_node) == (32, 4, 8)
    assert group_shape(FOLDED, "edp", 8).size == 1  # no other copy of these experts
    # ep=8 over tp 2 x 4 dp: 8 consecutive ranks, one node; replicas dp / 4 = 4, stride 8
    small = parse_strategy("zero1,tp=2,pp=8,ep=8,etp=1").resolve(256)
    assert (group_shape(small, "ep", 8).nodes, group_shape(small, "edp", 8).size) == (1, 4)
    # unfolded (etp = tp): ep inside dp, stride tp
    plain = parse_strategy("zero1,tp=2,pp=8,ep=8").resolve(256)
    shape = group_shape(plain, "ep", 8)
    assert (shape.size, shape.nodes, shape.per_node, plain.edp) == (8, 2, 4, 2)


def test_folding_checks_its_degrees():
    with pytest.raises(RingtreeError, match="does not divide dp=16"):
        parse_strategy("zero1,tp=2,pp=8,ep=32").resolve(256)
    with pytest.raises(RingtreeError, match="blocks of 2"):
        parse_strategy("zero1,tp=2,pp=8,ep=3,etp=1").resolve(256)
    with pytest.raises(RingtreeError, match="etp=4"):
        parse_strategy("tp=2,ep=8,etp=4")
    # etp = tp is the default; etp=1 without tp or cp changes nothing
    assert parse_strategy("tp=2,ep=8,etp=2").resolve(16) == parse_strategy("tp=2,ep=8").resolve(16)
    assert parse_strategy("ep=8,etp=1").resolve(8).etp == 0


def test_folded_experts_are_whole_and_their_gradients_unreduced():
    m = MIXTRAL
    experts = vol.expert_total(m)
    dense = -(-(m.params - experts) // 16)  # tp 2 x pp 8
    lay = parse_strategy("zero1,tp=2,pp=8,ep=8,etp=1").resolve(256)
    assert vol.shard_params(m, lay) == dense + -(-experts // (8 * 8))  # experts / (pp x ep)
    plain = parse_strategy("zero1,tp=2,pp=8,ep=8").resolve(256)
    assert vol.shard_params(m, plain) == dense + -(-experts // (2 * 8 * 8))  # / (tp x pp x ep)
    batch = vol.Batch(2, 1, 4)
    ops = vol.data_parallel_ops(m, lay, batch)
    assert any("(experts)" in o.op for o in ops)  # edp 4: the experts' gradients reduced
    m32 = m.with_overrides(experts=32)
    assert not any("(experts)" in o.op for o in vol.data_parallel_ops(m32, FOLDED, batch))
    # each GPU dispatches its s / tp tokens under sp: c k (b s / tp) h p, as unfolded
    assert vol.alltoall_bytes(m32, FOLDED, batch) == 2 * (4096 // 2) * 4096 * 2


def test_folded_experts_do_the_same_flops_on_half_the_tokens():
    # tp 2: an unfolded GPU runs every token of the TP group through half of each expert's
    # FFN; a folded one its own half of the tokens through whole experts: the same FLOPs, in
    # per-expert batches half as tall and weights twice as wide
    m, tokens = MIXTRAL, 8192
    split = layer_time(m, Slice(tokens, 4096, 2, True, 8, "flash"), H100, True)
    whole = layer_time(m, Slice(tokens, 4096, 2, True, 8, "flash", 1), H100, True)
    assert whole.forward == pytest.approx(split.forward, rel=0.15)
    assert whole.forward != split.forward


def test_a_folded_plan_prices_its_all_to_all_over_four_nodes():
    m = MIXTRAL.with_overrides(experts=32)
    place = on_cluster(get_cluster("dgx-h100"), 32)
    tr = Training(global_batch=256, recompute="full")
    p = plan(m, place, FOLDED, tr, with_verdict=False)
    a2a = [c for c in p.collectives if c.op.kind == "all-to-all"]
    assert a2a and all((c.shape.size, c.shape.nodes) == (32, 4) for c in a2a)
    inside = plan(m, place, parse_strategy("zero1,tp=2,pp=8,ep=8,etp=1,v=4,sp").resolve(256),
                  tr, with_verdict=False)
    one = [c for c in inside.collectives if c.op.kind == "all-to-all"]
    per_byte = lambda cs: sum(c.time_s for c in cs) / sum(c.bytes_per_gpu for c in cs)  # noqa: E731
    assert per_byte(a2a) > 2 * per_byte(one)  # four nodes' NICs vs one node's NVLink


def test_folded_memory_holds_whole_experts():
    from ringtree.plan.memory import stage_params, state_memory
    from ringtree.plan.model import expert_params
    m = MIXTRAL
    layers = m.layers // 8  # pp 8: 4 layers a stage, every one an MoE layer
    lay = parse_strategy("zero1,tp=2,pp=8,ep=8,etp=1").resolve(256)
    plain = parse_strategy("zero1,tp=2,pp=8,ep=8").resolve(256)
    folded_experts = stage_params(m, lay)[1]
    assert folded_experts == pytest.approx(layers * expert_params(m) / 8)  # whole, / ep
    assert stage_params(m, plain)[1] == pytest.approx(folded_experts / 2)  # / (tp x ep)
    # zero1: Adam's 12 B per expert parameter over the ranks holding the same experts (edp 4
    # folded, dp / ep = 2 unfolded); the dense part is the same in both
    dense = stage_params(m, lay)[0]
    assert state_memory(m, lay)[2] == int(12 * (dense / 16 + folded_experts / 4))
    assert state_memory(m, plain)[2] == int(12 * (dense / 16 + folded_experts / 2 / 2))
