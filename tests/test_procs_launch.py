"""The launcher (ringtree.procs.launch): ranks end within 5 s of their launcher's death, even
when it is SIGKILLed and cannot kill them (gloo ranks are forked in sessions of their own;
MPI's are mpirun's); a forked rank is the process a fresh Python would have been, and a dead
fork server ends its launch;
process_alive tells a zombie from a live process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from needs import MPI_MISSING
from ringtree.errors import RingtreeError
from ringtree.procs.launch import free_port, launch_body, process_alive

pytestmark = pytest.mark.multiproc  # every test here starts processes
HERE = Path(__file__).parent
LAUNCHER = """
import json, sys
from ringtree.procs.launch import launch_body
launch_body(2, sys.argv[1], "launch_cases:linger", json.loads(sys.argv[2]), timeout_s=300,
            env={"PYTHONPATH": sys.argv[3]})
"""


def _wait_for(what, deadline_s: float, pause_s: float = 0.05):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = what()
        if got:
            return got
        time.sleep(pause_s)
    return what()


@pytest.mark.parametrize("backend", ["gloo", pytest.param("mpi", marks=pytest.mark.skipif(
    MPI_MISSING, reason="mpi4py/mpirun not installed"))])
def test_ranks_end_within_5_s_of_a_sigkilled_launcher(backend, tmp_path):
    cfg = f'{{"pid_dir": "{tmp_path}", "sleep_s": 120, "timeout_s": 60}}'
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, backend, cfg, str(HERE)],
                                start_new_session=True)
    pids: list[int] = []
    try:
        files = _wait_for(lambda: len(list(tmp_path.glob("[0-9]"))) == 2, 120)
        assert files, "the ranks did not start within 120 s"
        pids = [int(p.read_text()) for p in sorted(tmp_path.glob("[0-9]"))]
        assert all(map(process_alive, pids))
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        killed = time.monotonic()
        gone = _wait_for(lambda: not any(map(process_alive, pids)), 10)
        took = time.monotonic() - killed
        assert gone and took < 5.0, f"ranks {pids} still ran {took:.1f} s after the launcher died"
    finally:
        with_pids = [p for p in pids if process_alive(p)]
        for pid in with_pids:  # what the test started, by pid
            os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


KEYS = ["RANK", "WORLD_SIZE", "MASTER_PORT", "OMP_NUM_THREADS", "RINGTREE_TEST_MARK"]


def _describe(start: str) -> list[dict]:
    env = {"PYTHONPATH": str(HERE), "RINGTREE_RANK_START": start, "OMP_NUM_THREADS": "3",
           "RINGTREE_TEST_MARK": start}
    out = launch_body(2, "gloo", "launch_cases:describe", {"keys": KEYS, "tests": str(HERE)},
                      timeout_s=120, env=env)
    assert out.ok, out.failure_message(120)
    assert [r.error for r in out.ranks] == ["hello from rank 0", "hello from rank 1"]
    return [r.result for r in out.ranks]


def test_a_forked_rank_is_what_a_fresh_python_would_have_been():
    forked, spawned = _describe("fork"), _describe("spawn")
    assert [r["parent"] for r in spawned] == [os.getpid()] * 2  # fresh Pythons: children
    assert all(r["parent"] != os.getpid() for r in forked)  # forks of the server
    for r in (*forked, *spawned):
        r.pop("parent")
        assert r["env"].pop("MASTER_PORT").isdigit()
        assert r["env"].pop("RINGTREE_TEST_MARK") in ("fork", "spawn")
    assert forked == spawned
    assert forked[1] == {"env": {"RANK": "1", "WORLD_SIZE": "2", "OMP_NUM_THREADS": "3"},
                         "own_group": True, "cwd": os.getcwd(), "tests_on_path": True,
                         "threads": min(3, os.cpu_count() or 1), "stdin": "/dev/null",
                         "rank": 1}


def test_a_script_without_a_main_guard_launches_once(tmp_path):
    """A forked rank never runs the launching script again (multiprocessing's forkserver
    re-imports the main module in every child: this script would launch from each rank)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from ringtree.procs.launch import launch_body\n"
        "out = launch_body(2, 'gloo', 'launch_cases:describe', {'keys': [], 'tests': ''},\n"
        f"                  timeout_s=120, env={{'PYTHONPATH': {str(HERE)!r}}})\n"
        "print('launched', out.ok)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180)
    assert (proc.returncode, proc.stdout) == (0, "launched True\n"), proc.stderr[-2000:]


def test_a_dead_fork_server_ends_the_launch_and_its_ranks(tmp_path):
    import threading

    from ringtree.procs import forked

    cfg = {"pid_dir": str(tmp_path), "sleep_s": 120, "timeout_s": 60}
    done: list = []
    launcher = threading.Thread(target=lambda: done.append(launch_body(
        2, "gloo", "launch_cases:linger", cfg, timeout_s=120, env={"PYTHONPATH": str(HERE)})))
    launcher.start()
    assert _wait_for(lambda: len(list(tmp_path.glob("[0-9]"))) == 2, 60), "no ranks started"
    pids = [int(p.read_text()) for p in sorted(tmp_path.glob("[0-9]"))]
    assert forked._server is not None
    os.kill(forked._server.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    launcher.join(60)
    assert not launcher.is_alive() and time.monotonic() - killed < 15
    assert not done[0].ok and _wait_for(lambda: not any(map(process_alive, pids)), 5)


def test_a_bad_rank_start_is_one_line_before_any_rank_starts():
    with pytest.raises(RingtreeError, match=r"^RINGTREE_RANK_START='vfork' is not valid: "
                                            r"expected fork or spawn$"):
        launch_body(2, "gloo", "launch_cases:describe", {}, timeout_s=60,
                    env={"RINGTREE_RANK_START": "vfork"})


def test_a_rank_s_internal_error_comes_with_its_traceback(capfd):
    out = launch_body(2, "gloo", "launch_cases:crash", {}, timeout_s=120,
                      env={"PYTHONPATH": str(HERE)})
    assert out.failure_message(120) == "rank 1: internal error: ValueError: a bug in a body"
    err = capfd.readouterr().err.splitlines()
    assert err[0] == "Traceback (most recent call last):", err
    assert err[-1] == "ValueError: a bug in a body" and any("launch_cases.py" in ln for ln in err)


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4/ip_local_port_range").exists(),
                    reason="Linux's ephemeral port range")
def test_a_free_port_is_below_the_ephemeral_range_and_bindable():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in {free_port() for _ in range(20)}:
        assert 1024 <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_process_alive_tells_a_zombie_from_a_live_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_alive(child.pid)
        child.kill()
        # killed, not yet reaped: a zombie
        assert _wait_for(lambda: not process_alive(child.pid), 5)
    finally:
        child.kill()
        child.wait()
    assert not process_alive(child.pid)
    assert process_alive(os.getpid())
