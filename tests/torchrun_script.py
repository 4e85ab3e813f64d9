"""Run by tests/test_engine.py under ``torchrun``: ringtree on torch's default process group,
as in a user's training script. Prints one JSON line per rank."""

import json
import sys

import numpy as np
import torch
import torch.distributed as dist

import ringtree

dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
x = torch.full((1000,), float(rank + 1))
ringtree.all_reduce(x)
y = np.arange(6, dtype=np.int64) * (rank + 1)
work = ringtree.all_reduce(y, op="max", async_op=True)
work.wait()
# one write per line: the ranks share torchrun's stdout pipe, and a write this small is atomic
sys.stdout.write(json.dumps({"rank": rank, "sum": float(x[0]), "max": y.tolist()}) + "\n")
sys.stdout.flush()
dist.destroy_process_group()
