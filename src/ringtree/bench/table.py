"""The sweep as nccl-tests prints it: ``#`` comment lines, then one block per collective and
algorithm with fixed columns and units -- grep-friendly, and the same figures as ``--json``
(rendering the JSON read back gives the same text).

    #       size         count      type   redop    root     time    algbw    busbw  #wrong  iters
    #        (B)    (elements)                               (us)   (GB/s)   (GB/s)
           65536         16384   float32     sum      -1   1520.3    0.043    0.065       0    120
"""

from __future__ import annotations

from ringtree.bench.result import BenchResult, Row

HEADER = (
    f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>7} {'root':>7} {'time':>10} "
    f"{'algbw':>8} {'busbw':>8} {'#wrong':>7} {'iters':>6}"
)
UNITS_LINE = (
    f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>7} {'':>7} {'(us)':>10} {'(GB/s)':>8} "
    f"{'(GB/s)':>8}"
)


def row_line(r: Row) -> str:
    """One data line: nccl-tests' columns (root -1 and redop ``none`` where they do not
    apply), then the number of timed calls."""
    root = -1 if r.root is None else r.root
    return (
        f"{r.size_bytes:>12} {r.count:>13} {r.dtype:>9} {r.redop or 'none':>7} {root:>7} "
        f"{r.time_us:>10.1f} {r.algbw_GBps:>8.3f} {r.busbw_GBps:>8.3f} {r.wrong:>7} "
        f"{r.iters:>6}"
    )


def meta_lines(result: BenchResult) -> list[str]:
    """The ``#`` lines that say where and how the figures were measured."""
    m = result.meta
    versions = ", ".join(f"{k} {m[k]}" for k in ("ringtree", "torch", "mpi4py") if k in m)
    lines = [
        f"# ringtree bench: {m.get('n_ranks', '?')} {m.get('backend', '?')} processes on "
        f"127.0.0.1, {m.get('cores', '?')} cores ({m.get('host', '?')}), {m.get('date', '')}",
        f"# {versions}, python {m.get('python', '?')}",
        f"# {m.get('timing', '')}",
        f"# warm-up calls {m.get('warmup', '?')}; timed calls: {m.get('iters', '?')}",
    ]
    load = m.get("load") or {}
    if "other_cores" in load:
        lines.append(
            f"# load while timing: this sweep {load['sweep_cores']:.2f} cores, other "
            f"programs {load['other_cores']:.2f} cores"
        )
    return lines


def render_text(result: BenchResult) -> str:
    """The whole table: metadata, one block per (collective, algorithm), a summary."""
    lines = meta_lines(result)
    for col in result.collectives():
        for alg in result.algorithms(col):
            rows = [r for r in result.rows if r.collective == col and r.algorithm == alg]
            chunks = {r.n_chunks for r in rows if r.n_chunks is not None}
            label = (
                f"{alg} (pipeline chunks: {', '.join(map(str, sorted(chunks)))})" if chunks else alg
            )
            lines += ["#", f"# {col}  algorithm: {label}", HEADER, UNITS_LINE]
            lines += [row_line(r) for r in rows]
    wrong = sum(r.wrong for r in result.rows)
    lines += ["#", f"# wrong elements: {wrong} {'OK' if wrong == 0 else 'FAILED'}"]
    for col in result.collectives():
        for alg in result.algorithms(col):
            bus = [r.busbw_GBps for r in result.rows if r.collective == col and r.algorithm == alg]
            lines.append(f"# avg busbw {col} {alg}: {sum(bus) / len(bus):.3f} GB/s")
    return "\n".join(lines) + "\n"
