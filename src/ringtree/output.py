"""Where command output goes: data on stdout (tables or JSON), messages on stderr.

Respects NO_COLOR (rich does) and widens tables when stdout is not a terminal, so that piped
output is not wrapped at 80 columns.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

from ringtree.errors import RingtreeError


def stdout_console() -> Console:
    """A console for data on stdout (wide when piped)."""
    return Console(width=None if sys.stdout.isatty() else 160)


def stderr_console() -> Console:
    """A console for messages and progress on stderr."""
    return Console(stderr=True)


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout; a RingtreeError (nothing printed) when a figure is
    infinite or NaN, which JSON cannot hold."""
    try:
        text = json.dumps(obj, indent=2, allow_nan=False)
    except ValueError as e:
        raise RingtreeError(
            f"a result is infinite or NaN, which JSON cannot hold ({e}): the inputs are "
            "out of the range the model computes in"
        ) from None
    sys.stdout.write(text + "\n")
