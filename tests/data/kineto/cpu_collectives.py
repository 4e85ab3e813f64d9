"""The torchrun script behind cpu-3ranks/: gloo collectives of several kinds and sizes in
two process groups (the world, and ranks 0 and 1) under torch.profiler, one trace per rank
into the folder argv[1]."""

import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
sub = dist.new_group([0, 1])
x = torch.ones(262144)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(3):
        dist.all_reduce(x)
    out = torch.empty(65536 * n)
    dist.all_gather_into_tensor(out, x[:65536])
    rs = torch.empty(16384)
    dist.reduce_scatter_tensor(rs, x[:16384 * n].clone())
    if r in (0, 1):
        for _ in range(2):
            dist.all_reduce(x[:1000], group=sub)
    dist.broadcast(x, 0)
    dist.barrier()
    outs = [torch.empty(100) for _ in range(n)]
    dist.all_gather(outs, x[:100])
    a2a = torch.empty(1200)
    dist.all_to_all_single(a2a, x[:1200].clone())
    if r == 0:
        dist.send(x[:500], 1)
    if r == 1:
        dist.recv(x[:500], 0)
    dist.reduce(x[:300], 0)
    work = dist.all_reduce(x[:2000], async_op=True)
    work.wait()
prof.export_chrome_trace(os.path.join(sys.argv[1], f"rank{r}.json"))
dist.destroy_process_group()
