"""Read what nccl-tests prints: ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``broadcast_perf``, ``reduce_perf``, ``sendrecv_perf``, ``gather_perf``,
``scatter_perf``, ``hypercube_perf`` -- any version from 2.0 (an ``error`` column, no ``Group``
in the device list) to 2.17 (``# Collective test starting``, ``#wrong`` as ``N/A``).

A file may hold several tests (a script that runs them one after another), NCCL_DEBUG=INFO
lines between and inside the table, and lines tagged by the launcher: Open MPI's
``--tag-output`` (``[1,0]<stdout>:``, also in the middle of a line: nccl-tests prints a row in
several writes, and mpirun tags each), Slurm's ``srun -l`` and PALS/mpiexec ``--label``
(``0: ``), MPICH's ``-prepend-rank`` (``[0] ``), a ``[host:pid]`` prefix and SkyPilot's
``(head, rank=0, pid=3808)``. :func:`demultiplex` puts each tagged stream's pieces back
together before the lines are read. ``ringtree bench``'s text (:mod:`ringtree.measure.table`:
a block per collective and algorithm, an ``iters`` column) reads the same way.

What a test gives (:class:`Test`): its header (nThread, nGpus, minBytes ...), the ranks of the
"Using devices" list (so the hosts, nodes, GPUs per node and GPU model), each row's out-of-place
and in-place time, algbw, busbw and #wrong, the footers, the NCCL version and the NCCL_*
settings NCCL reported. :meth:`Test.records` flattens it into :class:`Record` rows. Which
collective a test measured comes from ``# Collective test starting``, else the last
``X_perf`` command named before it, else the file's name, else the table itself (its columns,
and busbw / algbw against each candidate's bus factor). A malformed or truncated row, or a
test that cannot be told, is a RingtreeError naming the file and the line. Parsing is linear
in the file's size.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringtree.collectives import Collective, bus_factor
from ringtree.errors import RingtreeError
from ringtree.units import format_bytes

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
#: Largest file read (a 10,000-rank NCCL_DEBUG=INFO log is a few hundred MB).
MAX_BYTES = 1 << 30

_NAME = "|".join(sorted(TESTS, key=len, reverse=True))
_PERF = re.compile(rf"\b({_NAME})_perf(?:_mpi)?\b")
_OMPI = re.compile(r"\[\d+,\d+\](?:\[[^\]\s]*\])?<std(?:out|err)>:")
_PREFIXES = (
    re.compile(r"\((?:head|worker\d*), rank=(\d+), pid=\d+(?:, ip=[\d.]+)?\) "),  # SkyPilot
    re.compile(r"\s*(\d+): "),  # srun -l, PALS / mpiexec --label
    re.compile(r"\[(\d+)\] "),  # MPICH -prepend-rank
    re.compile(r"\[([\w.-]+:\d+)\] "),  # [host:pid]
)
_DEBUG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|ABORT|ERROR)\b")
_ENV = re.compile(r"NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_DEVICE = re.compile(
    r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
    r"\s+\[[^\]]*\]\s+(.*?)\s*$"
)
_HEADER = re.compile(r"^#?\s*nThread\s+\d+")
#: ringtree bench's lines: ``# ringtree bench: 4 gloo processes ...``, ``# all-reduce  algorithm:
#: ring (pipeline chunks: 8)``
_RINGTREE = re.compile(r"ringtree bench: (\d+) \S+ processes")
_BLOCK = re.compile(r"^([a-z-]+)\s+algorithm:\s+(\S+)")
_HEADER_FIELDS = {
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


@dataclass(frozen=True)
class Record:
    """One measurement, flat (:meth:`Test.records`)."""

    test: str
    collective: Collective | None
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    in_place: bool
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    n_ranks: int
    nodes: int | None
    gpus_per_node: int | None
    gpu: str
    line: int


@dataclass(frozen=True)
class Test:
    """One nccl-tests run: ``test`` is nccl-tests' name (``all_reduce``), ``collective``
    ringtree's (None for sendrecv and hypercube). ``n_ranks`` comes from the device list, or
    from busbw / algbw when the log has none (``ranks_inferred``)."""

    source: str
    line: int
    test: str
    collective: Collective | None
    n_ranks: int
    rows: tuple[Row, ...]
    devices: tuple[Device, ...] = ()
    header: dict[str, Any] = field(default_factory=dict)
    nccl_version: str = ""
    tests_version: str = ""
    env: tuple[tuple[str, str], ...] = ()
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None
    ranks_inferred: bool = False
    #: the algorithm of a ``ringtree bench`` block ("" for nccl-tests, where NCCL chooses)
    algorithm: str = ""

    @property
    def hosts(self) -> tuple[str, ...]:
        """The hosts of the device list, in rank order of first appearance."""
        return tuple(dict.fromkeys(d.host for d in self.devices))

    @property
    def nodes(self) -> int | None:
        """Hosts in the device list (None without one)."""
        return len(self.hosts) or None

    @property
    def gpus_per_node(self) -> int | None:
        """Ranks per host when every host has as many (None otherwise, or without a list)."""
        per = {h: sum(d.host == h for d in self.devices) for h in self.hosts}
        counts = set(per.values())
        return counts.pop() if len(counts) == 1 else None

    @property
    def gpu(self) -> str:
        """The GPU model of the device list ("" without one; the models joined if mixed)."""
        return " + ".join(dict.fromkeys(d.gpu for d in self.devices))

    def records(self) -> list[Record]:
        """Every row's out-of-place, then in-place measurement."""
        out = []
        for r in self.rows:
            for in_place, t in ((False, r.out_of_place), (True, r.in_place)):
                if t is None:
                    continue
                out.append(Record(
                    self.test, self.collective, r.size_bytes, r.count, r.dtype, r.redop,
                    r.root, in_place, t.time_us, t.algbw_gbps, t.busbw_gbps, t.wrong,
                    self.n_ranks, self.nodes, self.gpus_per_node, self.gpu, r.line))
        return out


