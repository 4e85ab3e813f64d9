"""Read a run: trace files or directories of them, one file per rank
(:func:`load_run`), their process groups resolved (:mod:`ringtree.kineto.groups`).

A directory contributes its ``*.json`` and ``*.json.gz`` files (torch's
``tensorboard_trace_handler`` writes ``HOST_PID.TIMESTAMP.pt.trace.json``), not its
subdirectories. :data:`MAX_FILES` bounds a run: a trace per rank of the largest run ringtree
plans would be more than any one machine can read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ringtree.errors import RingtreeError
from ringtree.kineto.calls import Run
from ringtree.kineto.groups import assign_groups
from ringtree.kineto.rank import read_rank
from ringtree.kineto.reader import Progress

MAX_FILES = 4096
SUFFIXES = (".json", ".json.gz")

#: ``(file, index, total) -> per-file progress callback or None``
ProgressFactory = Callable[[Path, int, int], Progress | None]


def trace_files(paths: Sequence[str]) -> list[Path]:
    """The files ``paths`` name, directories expanded; RingtreeError when one does not exist
    or a directory holds no trace, or over MAX_FILES."""
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.endswith(SUFFIXES))
            if not found:
                raise RingtreeError(f"directory {text!r} holds no trace (*.json, *.json.gz)")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise RingtreeError(f"no such trace file or directory: {text!r}")
    if len(out) > MAX_FILES:
        raise RingtreeError(f"{len(out)} trace files: at most {MAX_FILES} (one per rank)")
    return out


def load_run(paths: Sequence[str], progress: ProgressFactory | None = None) -> Run:
    """Every rank's trace read and its calls' groups resolved; RingtreeError on a file that is
    not a Kineto trace, or two files of the same rank."""
    files = trace_files(paths)
    ranks = []
    for i, f in enumerate(files):
        ranks.append(read_rank(f, progress(f, i, len(files)) if progress else None,
                               default_rank=i))
    seen: dict[int, str] = {}
    for r in ranks:
        if r.rank in seen:
            raise RingtreeError(
                f"two traces of rank {r.rank}: {seen[r.rank]} and {r.path} (give one run's "
                "traces, one per rank)"
            )
        seen[r.rank] = r.path
    ranks.sort(key=lambda r: r.rank)
    warnings = [w for r in ranks for w in r.warnings]
    warnings += assign_groups(ranks)
    return Run(ranks, warnings)
