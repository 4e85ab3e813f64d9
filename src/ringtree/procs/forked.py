"""Rank processes forked from a server that imported torch once, instead of N fresh Pythons.

A fresh Python spends ~1 s of CPU (2 s on a busy 2-core machine) importing torch before a
rank can join its group; N ranks pay it N times, on the cores the ranks then share. The
launcher starts gloo and NCCL ranks through a fork server instead
(:mod:`ringtree.procs.forkserver`): one process, started on the first launch and kept for the
launcher's life, imports :data:`PRELOAD` once, and every rank is a ``fork()`` of it -- the
pattern of torch's DataLoader workers, which fork from a process that has imported torch.
Nothing in the server has started a thread pool, a CUDA context or a group: each rank does
that after the fork, from its own environment (the launcher's RANK, MASTER_PORT, ...), which
replaces the server's before the rank main runs. ``RINGTREE_RANK_START=spawn`` starts every
rank as a fresh Python instead (what mpirun does anyway).

Cost: one fork and a line each way per rank (~5 ms) instead of an interpreter and torch's
import; the server's own import is paid once per launcher process. ``ringtree run -n 4`` on
2 cores: 3.0 s instead of 4.9 s (docs/engine.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ringtree import config
from ringtree.errors import RingtreeError

#: What the server imports before it forks: torch and the rank main's own modules. A module
#: missing here (no torch: the MPI-only install) is skipped; the rank imports it itself.
PRELOAD = ["torch", "torch.distributed", "ringtree.procs.rank"]
#: The argv prefix of the one rank main, the only program a forked rank can run.
RANK_MAIN = ["-m", "ringtree.procs.rank"]
#: How long a request may wait for the server's answer (its first one waits for its imports).
START_S = 120.0


def can_fork(argv: list[str], env: dict[str, str]) -> bool:
    """Whether ranks of ``python ARGV`` may be forked: the rank main, and RINGTREE_RANK_START
    (in the ranks' environment) not ``spawn``."""
    return argv[:2] == RANK_MAIN and config.read("RINGTREE_RANK_START", env) == "fork"


class _Server:
    """The launcher's end of its fork server: requests out, pids and exit statuses in (read
    by a daemon thread)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ringtree.procs.forkserver", *PRELOAD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.pids: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self._read, name="ringtree-forkserver", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, a, b = line.split()
            with self.changed:
                (self.pids if kind == b"pid" else self.exits)[int(a)] = int(b)
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def fork(self, argv: list[str], env: dict[str, str], stderr_path: str) -> int:
        """Ask for one rank; its pid."""
        with self.changed:
            key, self.next_id = self.next_id, self.next_id + 1
            line = json.dumps({"id": key, "argv": argv, "env": env, "stderr": stderr_path})
            assert self.proc.stdin is not None
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            if not self.changed.wait_for(lambda: key in self.pids or not self.alive(),
                                         timeout=START_S):
                raise RingtreeError(f"the fork server did not start a rank in {START_S:g} s")
            if key not in self.pids:
                raise RingtreeError("the fork server ended (RINGTREE_RANK_START=spawn starts "
                                    "ranks without it)")
            return self.pids.pop(key)

    def alive(self) -> bool:
        return self.proc.poll() is None


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    """This process's fork server, started on first use (again if it ended)."""
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = _Server()
        return _server


class ForkedRank:
    """One forked rank, with the part of :class:`subprocess.Popen` the launcher uses: ``pid``,
    ``poll()``, ``wait()``, ``returncode`` (negative: killed by that signal)."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: str) -> None:
        self._server = _the_server()
        self.pid = self._server.fork(argv, env, stderr_path)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status, or None while the rank runs (1 once its server has ended: the
        rank's own status went with it, and the launcher then kills what is left)."""
        if self.returncode is None:
            server = self._server
            with server.changed:
                status = server.exits.pop(self.pid, None)
            if status is None and not server.alive():
                with server.changed:  # an exit read just before the server ended
                    status = server.exits.pop(self.pid, 1)
            self.returncode = status
        return self.returncode

    def wait(self) -> int | None:
        """Wait for the rank to end; its exit status."""
        while self.poll() is None:
            time.sleep(0.005)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL its process group (the rank made one of its own first thing) and the rank
        itself, in case it had not yet -- while it runs, or once its server ended (whose
        children it can outlive); then reap it."""
        if self.poll() is None or not self._server.alive():
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(self.pid, signal.SIGKILL)
        self.wait()

