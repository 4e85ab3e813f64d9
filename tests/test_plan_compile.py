"""--no-compile: an eager PyTorch step's compute, torchtitan's measured eager/compiled ratio."""

import json

import pytest

from ringtree.cli import main
from ringtree.cost.clusters import get_cluster
from ringtree.plan.compute import EAGER
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.presets import get_model
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout


def _plan(compiled, nodes=1, gbs=16):
    tr = Training(micro_batch=2, global_batch=gbs, recompute="selective", compile=compiled)
    return plan(get_model("llama3-8b"), on_cluster(get_cluster("dgx-h100"), nodes),
                Layout("zero3", 8 * nodes, 1, 1), tr, with_verdict=False)


def test_eager_compute_is_the_published_ratio_slower():
    assert pytest.approx(6667 / 5762) == EAGER
    eager, compiled = _plan(False), _plan(True)
    assert eager.compute_s == pytest.approx(EAGER * compiled.compute_s, rel=1e-9)
    assert eager.model_flops == compiled.model_flops


def test_torchtitan_128_gpus_checks_the_ratio():
    # Table 3: FSDP 5,605 tokens/s/GPU, FSDP + torch.compile 6,514 (128 GPUs, gbs 256)
    eager, compiled = _plan(False, 16, 256), _plan(True, 16, 256)
    assert eager.step_time_s / compiled.step_time_s == pytest.approx(6514 / 5605, rel=0.01)


def test_cli_no_compile(capsys):
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--json"]
    got = []
    for extra in ([], ["--no-compile"], ["--compile"]):
        assert main([*argv, *extra]) == 0
        got.append(json.loads(capsys.readouterr().out)["plans"][0]["compute_s"])
    assert got[1] == pytest.approx(EAGER * got[0]) and got[2] == got[0]
