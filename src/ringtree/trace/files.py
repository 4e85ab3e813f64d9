"""Writing rendered traces to files, with one-line errors."""

from __future__ import annotations

from pathlib import Path

from ringtree.errors import RingtreeError


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``; a RingtreeError naming the path if that fails."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise RingtreeError(f"cannot write {str(path)!r}: {e.strerror or e}") from None
