"""The sweep as nccl-tests prints it, line by line: its header lines (``# nThread ...``,
``# Using devices``), then per collective and algorithm a table of fixed columns and units
-- the out-of-place and the in-place group where the collective has both -- closed by
nccl-tests' ``# Out of bounds values`` and ``# Avg bus bandwidth`` lines. Grep-friendly, read
by :mod:`ringtree.measure.nccl_tests`' parser like nccl-tests' own logs, and the same figures
as ``--json``: :class:`TableWriter` writes a line as soon as it is measured, and
:func:`render_text` of the JSON read back gives the same text. A line (all-reduce, 3 ranks)::

       65536     16384     float     sum      -1  | out-of-place:   1520.3    0.043    0.065
       0 | in-place:   1498.7    0.044    0.066       0 | iters: 120

(one line in the table, under the headers ``size count type redop root``, then ``time algbw
busbw #wrong`` per group, then ``iters``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ringtree.collectives import Collective
from ringtree.measure.result import BenchResult, Row

#: nccl-tests' type names where they differ from ringtree's (src/common.cu, test_typenames).
NCCL_TESTS_TYPES = {"float32": "float", "float16": "half", "float64": "double"}
_LEAD = f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>7} {'root':>7}"
_LEAD_UNITS = f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>7} {'':>7}"
_GROUP = f" {'time':>9} {'algbw':>8} {'busbw':>8} {'#wrong':>7}"
_GROUP_UNITS = f" {'(us)':>9} {'(GB/s)':>8} {'(GB/s)':>8} {'':>7}"
_GROUP_WIDTH = len(_GROUP)


def group_labels(placements: list[bool]) -> str:
    """The line over the column groups: ``out-of-place``, ``in-place`` centred on each."""
    words = ("in-place" if p else "out-of-place" for p in placements)
    return "#" + " " * (len(_LEAD) - 1) + "".join(f"{w:^{_GROUP_WIDTH}}" for w in words)


def header_lines(placements: list[bool]) -> list[str]:
    """A table's three header lines for its column groups (then ringtree's ``iters``)."""
    n = len(placements)
    return [group_labels(placements).rstrip(), f"{_LEAD}{_GROUP * n} {'iters':>6}",
            f"{_LEAD_UNITS}{_GROUP_UNITS * n}".rstrip()]


def row_line(rows: list[Row], checked: bool = True) -> str:
    """One data line: nccl-tests' leading columns (root -1 and redop ``none`` where they do
    not apply), a group per placement (#wrong ``N/A`` when not checked, nccl-tests' -c 0),
    then the timed calls of each placement (``40/42`` when they differ)."""
    r = rows[0]
    root = -1 if r.root is None else r.root
    dtype = NCCL_TESTS_TYPES.get(r.dtype, r.dtype)
    text = f"{r.size_bytes:>12} {r.count:>13} {dtype:>9} {r.redop or 'none':>7} {root:>7}"
    for x in rows:
        wrong = str(x.wrong) if checked else "N/A"
        text += f" {x.time_us:>9.1f} {x.algbw_GBps:>8.3f} {x.busbw_GBps:>8.3f} {wrong:>7}"
    iters = "/".join(dict.fromkeys(str(x.iters) for x in rows))
    return f"{text} {iters:>6}"


def meta_lines(meta: dict) -> list[str]:
    """The ``#`` lines that say where and how the figures were measured, then nccl-tests'
    ``# nThread`` line (every rank a process of one thread and one device)."""
    m = meta
    versions = ", ".join(f"{k} {m[k]}" for k in ("ringtree", "torch", "mpi4py") if k in m)
    iters = m.get("iters", "?")
    lines = [
        f"# ringtree bench: {m.get('n_ranks', '?')} {m.get('backend', '?')} processes on "
        f"127.0.0.1, {m.get('cores', '?')} cores ({m.get('host', '?')}), {m.get('date', '')}",
        f"# {versions}, python {m.get('python', '?')}",
        f"# {m.get('timing', '')}",
        f"# warm-up calls {m.get('warmup', '?')}; timed calls: {iters}",
    ]
    if "min_bytes" in m:
        fixed = iters if isinstance(iters, int) else 0  # 0: time-budgeted, see above
        lines.append(
            f"# nThread 1 nGpus 1 minBytes {m['min_bytes']} maxBytes {m['max_bytes']} step: "
            f"{m.get('step') or '?'} warmup iters: {m.get('warmup', 0)} iters: {fixed} agg "
            f"iters: 1 validation: {int(m.get('check', True))} graph: 0")
    return lines


def device_lines(meta: dict, pids: list[int]) -> list[str]:
    """nccl-tests' ``# Using devices`` list: one process per rank, on this host's CPU."""
    host, backend = str(meta.get("host", "?"))[:10], meta.get("backend", "?")
    return ["#", "# Using devices"] + [
        f"#  Rank {r:>2} Group  0 Pid {pid:>6} on {host:>10} device {r:>2} [cpu] CPU process "
        f"({backend})" for r, pid in enumerate(pids)
    ]


def block_title(rows: list[Row]) -> str:
    """``# all-reduce  algorithm: tree (pipeline chunks: 1, 4)``."""
    chunks = sorted({r.n_chunks for r in rows if r.n_chunks is not None})
    alg = rows[0].algorithm
    label = f"{alg} (pipeline chunks: {', '.join(map(str, chunks))})" if chunks else alg
    return f"# {rows[0].collective}  algorithm: {label}"


def footer_lines(rows: list[Row]) -> list[str]:
    """nccl-tests' footer of a table: wrong elements, and busbw averaged over its lines and
    placements (``%g``, as nccl-tests prints it)."""
    wrong = sum(r.wrong for r in rows)
    avg = sum(r.busbw_GBps for r in rows) / len(rows)
    return [f"# {'Out of bounds values':<20} : {wrong} {'FAILED' if wrong else 'OK'}",
            f"# {'Avg bus bandwidth':<20} : {avg:g} "]


class TableWriter:
    """Writes the table through ``write`` as rows come (:meth:`add`: one or more whole lines,
    their placements together), block after block, and its summary on :meth:`close`."""

    def __init__(self, meta: dict, write: Callable[[str], None]) -> None:
        self.meta, self.write = meta, write
        self.checked = bool(meta.get("check", True))
        self.block: list[Row] = []
        self.every: list[Row] = []
        self.started = False

    def add(self, rows: Iterable[Row], pids: list[int] | None = None) -> None:
        """Write the lines of ``rows`` (grouped by block, as first seen, and size)."""
        out: list[str] = []
        if not self.started:
            self.started = True
            out += meta_lines(self.meta)
            if pids or self.meta.get("pids"):
                out += device_lines(self.meta, pids or self.meta["pids"])
        for line in _lines(_in_blocks(list(rows))):
            if self.block and _key(self.block[0]) != _key(line[0]):
                out += footer_lines(self.block)
                self.block = []
            if not self.block:
                out += ["#", block_title(line), *header_lines(_placements(line, self.meta))]
            self.block += line
            self.every += line
            out.append(row_line(line, self.checked))
        if out:
            self.write("\n".join(out) + "\n")

    def close(self) -> None:
        """The last table's footer and the sweep's summary (the load while timing)."""
        out = footer_lines(self.block) if self.block else []
        load = self.meta.get("load") or {}
        out.append("#")
        if "other_cores" in load:
            out.append(f"# load while timing: this sweep {load['sweep_cores']:.2f} cores, "
                       f"other programs {load['other_cores']:.2f} cores")
        wrong = sum(r.wrong for r in self.every)
        out.append(f"# wrong elements: {wrong} {'OK' if wrong == 0 else 'FAILED'}"
                   if self.checked else "# wrong elements: not checked (-c 0)")
        self.write("\n".join(out) + "\n")


def _key(r: Row) -> tuple[str, str]:
    return r.collective, r.algorithm


def _lines(rows: list[Row]) -> list[list[Row]]:
    """Rows grouped into lines: a block's rows of one size, out of place first."""
    lines: dict[tuple, list[Row]] = {}
    for r in rows:
        lines.setdefault((*_key(r), r.size_bytes), []).append(r)
    return [sorted(v, key=lambda r: bool(r.in_place)) for v in lines.values()]


def _placements(line: list[Row], meta: dict) -> list[bool]:
    """The column groups of a block from one of its lines (results saved before placements
    were recorded: the collective's one form)."""
    if line[0].in_place is not None:
        return [bool(r.in_place) for r in line]
    col = Collective.parse(line[0].collective)
    always = col in (Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE)
    return [always or (col is Collective.ALL_GATHER and bool(meta.get("in_place")))]


def render_text(result: BenchResult) -> str:
    """The whole table at once (what the lines written as they came add up to)."""
    parts: list[str] = []
    writer = TableWriter(result.meta, parts.append)
    writer.add(result.rows)
    writer.close()
    return "".join(parts)


def _in_blocks(rows: list[Row]) -> list[Row]:
    """Rows in block order (collective, then algorithm, as first seen): an interleaved
    sweep's rows come size by size."""
    order = list(dict.fromkeys(_key(r) for r in rows))
    return sorted(rows, key=lambda r: order.index(_key(r)))
