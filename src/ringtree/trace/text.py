"""Render a trace (from :func:`ringtree.trace.steps.trace_data`) as rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ringtree.units import format_bytes, format_time


def render_steps(
    console: Console, data: dict[str, Any], step_times: list[float] | None = None
) -> None:
    """One table: a row per step listing its transfers, then each rank's complete chunks.

    ``step_times`` (seconds), when given, adds a column with each step's modelled time.
    """
    title = (
        f"{data['algorithm']} {data['collective']} on {data['n_ranks']} ranks, "
        f"{format_bytes(data['size_bytes'])} in {data['n_chunks']} chunks"
        + (f", root {data['root']}" if data["root"] is not None else "")
    )
    table = Table(title=title, show_lines=True)
    table.add_column("step", justify="right")
    table.add_column("phase")
    table.add_column("transfers (src -> dst  chunk  action  bytes)")
    table.add_column("complete after the step (rank: chunks)")
    if step_times is not None:
        table.add_column("time", justify="right")
    for k, st in enumerate(data["steps"]):
        lines = "\n".join(
            f"{t['src']} -> {t['dst']}  chunk {t['chunk']}"
            + (f" ({t['block']})" if "block" in t else "")
            + f"  {t['action']:<6}  "
            f"{format_bytes(t['bytes'])}"
            for t in st["transfers"]
        )
        done = "\n".join(
            f"{r}: {', '.join(map(str, cs)) if cs else '-'}" for r, cs in enumerate(st["complete"])
        )
        row = [f"step {st['step']}", st["phase"], lines, done]
        if step_times is not None:
            row.append(format_time(step_times[k], exact=False))
        table.add_row(*row)
    console.print(table)
    sent = ", ".join(format_bytes(b) for b in data["bytes_sent"])
    console.print(f"{len(data['steps'])} steps; bytes sent per rank: {sent}")
    if step_times is not None:
        console.print(
            f"modelled time on {data.get('link', 'the link')}: {format_time(sum(step_times))}"
        )
