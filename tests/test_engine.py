"""The engine on real processes (127.0.0.1): gloo and MPI contract suites, ``ringtree run``,
a peer killed mid-collective. Process start-up costs seconds, so each process group runs a
whole batch of cases (tests/engine_cases.py) and the tests here stay few."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import refused, run_main
from needs import MPI_MISSING
from ringtree.procs.launch import free_port, gpu_count, launch_body
from ringtree.procs.run import oversubscription_warning

HERE = Path(__file__).parent
RINGTREE = [sys.executable, "-m", "ringtree.cli"]


NO_GPU = gpu_count() == 0


def run_suite(n: int, backend: str) -> None:
    # gloo's silent-peer case leaves the group broken: its ranks leave without closing it.
    # MPI's ranks finalize: one that left without it made mpirun kill the others, sometimes
    # before a slower one had written its result (a rank with no result, 2 runs in ~20)
    cfg = {"seed": n, "timeout_s": 30, "keep_group": backend == "gloo"}
    out = launch_body(n, backend, "engine_cases:run_cases", cfg, timeout_s=240,
                      env={"PYTHONPATH": str(HERE)})
    for r in out.ranks:  # a rank's own failure first: it explains a peer's timeout
        assert not (r.result and r.result["failures"]), r.result["failures"][0]
    assert not out.timed_out
    for r in out.ranks:
        assert r.status == 0 and r.result is not None, f"rank {r.rank}: {r.error}"
        assert r.result["cases"] > 200
        assert r.result["failures"] == [], r.result["failures"][0]


@pytest.mark.multiproc
@pytest.mark.parametrize("n", [2, 3, 4])
def test_gloo_every_collective_and_algorithm_matches_torch_distributed(n):
    run_suite(n, "gloo")


@pytest.mark.multiproc
@pytest.mark.skipif(MPI_MISSING, reason="mpi4py/mpirun not installed (pip install ringtree[mpi])")
@pytest.mark.parametrize("n", [2, 3, 4])
def test_mpi_every_collective_and_algorithm_matches_mpi(n):
    run_suite(n, "mpi")


@pytest.mark.multiproc
@pytest.mark.skipif(NO_GPU, reason="no CUDA GPU (more ranks than GPUs share them)")
@pytest.mark.parametrize("n", [2, 3, 4])
def test_nccl_every_collective_and_algorithm_matches_nccl(n):
    run_suite(n, "nccl")


@pytest.mark.multiproc
def test_run_json_reports_correctness_time_prediction_and_bytes(capsys):
    out = run_main(capsys, "run", "-n", "3", "reduce-scatter", "--size", "1000B",
                   "--algorithm", "ring", "--iters", "3", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["correct"] is True and d["algorithm"] == "ring"
    assert d["time_s"] > 0 and d["predicted_s"] > 0 and len(d["times_s"]) == 3
    # 250 floats over 3 ranks: blocks 84, 83, 83; rank r sends the two blocks it passes on
    assert [r["rank"] for r in d["ranks"]] == [0, 1, 2]
    for r in d["ranks"]:
        assert r["bytes_sent"] == r["bytes_sent_schedule"] > 0


@pytest.mark.multiproc
def test_run_takes_ranks_per_node_for_hierarchical(capsys):
    out = run_main(capsys, "run", "-n", "4", "all-reduce", "--algorithm", "hierarchical",
                   "--ranks-per-node", "2", "--size", "64KiB", "--iters", "2", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["correct"] is True and d["algorithm"] == "hierarchical"
    assert all(r["bytes_sent"] == r["bytes_sent_schedule"] > 0 for r in d["ranks"])


@pytest.mark.multiproc
@pytest.mark.skipif(MPI_MISSING, reason="mpi4py/mpirun not installed (pip install ringtree[mpi])")
def test_run_over_mpi_prints_the_table(capsys):
    out = run_main(capsys, "run", "-n", "2", "--backend", "mpi", "broadcast", "--root", "1",
                   "--size", "64KiB", "--iters", "2")
    assert out.returncode == 0, out.stderr
    assert "result: correct (verified against MPI's own broadcast" in out.stdout
    assert out.stdout.count(" yes ") == 2


def tagged_env() -> tuple[dict[str, str], bytes]:
    """An environment that marks the ranks a test starts (they inherit it), and the mark."""
    tag = f"RINGTREE_TEST_RUN={os.getpid()}-{time.monotonic_ns()}"
    return {**os.environ, tag.split("=")[0]: tag.split("=")[1]}, tag.encode()


def worker_pids(tag: bytes) -> set[int]:
    """The rank processes (ringtree.procs.rank) whose environment holds ``tag`` -- this test's,
    not those of another suite running on the machine -- and the fork server they came from
    (ringtree.procs.forkserver, whose command line names the rank main), which holds the same."""
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (b"ringtree.procs.rank" in (d / "cmdline").read_bytes()
                        and tag in (d / "environ").read_bytes().split(b"\0")):
                    pids.add(int(d.name))
            except OSError:
                pass
    return pids


@pytest.mark.multiproc
@pytest.mark.skipif(NO_GPU, reason="no CUDA GPU")
def test_ddp_hook_over_nccl_gives_torch_gradients_bitwise():
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         str(HERE / "ddp_nccl_script.py")],
        capture_output=True, text=True, timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert sorted(d["rank"] for d in lines) == [0, 1]
    for d in lines:  # one bucket of 136,714 fp32 gradients; the ring sends S/2 twice
        assert d["equal"] and d["buckets"] == 1
        assert d["bytes"] == 136_714 * 4 and d["bytes_sent"] == d["bytes"]


@pytest.mark.multiproc
@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to list processes")
def test_a_killed_rank_fails_every_other_rank_fast_and_leaves_nothing_behind(run_cli):
    env, tag = tagged_env()
    start = time.monotonic()
    out = run_cli("run", "-n", "4", "all-reduce", "--algorithm", "ring", "--size", "4MiB",
                  "--kill-rank", "3", "--timeout", "3s", env=env)
    elapsed = time.monotonic() - start
    assert out.returncode == 1
    msg = out.stderr
    assert msg.startswith("ringtree: error: rank 3 died (signal 9)"), msg
    for r in (0, 1, 2):  # every survivor says which peer and which step
        line = next(p for p in msg.split("; ") if p.startswith(f"rank {r}: "))
        assert "step" in line and "rank" in line[len(f"rank {r}: ") :]
    assert "Traceback" not in msg
    assert elapsed < 3 + 30  # the per-call timeout plus process start-up on 2 cores
    time.sleep(0.2)
    assert worker_pids(tag) == set()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-n", "2", "all-reduce", "--dtype", "int16"], "dtype 'int16' is not offered"),
        (["-n", "2", "all-reduce", "--size", "6B"], "not a whole number of float32 elements"),
        (["-n", "2", "all-reduce", "--kill-rank", "2"], "--kill-rank 2 is not a rank"),
        (["-n", "2", "reduce", "--root", "3"], "root 3 is not a rank of 0..1"),
        (["-n", "2", "all-reduce", "--op", "max", "--dtype", "bf16", "--backend", "mpi"],
         "not offered by run --backend mpi"),
        (["-n", "2", "all-reduce", "--algorithm", "nope"], "unknown algorithm 'nope'"),
        (["-n", "0", "all-reduce"], "expected a whole number >= 1"),
    ],
)
def test_run_rejects_bad_input_without_starting_processes(args, expected, capsys):
    assert expected in refused(capsys, ["run", *args])  # in this process: none may start


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_run_over_nccl_without_a_gpu_says_so(capsys):
    assert "backend nccl needs a CUDA GPU" in refused(capsys, ["run", "-n", "2", "all-reduce",
                                                               "--backend", "nccl"])


def test_oversubscription_warning_above_four_ranks_per_core():
    cores = os.cpu_count() or 1
    assert oversubscription_warning(4 * cores) is None
    assert "more than 4 per core" in oversubscription_warning(4 * cores + 1)


@pytest.mark.multiproc
def test_demo_traces_verifies_and_compares_with_the_model(capsys):
    out = run_main(capsys, "demo")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "ring all-reduce on 4 ranks" in text and "step 6" in text
    assert "verified against torch.distributed" in text
    assert "equal to the schedule's" in text
    assert "measured" in text and "predicted" in text


@pytest.mark.multiproc
def test_inside_a_program_started_by_torchrun():
    free = str(free_port())
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
         "--master-addr", "127.0.0.1", "--master-port", free, str(HERE / "torchrun_script.py")],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert sorted(d["rank"] for d in lines) == [0, 1]
    for d in lines:
        assert d["sum"] == 3.0 and d["max"] == [0, 2, 4, 6, 8, 10]


@pytest.mark.multiproc
@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to list processes")
def test_a_terminated_run_stops_the_processes_it_started():
    env, tag = tagged_env()
    proc = subprocess.Popen(
        [*RINGTREE, "run", "-n", "2", "all-reduce", "--size", "64KiB",
         "--iters", "10000", "--no-check"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while len(worker_pids(tag)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        started = worker_pids(tag)
        assert len(started) >= 2, f"the ranks never started: {started}"
        proc.terminate()
        rc = proc.wait(timeout=30)
        assert rc == 128 + 15, (rc, proc.stderr.read().decode()[-2000:])
        deadline = time.monotonic() + 10
        while worker_pids(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not worker_pids(tag), "ranks left running after SIGTERM"
    finally:
        proc.kill()
        proc.wait()
        for pid in worker_pids(tag):  # whatever a failure left behind, this test's only
            os.kill(pid, 9)
