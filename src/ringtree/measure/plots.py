"""Pictures of a sweep (matplotlib, Agg: PNG or SVG by the file's suffix).

Left: time against size, log-log, one colour per algorithm -- measured medians as points
(with a bar from the 10th to the 90th percentile of the calls; the algorithms of one size
are drawn side by side) and, given a link, the model's prediction as a line of the same
colour, with the sizes where the automatic choice changes marked. Right: bus bandwidth
against size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ringtree.collectives import Collective
from ringtree.cost.select import short_time
from ringtree.cost.terms import Link
from ringtree.measure.result import BenchResult, Row
from ringtree.measure.worker import NATIVE

SUFFIXES = (".png", ".svg")


def size_label(n: float) -> str:
    """Tick labels: binary units for powers of two (``64 KiB``), decimal otherwise."""
    n = int(round(n))
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def plot_sweep(
    result: BenchResult, path: str | Path, link: Link | None = None, title: str | None = None
) -> None:
    """Draw ``result`` (its first collective; the others are left out) to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    col = result.collectives()[0]
    rows = [r for r in result.rows if r.collective == col and r.time_us > 0]
    if any(r.in_place for r in rows):  # measured both ways: the in-place form, torch's
        rows = [r for r in rows if r.in_place]
    n = int(result.meta.get("n_ranks", 0))
    algs = result.algorithms(col)
    colours = {a: f"C{i}" for i, a in enumerate(algs)}
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    for i, a in enumerate(algs):
        mine = sorted((r for r in rows if r.algorithm == a), key=lambda r: r.size_bytes)
        if not mine:
            continue
        x = np.array([r.size_bytes for r in mine], dtype=float)
        shift = 1.06 ** (i - (len(algs) - 1) / 2)  # side by side within a size
        t, lo, hi = _spread(mine)
        marker = "s" if a == NATIVE else "o"
        name = f"{a} (engine's own)" if a == NATIVE else a
        ax.errorbar(
            x * shift,
            t,
            yerr=[t - lo, hi - t],
            fmt=marker,
            color=colours[a],
            markersize=4.5,
            capsize=2,
            elinewidth=0.8,
            label=name,
        )
        if link is None:
            ax.plot(x * shift, t, "-", color=colours[a], linewidth=0.6, alpha=0.5)
        bx.plot(
            x,
            [r.busbw_GBps for r in mine],
            marker + "-",
            color=colours[a],
            label=name,
            markersize=4,
            linewidth=1,
        )
    sizes = sorted({r.size_bytes for r in rows})
    if link is not None and sizes:
        _model_lines(ax, col, n, link, rows, sizes, colours)
    for axis in (ax, bx):
        axis.set_xscale("log")
        axis.xaxis.set_major_locator(FixedLocator(sizes))
        axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.tick_params(axis="x", labelsize=7, rotation=30)
        axis.set_xlabel("buffer size")
        axis.grid(True, which="major", alpha=0.3)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short_time(v)))
    ax.set_ylabel("time per call")
    what = "points: median of the calls (bars: 10th-90th percentile)"
    ax.set_title(what + ("; lines: the model" if link is not None else ""), fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    bx.set_ylabel("bus bandwidth (GB/s)")
    bx.set_title("busbw = size / time x nccl-tests' factor", fontsize=8)
    bx.legend(fontsize=7)
    backend = result.meta.get("backend", "?")
    fig.suptitle(
        title or f"{col} on {n} {backend} processes, {result.meta.get('cores', '?')} cores"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _spread(rows: list[Row]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, 10th and 90th percentile of each row's calls, in seconds."""
    t = np.array([r.time_us for r in rows]) * 1e-6
    lo = np.array([np.percentile(r.times_us, 10) if r.times_us else r.time_us for r in rows])
    hi = np.array([np.percentile(r.times_us, 90) if r.times_us else r.time_us for r in rows])
    return t, np.minimum(lo * 1e-6, t), np.maximum(hi * 1e-6, t)


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
                m.sizes_bytes, times, "-", color=colours.get(a, "grey"), linewidth=1.2, alpha=0.8
            )
    for nxt, start, _ in m.winners[1:]:
        ax.axvline(start, color="grey", linestyle=":", linewidth=1)
        ax.annotate(
            f"auto: {nxt} from {size_label(start)}",
            (start, 0.98),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            xytext=(3, 0),
            textcoords="offset points",
            va="top",
        )
