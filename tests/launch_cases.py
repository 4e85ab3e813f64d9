"""Bodies for :mod:`ringtree.procs.rank` that test the launcher (tests/test_procs_launch.py):
``linger`` writes this rank's process id to ``<pid_dir>/<rank>`` and sleeps ``sleep_s``."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def linger(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """See the module doc."""
    path = Path(cfg["pid_dir"]) / str(engine.rank)
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    path.with_suffix(".tmp").rename(path)
    time.sleep(cfg["sleep_s"])
    return {}
