"""``ringtree clusters``: the cluster presets, their parts, and where each fact comes from."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from ringtree.cost.clusters import ALIASES, gpus, presets
from ringtree.output import print_json, stdout_console


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``clusters`` command."""
    p = sub.add_parser(
        "clusters",
        help="list the cluster presets: GPUs, fabric, NICs, network, sources",
        description="List the cluster presets (systems people rent and buy): the GPU, GPUs per "
        "node, the fabric inside a node (NVSwitch with or without NVLS, NVLink, PCIe), the "
        "compute NICs per node and their speed, the network, and the sources of each fact "
        "(facts no source states are listed as assumed). Use one with 'ringtree cost "
        "COLLECTIVE --cluster NAME --nodes K', or describe your own in a TOML file "
        "([cluster] with the same keys, or preset = NAME and the keys that differ).",
    )
    p.add_argument("--json", action="store_true", help="print the presets and GPUs as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print every preset."""
    every = presets()
    if args.json:
        print_json({
            "clusters": [c.record() for c in every.values()],
            "aliases": ALIASES,
            "gpus": [{"name": g.key, "title": g.name, "arch": g.arch, "sm": g.sm,
                      "memory_bytes": g.memory_bytes, "bf16_tflops": g.bf16_tflops,
                      "nvlink_links": g.nvlink_links, "nccl_nvlink_bw_per_link": g.nccl_nvlink_bw,
                      "pcie_gen": g.pcie_gen, "source": g.source, "assumed": list(g.assumed)}
                     for g in gpus().values()],
        })
        return 0
    table = Table(title="cluster presets (NIC rates in Gb/s per direction)", show_lines=True)
    for name in ("cluster", "GPUs per node", "inside a node", "network", "source"):
        table.add_column(name)
    for c in every.values():
        if c.key in ALIASES:
            continue
        inside = c.fabric + (" + NVLS" if c.nvls else "")
        if c.gpu.nvlink_links:
            inside += f"\nNVLink {c.gpu.nvlink_GBps:.0f} GB/s per GPU (NCCL's figure)"
        net = (f"{c.nics_per_node} x {c.nic_gbps:g} Gb/s {c.network}" if c.nics_per_node
               else "none")
        if c.network_name:
            net += f"\n{c.network_name}"
        src = Text(c.source[:300], style="dim")
        if c.assumed:
            src = Text(f"assumed: {', '.join(c.assumed)}\n") + src
        table.add_row(f"{c.key}\n{c.name}", f"{c.gpus_per_node} x {c.gpu.key}", inside, net, src)
    console = stdout_console()
    console.print(table)
    console.print(f"aliases: {', '.join(f'{a} = {t}' for a, t in ALIASES.items())}")
    return 0
