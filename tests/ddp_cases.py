"""DDP on a subgroup, one rank: a body for :mod:`ringtree.procs.rank`, started by
tests/test_integrations_ddp.py on 4 local gloo processes.

Data parallel over ``dp`` = [0, 2] / [1, 3] (the other dimension of a 2 x 2 mesh): one
backward step of the same model and per-rank data with torch's own DDP communication and with
``register_comm_hook(model)`` (no state: the hook must read the model's process group). The
gradients must be bitwise torch's (on two ranks ringtree's mean is torch's), and differ from
the world's mean (else the test could not tell the groups apart). Returns
``{"equal": bool, "world_differs": bool, "algorithm": ...}``.
"""

from __future__ import annotations

import copy
from typing import Any


def subgroup_hook(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """See the module doc."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ringtree.integrations.ddp import register_comm_hook

    groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    dp = groups[engine.rank % 2]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    grads, hook = {}, None
    for name in ("torch", "ringtree"):
        model = DDP(copy.deepcopy(net), process_group=dp)
        if name == "ringtree":
            hook = register_comm_hook(model, cfg.get("algorithm", "ring"))
        g = torch.Generator().manual_seed(100 + engine.rank)
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 4, (32,), generator=g)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        grads[name] = [p.grad.detach().clone() for p in model.parameters()]
    mine = [t.clone() for t in grads["torch"]]  # torch's dp mean, averaged over the world
    for t in mine:
        dist.all_reduce(t)
        t.div_(engine.size)
    assert hook is not None
    return {
        "equal": all(map(torch.equal, grads["torch"], grads["ringtree"])),
        "world_differs": not all(map(torch.allclose, mine, grads["torch"])),
        "algorithm": hook.records[0].algorithm, "n": len(hook.records),
    }