def test_bus_factor(test: str, n_ranks: int) -> float | None:
    """nccl-tests' busbw / algbw for a test on ``n_ranks`` ranks (sendrecv 1; None for
    hypercube, whose algbw is not size / time)."""
    c = TESTS.get(test)
    if c is not None:
        return bus_factor(c, n_ranks)
    return 1.0 if test == "sendrecv" else None


def size_label(n: int) -> str:
    """A size as nccl-tests users read it: ``64 MiB`` for a power of two, else ``1.5 MB``."""
    if n >= 1024 and n & (n - 1) == 0:
        for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
            if n >= 1 << shift:
                return f"{n >> shift} {unit}"
    return format_bytes(n)


def parse_file(path: str | Path) -> list[Test]:
    """Every test in the file at ``path`` (RingtreeError naming the file and line)."""
    p = Path(path)
    try:
        if p.stat().st_size > MAX_BYTES:
            raise RingtreeError(f"{p}: {p.stat().st_size:,} bytes, more than the {MAX_BYTES:,} "
                                "a log is read up to: give the part with the tests")
        data = p.read_bytes()
    except OSError as e:
        raise RingtreeError(f"cannot read nccl-tests log {str(p)!r}: {e.strerror}") from None
    return parse_text(data.decode("utf-8", errors="replace"), str(p))


def parse_text(text: str, source: str = "<text>") -> list[Test]:
    """Every test in ``text``; ``source`` names it in errors and hints the collective."""
    tests = _Reader(source).read(demultiplex(text))
    if not tests:
        raise RingtreeError(f"{source}: no nccl-tests result rows found (expected the table "
                            "that all_reduce_perf and the other tests print)")
    return tests


