"""Per-step volumes against the published formulas, hand-computed.

ZeRO (Rajbhandari et al. 2020, Sec. 7): DDP 2 Psi, ZeRO-1/2 Psi + Psi, ZeRO-3 3 Psi per worker.
Megatron-LM (Shoeybi et al. 2019): 4 all-reduces of b*s*h per layer per micro-batch.
Pipeline (Narayanan et al. 2021): b*s*h/tp forward and backward per micro-batch per boundary.
"""

import pytest

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.plan.model import Model
from ringtree.plan.presets import PRESETS
from ringtree.plan.strategy import Layout
from ringtree.plan.volumes import Batch, model_state_bytes, step_collectives

PSI_7B = 6_738_415_616
L, H, S = 32, 4096, 4096


def by_op(ops):
    return {op.op: op for op in ops}


def step_bytes(op):
    """Payload bytes per step: the buffer each call works on, summed over the calls."""
    return ((op.calls_per_round - 1) * op.bytes_per_call + op.last_bytes) * op.rounds


def test_ddp_all_reduces_the_gradients_once():
    (op,) = step_collectives(PRESETS["7b"], Layout("ddp", 8, 1, 1), Batch(2, bucket_bytes=0))
    assert (op.collective, op.group, op.calls) == (Collective.ALL_REDUCE, "dp", 1)
    assert step_bytes(op) == 2 * PSI_7B  # Psi fp16 gradients; the ring sends ~2x that


