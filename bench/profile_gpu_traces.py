"""Benchmark: public GPU training traces read by ``ringtree profile``, every collective against
the NCCL model (docs/profile.md, "A GPU trace, checked without a GPU").

1. DeepSeek's published training profile (github.com/deepseek-ai/profile-data ``train.json``, rank
   0 of EP64 on H800s, at commit 4496024; pass its path with ``--deepseek``: the repository states
   no licence, so no copy of it is kept here). Its communication is DeepEP's dispatch and combine
   kernels, which record no sizes: their bytes follow from the publisher's words (constants below,
   each cited), and each is priced as the NCCL all-to-all that moves the same bytes between nodes,
   on dgx-h100 x 8 nodes (an H800 node is an H100 node with NVLink cut down; DeepSeek's nodes have
   one 400 Gb/s ConnectX-7 per GPU, as dgx-h100 does, and an EP64 all-to-all over 8 nodes is bound
   by that network). DeepEP's own benchmark of the same setting is printed beside it.
2. HTA's NCCL samples (github.com/facebookresearch/HolisticTraceAnalysis tests/data, MIT):
   ``nccl_parser_config`` (2 x A100, one DDP step, torch with record_param_comms' sizes) on
   dgx-a100 with 2 GPUs of a node; ``trace_diff/control`` (rank 3 of 8 x A100, torch 1.13 era,
   sizes from record_shapes) on one dgx-a100 node.

Prints, per trace and collective row, measured median, predicted, measured/predicted, and the
median ratio; and the step split. Each trace holds one rank: a kernel's span includes the time
it waited for its peers, which only every rank's trace could remove (docs/profile.md).

    .venv/bin/python bench/profile_gpu_traces.py [--deepseek train.json] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from ringtree.cost import nccl
from ringtree.cost.clusters import get_cluster
from ringtree.kineto.load import load_run
from ringtree.kineto.pricing import Target
from ringtree.kineto.report import analyse

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "kineto"

# DeepSeek-V3's training setting as its publishers describe it
#: tokens per chunk: "4K sequence length" (profile-data README); DeepEP's benchmark of the same
#: setting: "4096 tokens per batch" (github.com/deepseek-ai/DeepEP README, "Normal kernels")
TOKENS = 4096
#: hidden size: 7168 (DeepSeek-V3 technical report, arXiv:2412.19437, section 4.2; the trace's
#: traceName: prof_ep64_tp1_varsm_hidden7168_seqlen4096)
HIDDEN = 7168
#: dispatch in FP8 with one fp32 scale per 128 channels, combine in BF16 (DeepEP README: "FP8
#: dispatching and BF16 combining"; the report's 1x128 tile-wise scaling, section 3.3.2)
DISPATCH_BYTES = HIDDEN + HIDDEN // 128 * 4
COMBINE_BYTES = HIDDEN * 2
#: EP64 over 8 nodes of 8 GPUs; each token goes to 4 nodes ("top-4 groups", DeepEP README;
#: node-limited routing M = 4, report section 2.1.2), with "an absolutely balanced MoE
#: routing" (profile-data README): of the 4, 4 x 7/8 = 3.5 are other nodes on average
RANKS, GPUS_PER_NODE, NODES_PER_TOKEN = 64, 8, 4
REMOTE_NODES = NODES_PER_TOKEN * (1 - GPUS_PER_NODE / RANKS)
#: DeepEP's published internode bandwidth at EP64 on H800 with CX7 400 Gb/s: dispatch 51 GB/s,
#: combine 50 GB/s ("RDMA bottleneck bandwidth", DeepEP README)
DEEPEP_GBPS = {"dispatch": 51.0, "combine": 50.0}


def deepep(path: Path) -> dict[str, Any]:
    """The DeepSeek trace's dispatch/combine against the NCCL model (module doc)."""
    rep = analyse(load_run([str(path)]), None)
    h100 = get_cluster("dgx-h100")
    rows = []
    for kind, per_token in (("dispatch", DISPATCH_BYTES), ("combine", COMBINE_BYTES)):
        row = next(r for r in rep["collectives"] if r["label"] == f"DeepEP {kind}")
        rdma = TOKENS * REMOTE_NODES * per_token  # bytes each rank sends to other nodes
        size = int(rdma / (1 - GPUS_PER_NODE / RANKS))  # the all-to-all moving as much off-node
        p = nccl.predict("all-to-all", size, h100, RANKS // GPUS_PER_NODE)
        rows.append({"collective": f"DeepEP {kind}", "calls": row["count"],
                     "network_bytes": rdma, "all_to_all_bytes": size,
                     "measured_s": row["measured_s"], "predicted_s": p.time_s,
                     "ratio": row["measured_s"] / p.time_s,
                     "deepep_benchmark_s": rdma / (DEEPEP_GBPS[kind] * 1e9)})
    return {"trace": str(path), "cluster": "dgx-h100 x 8 nodes", "rows": rows,
            "steps": rep["steps"], "other_rows": [r for r in rep["collectives"]
                                                  if r["label"] and "notify" in r["label"]]}


def hta(name: str, cluster: str, nodes: int | None) -> dict[str, Any]:
    """One of HTA's NCCL samples priced on ``cluster`` (module doc)."""
    c = get_cluster(cluster)
    rep = analyse(load_run([str(DATA / name)]), Target(cluster, cluster=c, nodes=nodes))
    rows = [r for r in rep["collectives"] if r["ratio"] is not None]
    return {"trace": name, "cluster": cluster, "rows": rows, "steps": rep["steps"],
            "median_ratio": statistics.median(r["ratio"] for r in rows)}


def _ms(x: float) -> str:
    return f"{x * 1e3:.3g} ms"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deepseek", type=Path, help="DeepSeek's train.json, from "
                    "github.com/deepseek-ai/profile-data (without it, only HTA's traces)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    out = {"deepseek": deepep(args.deepseek) if args.deepseek else None,
           "hta_2gpu": hta("hta-nccl-a100-2gpu.json.gz", "dgx-a100", None),
           "hta_8gpu": hta("hta-trace-diff-a100-rank3.json.gz", "dgx-a100", None)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    d = out["deepseek"] or {"trace": "DeepSeek's train.json not given (--deepseek PATH)",
                            "cluster": "-", "rows": [], "steps": []}
    print(f"# {d['trace']}: DeepEP kernels as NCCL all-to-alls on {d['cluster']}")
    for r in d["rows"]:
        print(f"{r['collective']:16} {r['calls']:2} calls  {r['network_bytes'] / 1e6:6.1f} MB "
              f"to other nodes  measured {_ms(r['measured_s']):>9}  NCCL model "
              f"{_ms(r['predicted_s']):>9}  x{r['ratio']:.2f}  (DeepEP's own benchmark: "
              f"{_ms(r['deepep_benchmark_s'])})")
    for s in d["steps"]:
        print(f"step {s['step']}: {_ms(s['time_s'])}: compute {s['compute_s'] / s['time_s']:.1%}"
              f", exposed communication {s['exposed_comm_s'] / s['time_s']:.1%}, idle "
              f"{s['idle_s'] / s['time_s']:.1%}; overlap {s['overlap']:.1%}")
    for key in ("hta_2gpu", "hta_8gpu"):
        h = out[key]
        print(f"# {h['trace']} on {h['cluster']}: median measured/predicted "
              f"{h['median_ratio']:.2f}")
        for r in h["rows"]:
            print(f"{r['collective']:12} {r['size_bytes'] / 1e6:8.3f} MB x{r['count']:<2} "
                  f"measured {_ms(r['measured_s']):>9}  predicted {_ms(r['predicted_s']):>9}"
                  f"  x{r['ratio']:.2f}  ({r['predicted_algorithm']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
