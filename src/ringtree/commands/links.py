"""``ringtree links``: the link presets, their figures and where each figure comes from."""

from __future__ import annotations

import argparse

from rich.table import Table
from rich.text import Text

from ringtree.cost.links import PRESETS, link_record
from ringtree.output import print_json, stdout_console
from ringtree.units import format_bandwidth, format_time


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``links`` command."""
    p = sub.add_parser(
        "links",
        help="list the link presets with their bandwidths, latency and sources",
        description="List the link presets: the nominal bandwidth vendors (and the seed) "
        "quote, the per-direction bandwidth collectives reach, the per-step latency alpha, "
        "and the source of each figure. Use a preset with --link NAME, or a custom link with "
        "--link custom:bw=450GB/s,lat=3us.",
    )
    p.add_argument("--json", action="store_true", help="print the presets as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print every preset."""
    if args.json:
        print_json({"links": [link_record(link) for link in PRESETS.values()]})
        return 0
    table = Table(title="link presets (bandwidths per direction unless marked)", show_lines=True)
    table.add_column("link")
    table.add_column("nominal", justify="right")
    table.add_column("effective", justify="right")
    table.add_column("alpha", justify="right")
    table.add_column("note / source")
    for link in PRESETS.values():
        nominal = format_bandwidth(link.nominal)
        if link.nominal_both_directions:
            nominal += "\n(both ways)"
        table.add_row(
            link.name,
            nominal,
            format_bandwidth(link.bandwidth_Bps),
            format_time(link.alpha_s, exact=False),
            Text(f"{link.note}\n") + Text(link.source, style="dim"),
        )
    stdout_console().print(table)
    return 0