def test_ddp_buckets_of_25MiB_by_default():
    (op,) = step_collectives(PRESETS["7b"], Layout("ddp", 8, 1, 1), Batch(2))
    mib25 = 25 * 2**20  # torch DDP: bucket_cap_mb * 1024 * 1024
    assert op.calls == -(-2 * PSI_7B // mib25)  # ceil: 515 buckets
    assert op.bytes_per_call == mib25
    assert step_bytes(op) == 2 * PSI_7B
    assert op.last_bytes == 2 * PSI_7B - (op.calls - 1) * mib25


def test_zero_buckets_default_to_deepspeeds_5e8_elements_and_can_be_set():
    ops = step_collectives(PRESETS["7b"], Layout("zero1", 8, 1, 1), Batch(2))
    assert {o.bytes_per_call for o in ops} == {10**9}  # 5e8 fp16 elements
    assert {o.calls for o in ops} == {-(-2 * PSI_7B // 10**9)}
    ops = step_collectives(PRESETS["7b"], Layout("zero2", 8, 1, 1), Batch(2, bucket_bytes=4001))
    assert {o.bytes_per_call for o in ops} == {4000}  # whole elements


@pytest.mark.parametrize("flavor", ["zero1", "zero2"])
def test_zero12_reduce_scatter_plus_all_gather(flavor):
    ops = by_op(step_collectives(PRESETS["7b"], Layout(flavor, 64, 1, 1), Batch(2, 1, 4)))
    rs, ag = ops["reduce-scatter grads"], ops["all-gather params"]
    assert rs.collective is Collective.REDUCE_SCATTER and ag.collective is Collective.ALL_GATHER
    assert step_bytes(ag) == 2 * PSI_7B
    # ZeRO-2's gradients are partitioned: reduced every micro-batch (m = 4); ZeRO-1 once
    assert step_bytes(rs) == 2 * PSI_7B * (4 if flavor == "zero2" else 1)


def test_zero3_gathers_twice_and_reduce_scatters_once_per_layer():
    ops = step_collectives(PRESETS["7b"], Layout("zero3", 64, 1, 1), Batch(2))
    assert [(o.collective, o.calls, o.window) for o in ops] == [
        (Collective.ALL_GATHER, L, "forward"),
        (Collective.ALL_GATHER, L, "backward"),
        (Collective.REDUCE_SCATTER, L, "backward"),
    ]
    assert all(step_bytes(o) == 2 * PSI_7B for o in ops)  # 3 Psi in all


def test_tensor_parallel_four_all_reduces_per_layer():
    ops = step_collectives(PRESETS["7b"], Layout("ddp", 1, 8, 1), Batch(2, 2, 3))
    assert all(o.collective is Collective.ALL_REDUCE and o.group == "tp" for o in ops)
    assert sum(o.calls for o in ops) == 4 * L * 3  # per layer per micro-batch
    assert {o.bytes_per_call for o in ops} == {2 * S * H * 2}  # b*s*h fp16, b = 2


def test_sequence_parallel_same_bytes_twice_the_calls():
    ops = step_collectives(PRESETS["7b"], Layout("ddp", 1, 8, 1, sp=True), Batch(2, 1, 1))
    kinds: dict = {}
    for o in ops:  # forward and backward are separate ops (the backward's overlap differs)
        kinds[o.collective] = kinds.get(o.collective, 0) + o.calls
    assert kinds == {Collective.REDUCE_SCATTER: 4 * L, Collective.ALL_GATHER: 4 * L}
    assert {o.bytes_per_call for o in ops} == {S * H * 2}


def test_pipeline_sends_and_dp_shard():
    ops = by_op(step_collectives(PRESETS["7b"], Layout("ddp", 2, 2, 4), Batch(2, 1, 8, 0)))
    send = ops["send activations+grads (pp)"]
    assert (send.collective, send.group, send.calls) == (None, "pp", 2 * 8)
    assert send.bytes_per_call == S * H * 2 // 2  # b*s*h / tp
    grads = ops["all-reduce grads"]
    assert step_bytes(grads) == 2 * -(-PSI_7B // 8)  # Psi / (tp * pp)


def test_one_gpu_communicates_nothing():
    assert step_collectives(PRESETS["7b"], Layout("zero3", 1, 1, 1), Batch(2)) == []


def test_more_stages_than_layers():
    with pytest.raises(RingtreeError, match="pp=64 pipeline stages but the model has 32 layers"):
        step_collectives(PRESETS["7b"], Layout("ddp", 1, 1, 64), Batch(2))


def test_tp_needs_a_shape():
    with pytest.raises(RingtreeError, match="--layers"):
        step_collectives(Model("x", 10**9), Layout("ddp", 1, 2, 1), Batch(2))


@pytest.mark.parametrize(
    ("flavor", "per_psi"),
    # ZeRO paper Sec. 5 / Fig. 1, mixed-precision Adam (K = 12), N_d = 64:
    [("ddp", 16), ("zero1", 4 + 12 / 64), ("zero2", 2 + 14 / 64), ("zero3", 16 / 64)],
)
def test_model_states_memory(flavor, per_psi):
    got = model_state_bytes(PRESETS["7b"], Layout(flavor, 64, 1, 1), 2)
    assert got == pytest.approx(per_psi * PSI_7B, rel=1e-9)


def test_expert_parallel_all_to_alls_per_moe_layer():
    from ringtree.plan.volumes import ALL_TO_ALL, alltoall_bytes

    m = PRESETS["mixtral-8x7b"]
    ops = by_op(step_collectives(m, Layout("ddp", 64, 1, 1, ep=8), Batch(2, 1, 3)))
    fwd, bwd = (
        ops["all-to-all dispatch+combine (ep fwd)"],
        ops["all-to-all dispatch+combine (ep bwd)"],
    )
    a = 2 * 1 * 4096 * 4096 * 2  # c k b s h p: top-2 of 4096 tokens of 4096, fp16
    assert alltoall_bytes(m, Layout("ddp", 64, 1, 1, ep=8), Batch(2, 1, 3)) == a
    for op in (fwd, bwd):
        assert (op.kind, op.group, op.bytes_per_call) == (ALL_TO_ALL, "ep", a)
        assert op.calls == 2 * 32 * 3  # dispatch + combine, 32 MoE layers, 3 micro-batches
    full = by_op(step_collectives(m, Layout("ddp", 64, 1, 1, ep=8), Batch(2, 1, 3, None, True)))
    assert full["all-to-all dispatch+combine (ep fwd)"].calls == 2 * fwd.calls  # recomputed
    # experts' gradients are reduced over the ranks holding the same experts (dp / ep)
    assert ops["all-reduce grads (experts)"].group == "edp"


def test_context_parallel_ring_and_gradients_over_dp_and_cp():
    m = PRESETS["llama3-8b"]
    ops = by_op(step_collectives(m, Layout("zero1", 4, 2, 1, cp=4), Batch(2, 1, 1)))
    send = ops["send keys+values (cp fwd)"]
    assert send.calls == 3 * 32  # cp - 1 blocks per layer
    assert send.bytes_per_call == 2 * (8192 // 4) * (8 // 2) * 128 * 2  # K and V of b s/cp
    assert ops["reduce-scatter grads"].group == "dpcp"


def test_full_recomputation_repeats_the_forward_tp_collectives():
    plain = by_op(step_collectives(PRESETS["7b"], Layout("ddp", 1, 8, 1), Batch(2, 1, 1)))
    full = by_op(
        step_collectives(PRESETS["7b"], Layout("ddp", 1, 8, 1), Batch(2, 1, 1, None, True))
    )
    name = "all-reduce activations (tp fwd)"
    assert full[name].calls == 2 * plain[name].calls == 4 * L


def test_op_level_checkpointing_repeats_only_the_sequence_parallel_all_gathers():
    # torchtitan's op-level save list holds reduce_scatter_tensor, not all_gather: the
    # backward's recomputation gathers each layer's two inputs again (2 L more calls)
    lay = Layout("ddp", 1, 8, 1, sp=True)
    op = by_op(step_collectives(PRESETS["7b"], lay, Batch(2, 1, 1, op_recompute=True)))
    assert op["all-gather activations (sp fwd)"].calls == 4 * L
    assert op["reduce-scatter activations (sp fwd)"].calls == 2 * L
    assert op["all-gather activations (sp bwd)"].calls == 2 * L
    assert op["reduce-scatter activations (sp bwd)"].calls == 2 * L
    plain = by_op(step_collectives(PRESETS["7b"], Layout("ddp", 1, 8, 1), Batch(2, 1, 1,
                                                                            op_recompute=True)))
    assert plain["all-reduce activations (tp fwd)"].calls == 2 * L  # no gathers to repeat


def test_parallel_block_one_tp_collective_per_layer_and_pass():
    """PaLM/MegaScale's parallel block: attention and MLP share one input and one output, so
    Megatron's 4 all-reduces per layer (2 forward, 2 backward) become 2; with sp, the 8
    all-gathers + reduce-scatters become 4; full recomputation repeats the forward's one."""
    ptb = PRESETS["7b"].with_overrides(parallel_block=True)
    ops = step_collectives(ptb, Layout("ddp", 1, 8, 1), Batch(2, 2, 3))
    assert sum(o.calls for o in ops) == 2 * L * 3
    assert {o.bytes_per_call for o in ops} == {2 * S * H * 2}  # b*s*h fp16 as before
    kinds: dict = {}
    for o in step_collectives(ptb, Layout("ddp", 1, 8, 1, sp=True), Batch(2, 1, 1)):
        kinds[o.collective] = kinds.get(o.collective, 0) + o.calls
    assert kinds == {Collective.REDUCE_SCATTER: 2 * L, Collective.ALL_GATHER: 2 * L}
    full = by_op(step_collectives(ptb, Layout("ddp", 1, 8, 1), Batch(2, 1, 1, None, True)))
    assert full["all-reduce activations (tp fwd)"].calls == 2 * L
    assert full["all-reduce activations (tp bwd)"].calls == L
