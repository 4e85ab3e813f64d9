"""Rank processes forked from a server that imported torch once, instead of N fresh Pythons.

A fresh Python spends ~1 s of CPU (2 s on a busy 2-core machine) importing torch before a
rank can join its group; N ranks pay it N times, on the cores the ranks then share. The
launcher starts gloo and NCCL ranks through :mod:`multiprocessing`'s ``forkserver`` instead:
one server process (started on the first launch, kept for the launcher's life, gone when the
launcher is) imports :data:`PRELOAD` once, and every rank is a ``fork()`` of it -- the same
pattern as torch's DataLoader workers, which fork from a process that has imported torch.
Nothing in the server has started a thread pool, a CUDA context or a group: each rank does
that itself after the fork, from its own environment (the launcher's RANK, MASTER_PORT, ...),
which replaces the server's before the rank's main runs. ``RINGTREE_RANK_START=spawn`` starts
every rank as a fresh Python instead (what mpirun does anyway).

Cost: a fork and a pickled request per rank (~10 ms) instead of an interpreter and torch's
import; the server's own import is paid once per launcher process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from typing import Any

from ringtree import config

#: What the server imports before it forks: torch and the rank main's own modules. A module
#: missing here (no torch: the MPI-only install) is skipped; the rank imports it itself.
PRELOAD = ["torch", "torch.distributed", "ringtree.procs.rank"]
#: The argv prefix of the one rank main, the only program a forked rank can run.
RANK_MAIN = ["-m", "ringtree.procs.rank"]

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def can_fork(argv: list[str], env: dict[str, str]) -> bool:
    """Whether ranks of ``python ARGV`` may be forked: the rank main, and RINGTREE_RANK_START
    (in the ranks' environment) not ``spawn``."""
    return argv[:2] == RANK_MAIN and config.read("RINGTREE_RANK_START", env) == "fork"


class ForkedRank:
    """One forked rank, with the part of :class:`subprocess.Popen` the launcher uses: ``pid``,
    ``poll()``, ``wait()``, ``returncode`` (negative: killed by that signal)."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: str) -> None:
        self._process = _CONTEXT.Process(target=_rank_main, args=(argv, env, stderr_path),
                                         name=f"ringtree-rank-{env.get('RANK', '?')}")
        self._process.start()
        self.pid = int(self._process.pid or 0)

    def poll(self) -> int | None:
        """The exit status, or None while the rank runs."""
        return self._process.exitcode

    def wait(self) -> int | None:
        """Wait for the rank to end; its exit status."""
        self._process.join()
        return self._process.exitcode

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def kill(self) -> None:
        """SIGKILL its process group (it made one of its own first thing) and the rank itself,
        in case it had not yet; then reap it."""
        if self.poll() is None:
            for kill, target in ((os.killpg, self.pid), (os.kill, self.pid)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(target, signal.SIGKILL)
        self.wait()


def _rank_main(argv: list[str], env: dict[str, str], stderr_path: str) -> None:
    """In the forked child: become what ``python ARGV`` with ``env`` would have been -- own
    process group, stdin/stdout on /dev/null, stderr to the launcher's file, the ranks'
    environment and import path, torch's threads as OMP_NUM_THREADS says -- then run the rank
    main; it ends the process itself (os._exit)."""
    os.setpgrp()
    null = os.open(os.devnull, os.O_RDWR)
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((null, 0), (null, 1), (err, 2)):
        os.dup2(fd, target)
    os.environ.clear()
    os.environ.update(env)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [p for p in paths if p not in sys.path]
    _threads_from(env)
    from ringtree.procs import rank

    rank.run_main(argv[2:])


def _threads_from(env: dict[str, Any]) -> None:
    """torch read OMP_NUM_THREADS when the server imported it; apply the rank's own (the
    launcher always sets it), capped at the cores as torch's start-up caps it (torch 2.13:
    OMP_NUM_THREADS=3 on 2 cores gives 2 threads; tests/test_procs_launch.py compares a
    forked rank with a fresh Python)."""
    torch = sys.modules.get("torch")
    value = env.get("OMP_NUM_THREADS", "")
    if torch is not None and value.isdigit() and int(value) > 0:
        torch.set_num_threads(min(int(value), os.cpu_count() or 1))
