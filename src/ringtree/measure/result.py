"""A sweep's results as records: one :class:`Row` per (collective, algorithm, size), in the
units nccl-tests prints (bytes, microseconds, GB/s = 1e9 bytes/s), with the run's metadata;
JSON and CSV exporters, and a JSON reader that gives back the same figures.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError

UNITS = {"size": "B", "time_us": "us", "algbw": "GB/s", "busbw": "GB/s", "times_us": "us"}
#: JSON key -> Row attribute where they differ
_KEYS = {"size": "size_bytes", "type": "dtype", "algbw": "algbw_GBps", "busbw": "busbw_GBps"}
_ATTRS = {v: k for k, v in _KEYS.items()}
#: columns of the CSV (every JSON key but the per-call times)
CSV_COLUMNS = (
    "collective",
    "algorithm",
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time_us",
    "algbw",
    "busbw",
    "wrong",
    "iters",
    "n_chunks",
    "spread",
    "in_place",
)


@dataclass(frozen=True)
class Row:
    """One line of the table.

    time_us: median over the timed calls of the slowest rank's time. algbw_GBps: size /
    time; busbw_GBps: algbw x the collective's bus factor. wrong: elements that differed
    from the exact result, summed over ranks (0: correct). iters: timed calls. n_chunks: the
    pipeline depth the algorithm ran with (None: not pipelined, or native). spread:
    (90th - 10th percentile) / median of the calls. times_us: every timed call. in_place:
    nccl-tests' placement (the output is the input, or holds it); None in results saved
    before ringtree recorded it, where each collective had one form.
    """

    collective: str
    algorithm: str
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    wrong: int
    iters: int
    n_chunks: int | None = None
    spread: float = 0.0
    times_us: tuple[float, ...] = ()
    in_place: bool | None = None

    def record(self) -> dict[str, Any]:
        """The row as JSON data (keys as nccl-tests' columns: size, type, algbw, busbw)."""
        d = asdict(self)
        d["times_us"] = list(self.times_us)
        return {_ATTRS.get(k, k): v for k, v in d.items()}

    @classmethod
    def from_record(cls, d: dict[str, Any]) -> Row:
        """The row back from :meth:`record`'s data (RingtreeError naming a missing key)."""
        names = {f.name for f in fields(cls)}
        values = {_KEYS.get(k, k): v for k, v in d.items() if _KEYS.get(k, k) in names}
        missing = [f.name for f in fields(cls) if f.name not in values and f.name in _REQUIRED]
        if missing:
            raise RingtreeError(f"bench row lacks {_ATTRS.get(missing[0], missing[0])!r}: {d}")
        values["times_us"] = tuple(values.get("times_us", ()))
        for name, value in values.items():
            kinds = _TYPES[name]
            items = value if name == "times_us" else (value,)
            if not all(isinstance(v, kinds) and (not isinstance(v, bool) or bool in kinds)
                       for v in items):
                want = " or ".join(k.__name__ for k in kinds)
                raise RingtreeError(
                    f"bench row's {_ATTRS.get(name, name)!r} is {value!r}: expected {want}"
                )
        Collective.parse(values["collective"])
        return cls(**values)


_REQUIRED = {f.name for f in fields(Row)
             if f.name not in ("n_chunks", "spread", "times_us", "in_place")}
_NUMBER = (int, float)
#: What each field of a row read back may hold (times_us: each of its values).
_TYPES: dict[str, tuple[type, ...]] = {
    "collective": (str,), "algorithm": (str,), "size_bytes": (int,), "count": (int,),
    "dtype": (str,), "redop": (str, type(None)), "root": (int, type(None)),
    "time_us": _NUMBER, "algbw_GBps": _NUMBER, "busbw_GBps": _NUMBER, "wrong": (int,),
    "iters": (int,), "n_chunks": (int, type(None)), "spread": _NUMBER, "times_us": _NUMBER,
    "in_place": (bool, type(None)),
}


@dataclass
class BenchResult:
    """A sweep: metadata (backend, ranks, cores, versions, date, timing method) and rows."""

    meta: dict[str, Any]
    rows: list[Row] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """``{"meta": ..., "units": ..., "rows": [...]}`` (what ``--json`` prints)."""
        return {"meta": self.meta, "units": UNITS, "rows": [r.record() for r in self.rows]}

    @classmethod
    def from_record(cls, d: Any) -> BenchResult:
        """A result back from :meth:`record`'s data."""
        if not isinstance(d, dict) or not isinstance(d.get("rows"), list):
            raise RingtreeError('bench results must be a JSON object with "rows": [...]')
        return cls(dict(d.get("meta", {})), [Row.from_record(r) for r in d["rows"]])

    @classmethod
    def load(cls, path: str | Path) -> BenchResult:
        """Read ``--json`` output from a file (RingtreeError if unreadable or malformed)."""
        try:
            data = json.loads(Path(path).read_text())
        except OSError as e:
            raise RingtreeError(f"cannot read bench results {str(path)!r}: {e.strerror}") from None
        except (ValueError, UnicodeDecodeError) as e:
            raise RingtreeError(f"bench results {str(path)!r} are not JSON: {e}") from None
        try:
            return cls.from_record(data)
        except (TypeError, ValueError) as e:
            raise RingtreeError(f"malformed bench results {str(path)!r}: {e}") from None

    def csv_text(self) -> str:
        """The rows as CSV, one header line (CSV_COLUMNS)."""
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in self.rows:
            w.writerow(r.record())
        return out.getvalue()

    def algorithms(self, collective: str) -> list[str]:
        """The algorithms measured for ``collective``, in first-seen order."""
        return list(dict.fromkeys(r.algorithm for r in self.rows if r.collective == collective))

    def collectives(self) -> list[str]:
        """The collectives measured, in first-seen order."""
        return list(dict.fromkeys(r.collective for r in self.rows))
