"""Read what nccl-tests prints: ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``broadcast_perf``, ``reduce_perf``, ``sendrecv_perf``, ``gather_perf``,
``scatter_perf``, ``hypercube_perf`` -- any version from 2.0 (an ``error`` column, no ``Group``
in the device list) to 2.17 (``# Collective test starting``, ``#wrong`` as ``N/A``).

A file may hold several tests (a script that runs them one after another), NCCL_DEBUG=INFO
lines between and inside the table, and lines tagged by the launcher (Open MPI, Slurm, PALS,
MPICH, SkyPilot: :mod:`ringtree.measure.nccl_lines`, which reads the lines, puts the tagged
streams back together and reads the rows). ``ringtree bench``'s text
(:mod:`ringtree.measure.table`: a block per collective and algorithm, an ``iters`` column)
reads the same way. This module assembles the tests from those lines.

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
from ringtree.measure.nccl_lines import (
    BLOCK,
    DEBUG,
    DEVICE,
    ENV,
    HEADER,
    HEADER_FIELDS,
    NCCL_VERSION,
    PERF,
    RINGTREE,
    TESTS,
    TYPE_BYTES,
    Device,
    Line,
    Row,
    demultiplex,
    guess_layout,
    line_error,
    looks_like_row,
    read_row,
)
from ringtree.units import format_bytes

#: Largest file read (a 10,000-rank NCCL_DEBUG=INFO log is a few hundred MB).
MAX_BYTES = 1 << 30


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
        if DEBUG.search(s) or s.startswith("NCCL version"):
            self._debug(s)
        elif s.startswith("#") or HEADER.match(s):
            self._comment(n, s, s.lstrip("#").strip())
        elif looks_like_row(s, self.layout is not None):
            self._row(n, s)
        elif (m := PERF.search(s)) is not None:
            self.named = m.group(1)

    def _debug(self, s: str) -> None:
        m = ENV.search(s)
        if m:
            self.env[m.group(1)] = m.group(2).rstrip(".")
        m = NCCL_VERSION.search(s)
        if m:
            self.nccl = m.group(1)

    def _comment(self, n: int, s: str, body: str) -> None:
        words = body.split()
        if body.startswith("nccl-tests version"):
            self._close()
            self.version = words[2] if len(words) > 2 else ""
        elif body.startswith("Collective test starting:"):
            self._close()
            m = PERF.search(body)
            self.name = m.group(1) if m else ""
        elif HEADER.match(s):
            if self.rows or self.header:
                self._close()
            self._mark(n)
            for key, pat in HEADER_FIELDS.items():
                m = re.search(pat, body)
                if m:
                    self.header[key] = int(m.group(1)) if m.group(1).isdigit() else m.group(1)
        elif body.startswith("Using devices"):
            if self.rows:
                self._close()
            self._mark(n)
            self.devices = []
        elif (m := DEVICE.match(s)) is not None:
            self.devices.append(Device(int(m[1]), int(m[2]), m[3], int(m[4]), m[5]))
        elif (m := BLOCK.match(body)) is not None and _bench_name(m[1]):
            self._close()
            self.name, self.algorithm = _bench_name(m[1]), m[2]
        elif (m := RINGTREE.search(body)) is not None:
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
        layout = self.layout or guess_layout(words)
        if layout is None:
            raise self._error(n, f"a result row with {len(words)} fields and no table header "
                                 f"to read it by: {s[:80]!r}")
        self._mark(n)
        self.layout = layout
        self.rows.append(read_row(n, words, layout, self.source))

    def _error(self, n: int, what: str) -> RingtreeError:
        return line_error(self.source, n, what)

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


def _bench_name(collective: str) -> str:
    """nccl-tests' name of a ringtree collective (``all-to-all`` -> ``alltoall``), or ""."""
    for name, c in TESTS.items():
        if c is not None and c.value == collective:
            return name
    return ""


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
