"""Pictures of a sweep (matplotlib, Agg: PNG or SVG by the file's suffix).

Left: time against size, log-log, one colour per algorithm -- measured medians as points
(with a bar from the 10th to the 90th percentile of the calls) and, given a link, the
model's prediction as a line, and the sizes where the automatic choice changes marked.
Right: bus bandwidth against size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ringtree.bench.result import BenchResult
from ringtree.bench.worker import NATIVE
from ringtree.collectives import Collective
from ringtree.cost.model import Link
from ringtree.errors import RingtreeError
from ringtree.units import format_bytes

SUFFIXES = (".png", ".svg")


def check_plot_path(path: str) -> Path:
    """``path`` as a Path if it ends in .png or .svg, else RingtreeError."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise RingtreeError(f"plot file {path!r} must end in .png or .svg")
    return p


def plot_sweep(
    result: BenchResult, path: str | Path, link: Link | None = None, title: str | None = None
) -> None:
    """Draw ``result`` (its first collective; the others are left out) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = result.collectives()[0]
    rows = [r for r in result.rows if r.collective == col and r.time_us > 0]
    n = int(result.meta.get("n_ranks", 0))
    algs = result.algorithms(col)
    colours = {a: f"C{i}" for i, a in enumerate(algs)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    for a in algs:
        mine = sorted((r for r in rows if r.algorithm == a), key=lambda r: r.size_bytes)
        if not mine:
            continue
        x = np.array([r.size_bytes for r in mine], dtype=float)
        t = np.array([r.time_us for r in mine]) * 1e-6
        lo = (
            np.array([np.percentile(r.times_us, 10) if r.times_us else r.time_us for r in mine])
            * 1e-6
        )
        hi = (
            np.array([np.percentile(r.times_us, 90) if r.times_us else r.time_us for r in mine])
            * 1e-6
        )
        style = "s" if a == NATIVE else "o"
        label = f"{a} (engine's own)" if a == NATIVE else a
        ax.errorbar(
            x,
            t,
            yerr=[t - lo, hi - t],
            fmt=style,
            color=colours[a],
            markersize=5,
            capsize=2,
            elinewidth=0.8,
            label=f"{label} measured",
        )
        bx.plot(
            x,
            [r.busbw_GBps for r in mine],
            style + "-",
            color=colours[a],
            label=label,
            markersize=4,
            linewidth=1,
        )
    sizes = sorted({r.size_bytes for r in rows})
    if link is not None and sizes:
        _model_lines(ax, col, n, link, rows, sizes, colours)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("buffer size (bytes)")
    ax.set_ylabel("time per call (s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    bx.set_xscale("log")
    bx.set_xlabel("buffer size (bytes)")
    bx.set_ylabel("bus bandwidth (GB/s)")
    bx.grid(True, which="major", alpha=0.3)
    bx.legend(fontsize=7)
    backend = result.meta.get("backend", "?")
    fig.suptitle(
        title
        or f"{col} on {n} {backend} processes, {result.meta.get('cores', '?')} "
        "cores: medians, bars 10th-90th percentile"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _model_lines(ax, col: str, n: int, link: Link, rows, sizes, colours) -> None:  # noqa: ANN001
    """The model's predicted time per algorithm over the measured range, and auto's switches."""
    from ringtree.cost.crossover import crossover_map

    c = Collective.parse(col)
    itemsize = rows[0].size_bytes // max(1, rows[0].count)
    m = crossover_map(c, n, link, itemsize=itemsize, min_bytes=sizes[0], max_bytes=sizes[-1])
    measured = {r.algorithm for r in rows}
    for a, times in m.times_s.items():
        if a in measured:
            ax.plot(
                m.sizes_bytes,
                times,
                "-",
                color=colours.get(a, "grey"),
                linewidth=1.2,
                alpha=0.8,
                label=f"{a} model",
            )
    for nxt, start, _ in m.winners[1:]:
        ax.axvline(start, color="grey", linestyle=":", linewidth=1)
        ax.annotate(
            f"auto: {nxt} from {format_bytes(start)}",
            (start, 0.02),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            xytext=(3, 0),
            textcoords="offset points",
            va="bottom",
        )
