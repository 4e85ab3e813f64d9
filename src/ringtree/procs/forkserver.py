"""The fork server: ``python -m ringtree.procs.forkserver MODULE...``, started by the launcher
(:mod:`ringtree.procs.forked`), imports the MODULEs once and forks a rank for every request.

Protocol, one line each way: the launcher writes ``{"id": K, "argv": [...], "env": {...},
"stderr": PATH}`` to the server's stdin; the server answers ``pid K PID`` once it forked, and
``exit PID STATUS`` (negative: killed by that signal, as subprocess says it) once the rank
ended. End of stdin (the launcher exited or died) ends the server; its ranks watch the
launcher themselves (:func:`ringtree.procs.launch.watch_launcher`). The server ignores SIGINT
and lives in a session of its own: a terminal's Ctrl-C reaches the launcher, which kills the
ranks. Unlike :mod:`multiprocessing`'s forkserver, a rank never imports the launcher's main
module (a user's script without an ``if __name__ == "__main__"`` guard stays safe).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import selectors
import signal
import sys
import traceback
from typing import Any

#: How often the server reaps ended ranks when no request comes (their exit reaches the
#: launcher at most this late; the launcher itself looks every 20 ms).
REAP_S = 0.02


def serve(preload: list[str]) -> None:
    """Import ``preload`` (a module that fails to import is left to the rank), then serve
    requests from stdin until it closes."""
    for name in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    pending = b""
    while True:
        if selector.select(timeout=REAP_S):
            data = os.read(0, 1 << 16)
            if not data:
                return
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    _become_rank(request)
                _say(f"pid {request['id']} {pid}")
        _reap()


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _reap() -> None:
    """Tell the launcher about every rank that ended."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _say(f"exit {pid} {os.waitstatus_to_exitcode(status)}")


def _become_rank(request: dict[str, Any]) -> None:
    """In the forked child: become what ``python ARGV`` with ``env`` would have been -- own
    process group, stdin/stdout on /dev/null (off the server's pipes), stderr to the
    launcher's file, the rank's environment and import path, torch's threads as
    OMP_NUM_THREADS says -- then run the rank main, which ends the process (os._exit)."""
    try:
        os.setpgrp()
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for fd, target in ((null, 0), (null, 1), (err, 2)):
            os.dup2(fd, target)
        os.close(null)
        os.close(err)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        env: dict[str, str] = request["env"]
        os.environ.clear()
        os.environ.update(env)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:0] = [p for p in paths if p not in sys.path]
        sys.argv = [request["argv"][1], *request["argv"][2:]]
        _threads_from(env)
        from ringtree.procs import rank

        rank.run_main(request["argv"][2:])
    except BaseException:  # noqa: BLE001 - run_main exits itself: this is a start-up failure
        traceback.print_exc()
    finally:
        os._exit(1)


def _threads_from(env: dict[str, str]) -> None:
    """torch read OMP_NUM_THREADS when the server imported it; apply the rank's own (the
    launcher always sets it), capped at the cores as torch's start-up caps it (torch 2.13:
    OMP_NUM_THREADS=3 on 2 cores gives 2 threads; tests/test_procs_launch.py compares a
    forked rank with a fresh Python)."""
    torch = sys.modules.get("torch")
    value = env.get("OMP_NUM_THREADS", "")
    if torch is not None and value.isdigit() and int(value) > 0:
        torch.set_num_threads(min(int(value), os.cpu_count() or 1))


if __name__ == "__main__":
    serve(sys.argv[1:])
    os._exit(0)  # at once: torch's interpreter shutdown would keep the server ~0.5 s
