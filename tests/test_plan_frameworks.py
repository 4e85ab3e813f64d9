"""FSDP2 / HSDP as torchtitan runs them, and DeepSpeed ZeRO-3's framework overhead: volumes
hand-computed, properties of reshard_after_forward and of hybrid sharding."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringtree.collectives import Collective
from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan import frameworks
from ringtree.plan.compute import Device
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout, parse_strategy
from ringtree.plan.volumes import Batch, data_parallel_ops

PSI_7B = 6_738_415_616
M7 = PRESETS["7b"]


def per_step(op):
    return ((op.calls_per_round - 1) * op.bytes_per_call + op.last_bytes) * op.rounds


def ops_of(layout, batch):
    return {op.op: op for op in data_parallel_ops(M7, layout, batch)}


def test_fsdp2_zero3_gathers_twice_and_reduces_fp32_per_block_and_micro_batch():
    ops = ops_of(Layout("zero3", 8, 1, 1), Batch(2, micro_batches=4, fsdp=True,
                                                 reduce_itemsize=4))
    unit = -(-2 * PSI_7B // 32 // 2) * 2  # one block's bf16 parameters
    fwd, bwd, rs = (ops[k] for k in ("all-gather params (fwd)", "all-gather params (bwd)",
                                     "reduce-scatter grads"))
    assert (fwd.calls, fwd.bytes_per_call, fwd.window) == (32 * 4, unit, "forward")
    assert (bwd.calls, bwd.window) == (32 * 4, "backward")
    assert rs.bytes_per_call == 2 * unit  # fp32 gradients: twice bf16's bytes
    assert rs.collective is Collective.REDUCE_SCATTER


def test_fsdp2_without_reshard_gathers_once_per_micro_batch():
    ops = ops_of(Layout("zero2", 8, 1, 1), Batch(2, micro_batches=4, fsdp=True))
    assert set(ops) == {"all-gather params (fwd)", "reduce-scatter grads"}
    assert per_step(ops["all-gather params (fwd)"]) == pytest.approx(4 * 2 * PSI_7B, rel=1e-6)
    # Megatron's ZeRO-2 gathers the parameters once per step, after the optimizer
    meg = ops_of(Layout("zero2", 8, 1, 1), Batch(2, micro_batches=4))
    assert meg["all-gather params"].rounds == 1


def test_hsdp_reduces_in_the_shard_group_then_all_reduces_the_shard():
    ops = ops_of(Layout("zero3", 32, 1, 1, shard=8), Batch(2, fsdp=True, reduce_itemsize=4))
    assert {op.group for op in ops.values()} == {"dps", "dpr"}
    ar = ops["all-reduce grad shards (hsdp)"]
    rs = ops["reduce-scatter grads"]
    assert ar.collective is Collective.ALL_REDUCE
    assert ar.bytes_per_call == pytest.approx(rs.bytes_per_call / 8, abs=4)


def test_parse_hsdp():
    lay = parse_strategy("hsdp,shard=8").resolve(64)
    assert (lay.flavor, lay.shard, lay.shard_ranks, lay.name) == ("zero3", 8, 8, "hsdp,shard=8")
    assert parse_strategy("hsdp,shard=8").resolve(8).shard == 0  # one shard: plain FSDP
    for bad in ("hsdp", "zero1,shard=8", "hsdp,shard=8,ep=8"):
        with pytest.raises(RingtreeError):
            parse_strategy(bad)
    with pytest.raises(RingtreeError, match="does not divide"):
        parse_strategy("hsdp,shard=3").resolve(64)


H100 = get_cluster("dgx-h100")
FSDP = Training(global_batch=32, recompute="full", framework="fsdp")


def step(strategy, nodes=4, model=PRESETS["llama3-8b"], training=FSDP):
    return plan(model, on_cluster(H100, nodes), parse_strategy(strategy), training,
                with_verdict=False)


def test_reshard_after_forward_off_is_never_slower_and_never_smaller():
    on, off = step("zero3"), step("zero2")
    assert off.step_time_s <= on.step_time_s
    assert off.memory_bytes_per_gpu >= on.memory_bytes_per_gpu


def test_hsdp_sends_no_more_across_nodes_than_fsdp():
    def inter(p):
        return sum(c.bytes_per_gpu for c in p.collectives if c.shape.nodes > 1)

    fsdp, hsdp = step("zero3"), step("hsdp,shard=8")
    assert inter(hsdp) < inter(fsdp)  # only the shard's all-reduce leaves the node
    assert hsdp.memory.states > fsdp.memory.states  # sharded 8 ways instead of 32


def test_fsdp_copies_are_priced_by_the_memory_roofline():
    lay = Layout("zero3", 8, 1, 1)
    dev = Device.of(H100.gpu)
    m = PRESETS["llama3-8b"]
    block = m.params * 2 / m.layers
    per_block = 2 * 2 * block * (1 + 1 / 8) + block * (1 + 4 / 2)
    want = dev.memory_s(2 * m.layers * per_block, kernels=2 * m.layers * 5)
    assert frameworks.copy_s(m, lay, FSDP, dev, 2) == pytest.approx(want, rel=1e-3)
    assert frameworks.copy_s(m, lay, Training(), dev, 2) == 0.0  # Megatron: no flat copies


def test_deepspeed_zero3_runs_slower_than_nccl_and_exposed():
    m, ds = PRESETS["llama3-8b"], Training(global_batch=32, framework="deepspeed")
    nccl = step("zero3", model=m, training=Training(global_batch=32))
    slow = step("zero3", model=m, training=ds)
    assert sum(c.time_s for c in slow.collectives) == pytest.approx(
        frameworks.DEEPSPEED_ZERO3_SLOWDOWN * sum(c.time_s for c in nccl.collectives))
    assert slow.exposed_s == pytest.approx(slow.comm_time_s)


@settings(max_examples=20, deadline=None)
@given(nodes=st.sampled_from([2, 4, 8]), shard=st.sampled_from([2, 4, 8]),
       b=st.sampled_from([1, 2]))
def test_hsdp_property_inter_node_bytes(nodes, shard, b):
    tr = Training(global_batch=8 * nodes * b, micro_batch=b, framework="fsdp")
    fsdp = step("zero3", nodes, training=tr)
    hsdp = step(f"hsdp,shard={shard}", nodes, training=tr)

    def inter(p):
        return sum(c.bytes_per_gpu for c in p.collectives if c.shape.nodes > 1)

    assert inter(hsdp) <= inter(fsdp)


def test_deepspeed_zero3_with_a_given_compute_is_slowed_and_exposed_too():
    m = PRESETS["llama3-8b"]
    given = Training(global_batch=32, compute_s=1.0)
    nccl = step("zero3", model=m, training=given)
    slow = step("zero3", model=m, training=replace(given, framework="deepspeed"))
    assert slow.comm_time_s == pytest.approx(frameworks.DEEPSPEED_ZERO3_SLOWDOWN * nccl.comm_time_s)
    assert slow.exposed_s == pytest.approx(slow.comm_time_s) and nccl.exposed_s < nccl.comm_time_s


def test_composer_train_metrics_cost_their_bytes_per_logit_and_add_to_the_step():
    # two fp32 cross-entropies over b s x V logits per micro-batch, 14 bytes and 3 kernels each
    a100 = get_cluster("dgx-a100")
    dev = Device.of(a100.gpu)
    lay = Layout("zero3", 8, 1, 1)
    tr = Training(micro_batch=2, global_batch=64, framework="fsdp", train_metrics=2)
    m = 4  # micro-batches
    logits = 2 * M7.seq_len * M7.vocab
    want = m * (2 * 14 * logits / (a100.gpu.memory_bandwidth_GBps * 1e9 * 0.8) + 6 * 3e-6)
    assert frameworks.metrics_s(M7, lay, tr, dev, m) == pytest.approx(want, rel=1e-12)
    assert frameworks.metrics_s(M7, lay, replace(tr, train_metrics=0), dev, m) == 0.0
    place = on_cluster(a100, 1)
    with_metrics = plan(M7, place, lay, tr, with_verdict=False)
    without = plan(M7, place, lay, replace(tr, train_metrics=0), with_verdict=False)
    assert with_metrics.compute_s - without.compute_s == pytest.approx(want, rel=1e-9)
