"""Where command output goes: data on stdout (tables or JSON), messages on stderr.

Respects NO_COLOR (rich does) and widens tables when stdout is not a terminal, so that piped
output is not wrapped at 80 columns.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def stdout_console() -> Console:
    """A console for data on stdout (wide when piped)."""
    return Console(width=None if sys.stdout.isatty() else 160)


def stderr_console() -> Console:
    """A console for messages and progress on stderr."""
    return Console(stderr=True)


def print_json(obj: Any) -> None:
    """``obj`` as indented JSON on stdout."""
    json.dump(obj, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")
