"""N local processes joined in one gloo process group on 127.0.0.1, running one function.

``run_world(fn, n, args)`` starts N fresh Python processes (``python -m ringtree.lab.world``),
each already inside ``torch.distributed`` -- gloo bound to the loopback interface, rendezvous
through a TCPStore that this process owns on a port the OS picked, so no port is guessed --
runs ``fn(rank, n, *args)`` in each and returns what they returned, in rank order. Whatever
happens (success, a rank that raises or dies, a timeout, Ctrl-C) every process is gone when
it returns; a rank whose parent disappears exits on its own. A failure is a
:class:`RankFailed` naming the rank and the last line of its error output.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
_POLL_S = 0.05


class RankFailed(RuntimeError):
    """A rank of the local world raised, died or did not finish in time; ``rank`` says which
    (None: the world as a whole timed out)."""

    def __init__(self, message: str, rank: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank


def loopback_interface() -> str:
    """The name of the loopback network interface (``lo`` on Linux, ``lo0`` on macOS)."""
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in names if n in ("lo", "lo0")), "lo")


def _last_line(path: Path) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "no error output"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no error output"


def _stop(procs: list[subprocess.Popen]) -> None:
    """Terminate, then kill, every process still running."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_world(fn: Callable[..., Any], n: int, args: tuple = (), timeout_s: float = 300.0) -> list:
    """``[fn(0, n, *args), ..., fn(n-1, n, *args)]``, each run in its own process inside an
    initialised gloo group of ``n`` ranks. ``fn`` must be importable (a module-level function),
    ``args`` and the results picklable. RankFailed when a rank fails or ``timeout_s`` passes.
    """
    import torch.distributed as dist

    store = dist.TCPStore(HOST, 0, None, is_master=True, wait_for_workers=False)
    with tempfile.TemporaryDirectory(prefix="ringtree-lab-") as tmp:
        job = Path(tmp)
        with open(job / "job.pkl", "wb") as f:
            pickle.dump((fn, args, n, store.port, timeout_s), f)
        env = dict(os.environ, GLOO_SOCKET_IFNAME=loopback_interface(), OMP_NUM_THREADS="1")
        procs: list[subprocess.Popen] = []
        try:
            for rank in range(n):
                with open(job / f"rank{rank}.err", "wb") as err:
                    procs.append(subprocess.Popen(
                        [sys.executable, "-m", "ringtree.lab.world", str(job), str(rank)],
                        stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env,
                    ))  # fmt: skip
            _wait(procs, job, timeout_s)
        finally:
            _stop(procs)
        results = []
        for rank in range(n):
            with open(job / f"rank{rank}.pkl", "rb") as f:
                results.append(pickle.load(f))
    del store
    return results


def _wait(procs: list[subprocess.Popen], job: Path, timeout_s: float) -> None:
    """Until every process exited 0; RankFailed at the first that did not, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        if any(c not in (None, 0) for c in codes):
            time.sleep(2 * _POLL_S)  # let the peers' failures land too, then blame the first
            raise _blame([p.poll() for p in procs], job)
        if all(c == 0 for c in codes):
            return
        if time.monotonic() > deadline:
            raise RankFailed(f"the {len(procs)} ranks did not finish within {timeout_s:g} s")
        time.sleep(_POLL_S)


def _blame(codes: list[int | None], job: Path) -> RankFailed:
    """The failure that came first. A rank that raised wrote when and what (``rankR.failed``);
    a rank that died without writing (killed, ``os._exit``) comes before those, whose errors
    are then most likely its consequence (a peer's connection reset)."""
    died, raised = [], []
    for rank, code in enumerate(codes):
        if code in (None, 0):
            continue
        try:
            when, what = (job / f"rank{rank}.failed").read_text().split(" ", 1)
            raised.append((float(when), rank, what))
        except (OSError, ValueError):
            died.append(rank)
    failed = died + [r for _, r, _ in sorted(raised)]
    also = f" (then: rank {', '.join(map(str, failed[1:]))})" if failed[1:] else ""
    rank = failed[0]
    if died:
        code = codes[rank]
        assert code is not None
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        why = f"{how}: {_last_line(job / f'rank{rank}.err')}"
        return RankFailed(f"rank {rank} died ({why}){also}", rank)
    return RankFailed(f"rank {rank} failed: {min(raised)[2]}{also}", rank)


def _exit_with_parent() -> None:
    """Exit this process as soon as its parent is gone (no orphaned ranks)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _main(job_dir: str, rank: int) -> None:
    """One rank: join the group, run the job's function, save its result."""
    _exit_with_parent()
    import torch.distributed as dist

    job = Path(job_dir)
    with open(job / "job.pkl", "rb") as f:
        fn, args, n, port, timeout_s = pickle.load(f)
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(HOST, port, None, is_master=False, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n, timeout=timeout)
    try:
        result = fn(rank, n, *args)
    except BaseException as e:
        first = (str(e).strip().splitlines() or [""])[0]
        (job / f"rank{rank}.failed").write_text(f"{time.monotonic()!r} {type(e).__name__}: {first}")
        raise
    finally:
        dist.destroy_process_group()
    with open(job / f"rank{rank}.pkl", "wb") as f:
        pickle.dump(result, f)


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]))
