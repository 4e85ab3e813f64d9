"""The line grammar of nccl-tests' logs: the launchers' tags, the kinds of line, a result row.

Lines may be tagged by the launcher: Open MPI's ``--tag-output`` (``[1,0]<stdout>:``, also in
the middle of a line: nccl-tests prints a row in several writes, and mpirun tags each), Slurm's
``srun -l`` and PALS/mpiexec ``--label`` (``0: ``), MPICH's ``-prepend-rank`` (``[0] ``), a
``[host:pid]`` prefix and SkyPilot's ``(head, rank=0, pid=3808)``. :func:`demultiplex` puts each
tagged stream's pieces back together before the lines are read. The patterns below tell a
line's kind (an NCCL_DEBUG line, a header, a device, a ``ringtree bench`` block, a row);
:func:`read_row` reads a row by its table's columns (:class:`Row`, one :class:`Timing` per
placement). :mod:`ringtree.measure.nccl_tests` assembles the tests from these lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError

#: nccl-tests' test names and the collective each measures (None: not a ringtree collective).
TESTS: dict[str, Collective | None] = {
    "all_reduce": Collective.ALL_REDUCE, "all_gather": Collective.ALL_GATHER,
    "reduce_scatter": Collective.REDUCE_SCATTER, "alltoall": Collective.ALL_TO_ALL,
    "broadcast": Collective.BROADCAST, "reduce": Collective.REDUCE,
    "gather": Collective.GATHER, "scatter": Collective.SCATTER,
    "sendrecv": None, "hypercube": None,
}
#: nccl-tests' type names and their bytes (src/common.cu, test_typenames).
TYPE_BYTES = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2,
    "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1,
}

_NAME = "|".join(sorted(TESTS, key=len, reverse=True))
#: An ``X_perf`` command (or ``X_perf_mpi``): group 1 is the test.
PERF = re.compile(rf"\b({_NAME})_perf(?:_mpi)?\b")
_OMPI = re.compile(r"\[\d+,\d+\](?:\[[^\]\s]*\])?<std(?:out|err)>:")
_PREFIXES = (
    re.compile(r"\((?:head|worker\d*), rank=(\d+), pid=\d+(?:, ip=[\d.]+)?\) "),  # SkyPilot
    re.compile(r"\s*(\d+): "),  # srun -l, PALS / mpiexec --label
    re.compile(r"\[(\d+)\] "),  # MPICH -prepend-rank
    re.compile(r"\[([\w.-]+:\d+)\] "),  # [host:pid]
)
#: The kinds of line: an NCCL_DEBUG line, an NCCL_* setting NCCL reported, NCCL's version,
#: one of "Using devices", the header (``nThread 1 nGpus 8 minBytes ...``).
DEBUG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ABORT|ERROR)\b")
ENV = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+)")
NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
DEVICE = re.compile(
    r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[[^\]]*\]\s+(.*?)\s*$"
)
HEADER = re.compile(r"^#?\s*nThread\s+\d+")
#: ringtree bench's lines: ``# ringtree bench: 4 gloo processes ...``, ``# all-reduce  algorithm:
#: ring (pipeline chunks: 8)``
RINGTREE = re.compile(r"ringtree bench: (\d+) \S+ processes")
BLOCK = re.compile(r"^([a-z-]+)\s+algorithm:\s+(\S+)")
#: The header's fields and their patterns.
HEADER_FIELDS = {
    "nthread": r"nThread\s+(\d+)", "ngpus": r"nGpus\s+(\d+)", "min_bytes": r"minBytes\s+(\d+)",
    "max_bytes": r"maxBytes\s+(\d+)", "step": r"step:\s+(\S+)",
    "warmup_iters": r"warmup iters:\s+(\d+)", "iters": r"(?<!warmup )(?<!agg )iters:\s+(\d+)",
    "agg_iters": r"agg iters:\s+(\d+)", "validation": r"validation:\s+(\d+)",
    "graph": r"graph:\s+(\d+)",
}


@dataclass(frozen=True)
class Line:
    """One logical line: the text a stream printed (tags removed), where it began."""

    number: int
    text: str


def _strip_prefixes(text: str) -> str:
    """``text`` without the line-start tags of :data:`_PREFIXES` (several may stack)."""
    again = True
    while again:
        again = False
        for p in _PREFIXES:
            m = p.match(text)
            if m:
                text, again = text[m.end():], True
    return text


def demultiplex(text: str) -> Iterator[Line]:
    """The logical lines of ``text``: line-start tags removed, and Open MPI's tagged pieces
    joined per stream. In a physical line with several ``[j,r]<stdout>:`` pieces only the last
    is ended by the line's newline; the others continue on a later line of the same stream."""
    pending: dict[str, tuple[int, str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_prefixes(raw)
        tags = list(_OMPI.finditer(line))
        if not tags:
            yield Line(number, line)
            continue
        if tags[0].start() > 0:  # text before the first tag: a line of its own
            yield Line(number, line[: tags[0].start()])
        for i, tag in enumerate(tags):
            end = tags[i + 1].start() if i + 1 < len(tags) else len(line)
            key = tag.group(0).split("<")[0]
            start, before = pending.pop(key, (number, ""))
            piece = before + line[tag.end(): end]
            if i + 1 < len(tags):
                pending[key] = (start, piece)
            else:
                yield Line(start, _strip_prefixes(piece))
    for start, piece in sorted(pending.values()):
        yield Line(start, piece)


@dataclass(frozen=True)
class Device:
    """One line of "Using devices": a rank, its process, host, CUDA device and GPU model."""

    rank: int
    pid: int
    host: str
    device: int
    gpu: str


@dataclass(frozen=True)
class Timing:
    """One placement's figures: time (us), algbw and busbw (GB/s), #wrong (None: ``N/A``);
    nccl-tests before 2.11 printed the largest error instead (``max_error``)."""

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None
    max_error: float | None = None


@dataclass(frozen=True)
class Row:
    """One size (and type, op, root) of a test: out-of-place and, when printed, in-place."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Timing
    in_place: Timing | None


def looks_like_row(s: str, in_table: bool) -> bool:
    """Whether ``s`` is a result row: starts with a whole number; outside a table also a
    count and a known type after it (so that prose with a number is not read as one)."""
    f = s.split()
    if not f or not f[0].isdigit():
        return False
    return in_table or (len(f) >= 7 and f[1].isdigit() and f[2] in TYPE_BYTES)


def guess_layout(f: list[str]) -> list[str] | None:
    """The columns of a row printed without its header: size count type [redop] [root] and
    one or two groups of time algbw busbw #wrong."""
    if len(f) < 7 or not f[1].isdigit() or f[2] not in TYPE_BYTES:
        return None
    head = ["size", "count", "type"]
    rest = f[3:]
    if rest and not _number(rest[0]) and rest[0] != "N/A":
        head.append("redop")
        rest = rest[1:]
    if len(rest) in (5, 9):
        head.append("root")
    elif len(rest) not in (4, 8):
        return None
    return head + ["time", "algbw", "busbw", "#wrong"] * (2 if len(rest) >= 8 else 1)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_row(n: int, f: list[str], layout: list[str], source: str) -> Row:
    """Line ``n`` of ``source``, split into ``f``, by its table's columns (RingtreeError
    naming the file, the line and the bad value)."""
    if len(f) != len(layout):
        raise line_error(source, n, f"a result row has {len(f)} fields where the table has "
                                    f"{len(layout)} ({' '.join(layout)}): truncated or garbled")
    first = layout.index("time")
    lead = dict(zip(layout[:first], f[:first], strict=True))
    starts = [i for i in range(first, len(f) - 3, 4) if layout[i] == "time"]
    groups = [_timing(n, f[i: i + 4], source) for i in starts]  # later columns (iters) left out
    size = _whole(n, lead.get("size", ""), "size", source)
    count = _whole(n, lead.get("count", ""), "count", source)
    root = lead.get("root")
    return Row(n, size, count, lead.get("type", ""), lead.get("redop"),
               int(root) if root is not None and re.fullmatch(r"-?\d+", root) else None,
               groups[0], groups[1] if len(groups) > 1 else None)


def _whole(n: int, text: str, what: str, source: str) -> int:
    if not text.isdigit():
        raise line_error(source, n, f"{what} {text!r} is not a whole number")
    return int(text)


def _timing(n: int, f: list[str], source: str) -> Timing:
    if len(f) != 4:
        raise line_error(source, n, f"a time/algbw/busbw/#wrong group has {len(f)} fields")
    vals = []
    for what, text in zip(("time", "algbw", "busbw"), f[:3], strict=True):
        if not _number(text) or not math.isfinite(float(text)) or float(text) < 0:
            raise line_error(source, n, f"{what} {text!r} is not a number >= 0")
        vals.append(float(text))
    last = f[3]
    if last == "N/A":
        return Timing(*vals)
    if last.isdigit():
        return Timing(*vals, wrong=int(last))
    if _number(last):  # nccl-tests < 2.11: the largest error, e.g. 2e-07
        return Timing(*vals, max_error=float(last))
    raise line_error(source, n, f"#wrong {last!r} is neither a count nor N/A")


def line_error(source: str, n: int, what: str) -> RingtreeError:
    """The error of line ``n`` of ``source``: ``FILE, line N: WHAT``."""
    return RingtreeError(f"{source}, line {n}: {what}")
