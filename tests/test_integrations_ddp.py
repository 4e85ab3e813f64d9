"""ringtree's DDP hook: bad input is a one-line RingtreeError (no process group, gradients on
several devices, an unknown algorithm, a model that is not DDP). Training with it on real
processes is tested in test_lab_ddp.py; here DDP over a subgroup (tests/ddp_cases.py)."""

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ringtree.errors import RingtreeError
from ringtree.integrations.ddp import (
    check_one_device,
    comm_hook,
    recording,
    register_comm_hook,
)
from ringtree.procs.launch import launch_body


@pytest.fixture
def world_of_one():
    """A gloo process group of one rank inside this process."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_hook_outside_a_process_group():
    assert not dist.is_initialized()
    for hook in (comm_hook(), comm_hook("ring"), recording()):
        with pytest.raises(RingtreeError, match="needs an initialised process group"):
            hook(None, object())


def test_register_outside_a_process_group():
    with pytest.raises(RingtreeError, match="init_process_group"):
        register_comm_hook(nn.Linear(2, 2))


def test_gradients_on_several_devices(world_of_one):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, device="meta"))
    with pytest.raises(RingtreeError, match=r"several devices: cpu \('0.weight'\), meta"):
        register_comm_hook(model)
    with pytest.raises(RingtreeError, match="several devices"):
        check_one_device(model)


def test_one_device_and_no_parameters():
    assert check_one_device(nn.Linear(2, 2)) == torch.device("cpu")
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(RingtreeError, match="no trainable parameters"):
        check_one_device(frozen)


def test_register_needs_a_ddp_model(world_of_one):
    with pytest.raises(RingtreeError, match="needs a DistributedDataParallel model, got Linear"):
        register_comm_hook(nn.Linear(2, 2))


@pytest.mark.parametrize("name", ["bogus", "", "all-gather"])
def test_unknown_algorithm(name):
    with pytest.raises(RingtreeError, match="unknown all-reduce algorithm .* expected auto or"):
        comm_hook(name)


def test_ddp_accepts_the_hooks(world_of_one):
    """DDP checks a hook's signature, annotations and name when it is registered."""
    for make in (comm_hook, recording):
        model = nn.parallel.DistributedDataParallel(nn.Linear(2, 2))
        model.register_comm_hook(None, make())


@pytest.mark.multiproc
def test_register_reads_the_models_process_group():
    """DDP over dp = [0, 2] / [1, 3] at N = 4, registered without a state: the gradients are
    torch's dp mean, bitwise, not the world's."""
    out = launch_body(4, "gloo", "ddp_cases:subgroup_hook", {"timeout_s": 60}, timeout_s=240,
                      env={"PYTHONPATH": str(Path(__file__).parent)})
    assert out.ok, out.failure_message(240)
    for r in out.ranks:
        assert r.result["world_differs"], r.result
        assert r.result["equal"], f"rank {r.rank}: gradients differ from torch's dp mean"
        assert r.result["algorithm"] == "ring" and r.result["n"] >= 1