class _Reader:
    """One pass over a file's logical lines, one test open at a time."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.done: list[Test] = []
        self.named = ""  # the test of the last X_perf command seen (not yet bound)
        self.version = ""  # the last "# nccl-tests version"
        self.nccl = ""
        self.env: dict[str, str] = {}
        self.name = ""  # "# Collective test starting: NAME"
        self.processes = 0  # "# ringtree bench: N ... processes"
        self._begin(0)

    def _begin(self, line: int) -> None:
        """A new test from line ``line`` (0: not started)."""
        self.start, self.header, self.command = line, {}, ""
        self.devices: list[Device] = []
        self.rows: list[Row] = []
        self.layout: list[str] | None = None
        self.avg: float | None = None
        self.oob: int | None = None
        self.ended = False
        self.algorithm = ""

    def _close(self) -> None:
        """End the open test (kept if it has rows)."""
        if self.rows:
            self.done.append(self._test())
            self.name = ""
        self._begin(0)

    def _mark(self, n: int) -> None:
        """The open test's first line is ``n`` unless it has one; the command named before
        it is its own."""
        if not self.start:
            self.start, self.command, self.named = n, self.named, ""

    def read(self, lines: Iterator[Line]) -> list[Test]:
        for ln in lines:
            self._line(ln.number, ln.text.strip())
        self._close()
        return self.done

    def _line(self, n: int, s: str) -> None:
        if not s:
            return
        if _DEBUG.search(s) or s.startswith("NCCL version"):
            self._debug(s)
        elif s.startswith("#") or _HEADER.match(s):
            self._comment(n, s, s.lstrip("#").strip())
        elif _looks_like_row(s, self.layout is not None):
            self._row(n, s)
        elif (m := _PERF.search(s)) is not None:
            self.named = m.group(1)

    def _debug(self, s: str) -> None:
        m = _ENV.search(s)
        if m:
            self.env[m.group(1)] = m.group(2).rstrip(".")
        m = _NCCL_VERSION.search(s)
        if m:
            self.nccl = m.group(1)

    def _comment(self, n: int, s: str, body: str) -> None:
        words = body.split()
        if body.startswith("nccl-tests version"):
            self._close()
            self.version = words[2] if len(words) > 2 else ""
        elif body.startswith("Collective test starting:"):
            self._close()
            m = _PERF.search(body)
            self.name = m.group(1) if m else ""
        elif _HEADER.match(s):
            if self.rows or self.header:
                self._close()
            self._mark(n)
            for key, pat in _HEADER_FIELDS.items():
                m = re.search(pat, body)
                if m:
                    self.header[key] = int(m.group(1)) if m.group(1).isdigit() else m.group(1)
        elif body.startswith("Using devices"):
            if self.rows:
                self._close()
            self._mark(n)
            self.devices = []
        elif (m := _DEVICE.match(s)) is not None:
            self.devices.append(Device(int(m[1]), int(m[2]), m[3], int(m[4]), m[5]))
        elif (m := _BLOCK.match(body)) is not None and _bench_name(m[1]):
            self._close()
            self.name, self.algorithm = _bench_name(m[1]), m[2]
        elif (m := _RINGTREE.search(body)) is not None:
            self.processes = int(m[1])
        elif words[:1] == ["size"] and "time" in words:
            if self.rows:
                self._close()
            self._mark(n)
            self.layout = words
        else:
            self._footer(body)

    def _footer(self, body: str) -> None:
        """``Out of bounds values``, ``Avg bus bandwidth``, ``Collective test concluded``."""
        m = re.search(r":\s*([\d.eE+-]+)", body)
        if body.startswith("Out of bounds values"):
            self.oob, self.layout, self.ended = int(float(m.group(1))) if m else None, None, True
        elif body.startswith("Avg bus bandwidth"):
            self.avg, self.layout, self.ended = float(m.group(1)) if m else None, None, True
        elif body.startswith("Collective test concluded"):
            self._close()

    def _row(self, n: int, s: str) -> None:
        if self.ended:
            self._close()
        words = s.split()
        layout = self.layout or _guess_layout(words)
        if layout is None:
            raise self._error(n, f"a result row with {len(words)} fields and no table header "
                                 f"to read it by: {s[:80]!r}")
        self._mark(n)
        self.layout = layout
        self.rows.append(_read_row(n, words, layout, self))

    def _error(self, n: int, what: str) -> RingtreeError:
        return RingtreeError(f"{self.source}, line {n}: {what}")

    def _test(self) -> Test:
        name = self.name or self.command or _name_in(self.source)
        devices = tuple(self.devices)
        n_ranks, inferred = len(devices) or self.processes, False
        if not name:
            name, n_ranks, inferred = _infer(self.rows, n_ranks, self._error(self.start, ""))
        elif not n_ranks:
            n_ranks, inferred = _ranks_from_ratio(name, self.rows), True
            if not n_ranks:
                raise self._error(self.start, f"{name}_perf's table has no 'Using devices' list "
                                              "and no row to tell its ranks by (busbw / algbw)")
        return Test(self.source, self.start, name, TESTS[name], n_ranks, tuple(self.rows),
                    devices, dict(self.header), self.nccl, self.version,
                    tuple(sorted(self.env.items())), self.avg, self.oob, inferred,
                    self.algorithm)


def _looks_like_row(s: str, in_table: bool) -> bool:
    """Whether ``s`` is a result row: starts with a whole number; outside a table also a
    count and a known type after it (so that prose with a number is not read as one)."""
    f = s.split()
    if not f or not f[0].isdigit():
        return False
    return in_table or (len(f) >= 7 and f[1].isdigit() and f[2] in TYPE_BYTES)


def _guess_layout(f: list[str]) -> list[str] | None:
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


def _read_row(n: int, f: list[str], layout: list[str], r: _Reader) -> Row:
    """One row by its table's columns (RingtreeError naming the line and the bad value)."""
    if len(f) != len(layout):
        raise r._error(n, f"a result row has {len(f)} fields where the table has "
                          f"{len(layout)} ({' '.join(layout)}): truncated or garbled")
    first = layout.index("time")
    lead = dict(zip(layout[:first], f[:first], strict=True))
    starts = [i for i in range(first, len(f) - 3, 4) if layout[i] == "time"]
    groups = [_timing(n, f[i: i + 4], r) for i in starts]  # later columns (iters) left out
    size, count = _whole(n, lead.get("size", ""), "size", r), _whole(n, lead.get("count", ""),
                                                                     "count", r)
    root = lead.get("root")
    return Row(n, size, count, lead.get("type", ""), lead.get("redop"),
               int(root) if root is not None and re.fullmatch(r"-?\d+", root) else None,
               groups[0], groups[1] if len(groups) > 1 else None)


