"""The one rank main: ``python -m ringtree.procs.rank MODULE:FUNCTION CONFIG.json``.

Started by :func:`ringtree.procs.launch.launch_body` once per rank. It joins the group
(:class:`~ringtree.procs.native.NativeEngine`, from the launcher's environment), calls the
body ``FUNCTION(engine, config)`` -- ``ringtree run``'s, the bench's, the DDP lab's -- and
writes what the body returns where the launcher reads it; it ends on its own when the
launcher dies (:func:`~ringtree.procs.launch.watch_launcher`). On an error it writes one line,
``rank R: ErrorType: message``, with the time it happened (so that the launcher can put the
first failure first), prints it to stderr and exits 1; an error that is not ringtree's or the
engine's also prints its traceback (a bug). It exits without running the group's destructors,
which can hang once a peer has died.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ringtree.errors import RingtreeError
from ringtree.procs.launch import watch_launcher, write_result
from ringtree.procs.native import EngineError, NativeEngine
from ringtree.runtime.errors import PeerError

Body = Callable[[NativeEngine, dict[str, Any]], dict[str, Any]]


def rank_from_environment(backend: str) -> int:
    """This process's rank, as the launcher set it (before joining the group)."""
    if backend != "mpi":
        return int(os.environ["RANK"])
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if key in os.environ:
            return int(os.environ[key])
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def error_line(rank: int, e: BaseException) -> str:
    """``rank R: ErrorType: first line of the message`` (a leading ``rank R:`` not repeated)."""
    first = (str(e).strip().splitlines() or [""])[0].removeprefix(f"rank {rank}: ")
    return f"rank {rank}: {type(e).__name__}: {first}"


def main(body: Body, config: dict[str, Any]) -> int:
    """Run one rank of ``body`` as ``config`` says; returns the exit status."""
    rank = rank_from_environment(config["backend"])
    watch_launcher()
    try:
        engine = NativeEngine(config["backend"], float(config.get("timeout_s", 60)))
        data = body(engine, config)
        data["rank"] = rank
        write_result(rank, data)
        if not config.get("keep_group"):
            engine.close()
        return 0
    except Exception as e:
        if not isinstance(e, PeerError | EngineError | RingtreeError):
            traceback.print_exc()
            line = f"rank {rank}: internal error: {type(e).__name__}: {e}".splitlines()[0]
        else:
            line = error_line(rank, e)
        write_result(rank, {"rank": rank, "error": line, "failed_at_s": time.monotonic()})
        print(f"ringtree: error: {line}", file=sys.stderr, flush=True)
        return 1


def load_body(ref: str) -> Body:
    """The function ``MODULE:FUNCTION`` names."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def run_main(args: list[str]) -> None:
    """``python -m ringtree.procs.rank BODY CONFIG``'s whole run; ends the process."""
    status = main(load_body(args[0]), json.loads(Path(args[1]).read_text()))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # never hang in a dead group's destructors


if __name__ == "__main__":
    run_main(sys.argv[1:])
