"""Micro-batch level recomputation (Korthikanti et al. 2022, App. C) on their 175B run:
GPT-3 175B, tp=8, pp=8, v=3, sp, b=1, 64 micro-batches, unfused attention, 8 DGX A100 80GB
nodes. Hand-computed: the first GPU holds p v + p - 1 = 31 model chunks in flight, each
96 / 8 / 3 = 4 layers; keeping a chunk whole adds its attention scores, 5 a s^2 b / t =
5 x 96 x 2048^2 / 8 = 251,658,240 bytes a layer, 1,006,632,960 a chunk."""

from dataclasses import replace

import pytest

from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan.checkpointing import microbatch_kept
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import PRESETS
from ringtree.plan.record import Training
from ringtree.plan.search import search
from ringtree.plan.strategy import Layout

M = PRESETS["gpt3-175b"]
A100 = on_cluster(get_cluster("dgx-a100"), 8)
LAY = Layout("ddp", 1, 8, 8, True, 1, 1, 3)
TR = Training(global_batch=64, recompute="selective+microbatch", attention="unfused",
              dp_overlap="none")
CHUNKS, CHUNK = 31, 4 * 251_658_240


def step(rc: str, memory: int | None = None):
    where = A100 if memory is None else replace(A100, gpu_memory_bytes=memory)
    return plan(M, where, LAY, replace(TR, recompute=rc), with_verdict=False)


def test_the_share_recomputed_is_the_chunks_that_do_not_fit():
    sel = step("selective").memory
    free = 13.5 * CHUNK  # room for 13 chunks kept whole, not 14
    share, mem = microbatch_kept(M, LAY, TR, 64, int(sel.total + free))
    assert share == pytest.approx(18 / 31)
    assert mem.activations == pytest.approx(sel.activations + 13 * CHUNK, abs=1)
    assert microbatch_kept(M, LAY, TR, 64, sel.total - 1)[0] == 1.0  # never above selective
    everything = microbatch_kept(M, LAY, TR, 64, 10**12)  # never below none
    assert everything[0] == 0.0
    assert everything[1].activations == pytest.approx(step("none").memory.activations, abs=2)


def test_the_step_lies_between_none_and_selective_by_that_share():
    none, sel = step("none"), step("selective")
    memory = int(sel.memory.total + 13.5 * CHUNK)
    mb = step("selective+microbatch", memory)
    r = 18 / 31
    assert none.step_time_s < mb.step_time_s < sel.step_time_s
    assert mb.micro.backward == pytest.approx(
        none.micro.backward + r * (sel.micro.backward - none.micro.backward))
    # dp = 1: nothing hides behind the backward, so the whole step is linear in it
    assert mb.step_time_s == pytest.approx(
        none.step_time_s + r * (sel.step_time_s - none.step_time_s))
    assert mb.hardware_flops == pytest.approx(
        none.hardware_flops + r * (sel.hardware_flops - none.hardware_flops))
    assert mb.fits_memory and not step("none", memory).fits_memory


def test_fused_attention_saves_nothing_so_nothing_is_recomputed():
    flash = replace(TR, attention="flash")
    assert microbatch_kept(M, LAY, flash, 64, 0)[0] == 0.0


def test_search_refuses_it():
    with pytest.raises(RingtreeError, match="does not try"):
        search(M, A100, TR, fixed_recompute=True)