def _bench_name(collective: str) -> str:
    """nccl-tests' name of a ringtree collective (``all-to-all`` -> ``alltoall``), or ""."""
    for name, c in TESTS.items():
        if c is not None and c.value == collective:
            return name
    return ""


def _whole(n: int, text: str, what: str, r: _Reader) -> int:
    if not text.isdigit():
        raise r._error(n, f"{what} {text!r} is not a whole number")
    return int(text)


def _timing(n: int, f: list[str], r: _Reader) -> Timing:
    if len(f) != 4:
        raise r._error(n, f"a time/algbw/busbw/#wrong group has {len(f)} fields")
    vals = []
    for what, text in zip(("time", "algbw", "busbw"), f[:3], strict=True):
        if not _number(text) or not math.isfinite(float(text)) or float(text) < 0:
            raise r._error(n, f"{what} {text!r} is not a number >= 0")
        vals.append(float(text))
    last = f[3]
    if last == "N/A":
        return Timing(*vals)
    if last.isdigit():
        return Timing(*vals, wrong=int(last))
    if _number(last):  # nccl-tests < 2.11: the largest error, e.g. 2e-07
        return Timing(*vals, max_error=float(last))
    raise r._error(n, f"#wrong {last!r} is neither a count nor N/A")


def _name_in(source: str) -> str:
    """A test name in a file's name (``all_gather_output.dat``, ``alltoall.log``)."""
    stem = Path(source).name.lower()
    for name in sorted(TESTS, key=len, reverse=True):
        if name in stem:
            return name
    return ""


def _ratio(rows: tuple[Row, ...] | list[Row]) -> float | None:
    """busbw / algbw of the row with the largest algbw (the most digits)."""
    best = max(rows, key=lambda r: r.out_of_place.algbw_gbps, default=None)
    if best is None or best.out_of_place.algbw_gbps < 1.0:
        return None
    return best.out_of_place.busbw_gbps / best.out_of_place.algbw_gbps


def _ranks_from_ratio(test: str, rows: list[Row]) -> int:
    """The rank count whose bus factor is within 0.2 % of the rows' busbw / algbw (0: none)."""
    ratio = _ratio(rows)
    if ratio is None or test_bus_factor(test, 2) is None:
        return 0
    best, n = (math.inf, 0), 2
    while n < 1 << 17:
        f = test_bus_factor(test, n) or 0.0
        best = min(best, (abs(f / ratio - 1), n))
        if f >= ratio * 1.002 or f == test_bus_factor(test, n + 1):
            break
        n += 1
    return best[1] if best[0] < 0.002 else 0


#: Tests whose rows name a reduce operation (sendrecv prints ``sum`` since 2.13).
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce", "sendrecv"})


def _infer(rows: list[Row], n_ranks: int, where: RingtreeError) -> tuple[str, int, bool]:
    """(test, ranks, whether the ranks were inferred) of a table no line names, from its
    columns (a reduce op or none, a root or -1), busbw / algbw and counts."""
    last = rows[-1]
    names = [t for t in TESTS if test_bus_factor(t, 2) is not None]
    names = [t for t in names if (t in REDUCING) == (last.redop not in (None, "none"))]
    if last.root is not None:
        names = [t for t in names
                 if (TESTS[t] is not None and TESTS[t].has_root) == (last.root >= 0)]
    ratio, found = _ratio(rows), []
    for t in names:
        n = n_ranks or _ranks_from_ratio(t, rows)
        f = test_bus_factor(t, n) if n else None
        if f is not None and (ratio is None or abs(f / ratio - 1) <= 0.01) and _counts_fit(
                t, rows, n):
            found.append((t, n))
    if len(found) != 1:
        what = " or ".join(t for t, _ in found) if found else "no nccl-tests test"
        raise RingtreeError(f"{str(where).rstrip(': ')}: cannot tell which test this table "
                            f"measured ({what} fits its numbers) and the log names none (no "
                            "'# Collective test starting' line, no X_perf command): name the "
                            "file after it, e.g. all_gather_perf.log")
    return found[0][0], found[0][1], not n_ranks


def _counts_fit(test: str, rows: list[Row], n: int) -> bool:
    """Whether every row's count x type size is its size (per-rank tests: size / ranks)."""
    per_rank = test in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter")
    for r in rows:
        b = TYPE_BYTES.get(r.dtype)
        if b is None or r.size_bytes == 0:
            continue
        want = r.size_bytes // (n * b) if per_rank else r.size_bytes // b
        if r.count != want:
            return False
    return True
