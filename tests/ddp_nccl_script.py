"""Run by tests/test_engine.py under ``torchrun`` on a CUDA machine: DDP over NCCL, one step
with ringtree's comm hook and one with torch's own all-reduce, same model and data. Ranks
may share one GPU (each passes for a host of its own: NCCL_HOSTID). Prints one JSON line per
rank: whether the gradients are equal, and what the hook recorded."""

import copy
import json
import os
import sys

os.environ["NCCL_HOSTID"] = f"ringtree-ddp-{os.environ['RANK']}"
os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from ringtree.integrations.ddp import register_comm_hook  # noqa: E402

rank = int(os.environ["RANK"])
dev = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
grads, hook = {}, None
for name in ("torch", "ringtree"):
    model = DDP(copy.deepcopy(net).to(dev), device_ids=[dev.index])
    if name == "ringtree":
        hook = register_comm_hook(model, "ring")
    g = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(64, 256, generator=g).to(dev), torch.randint(0, 10, (64,), generator=g)
    torch.nn.functional.cross_entropy(model(x), y.to(dev)).backward()
    grads[name] = [p.grad.detach().cpu().clone() for p in model.parameters()]
record = hook.records[0]
sys.stdout.write(json.dumps({
    "rank": rank,
    "equal": all(map(torch.equal, grads["torch"], grads["ringtree"])),
    "buckets": len(hook.records), "bytes": record.bytes, "bytes_sent": record.bytes_sent,
}) + "\n")
sys.stdout.flush()
dist.destroy_process_group()
