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


def describe(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """What a rank's process looks like from inside: its environment and import path, its
    process group, parent, working directory, torch's thread count; says ``hello`` on
    stderr (the launcher reads a rank's last stderr line)."""
    import sys

    import torch

    print(f"hello from rank {engine.rank}", file=sys.stderr)
    return {"env": {k: os.environ.get(k) for k in cfg["keys"]},
            "own_group": os.getpgid(0) == os.getpid(), "parent": os.getppid(),
            "cwd": os.getcwd(), "tests_on_path": cfg["tests"] in sys.path,
            "threads": torch.get_num_threads(), "stdin": os.path.realpath("/proc/self/fd/0")}


def crash(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """Rank 1 fails with an error that is not ringtree's (a bug); rank 0 returns."""
    if engine.rank == 1:
        raise ValueError("a bug in a body")
    return {}
