"""The torch-shaped API on in-process ranks: semantics, buffers, async, bad input, mismatch."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist

import ringtree
from needs import MPI_MISSING
from ringtree import MismatchError, RingtreeError
from ringtree.runtime import LocalTransport, api, run_ranks


def test_all_reduce_in_place_on_torch_and_numpy():
    def body(t: LocalTransport) -> tuple[torch.Tensor, np.ndarray]:
        a = torch.arange(6, dtype=torch.float32).reshape(2, 3) + 10 * t.rank
        b = np.full(5, t.rank + 1, dtype=np.int64)
        assert ringtree.all_reduce(a, group=t) is None
        ringtree.all_reduce(b, op=ringtree.ReduceOp.PRODUCT, group=t)
        return a, b

    for a, b in run_ranks(3, body):
        assert a.shape == (2, 3)
        assert torch.equal(a, torch.arange(6, dtype=torch.float32).reshape(2, 3) * 3 + 30)
        np.testing.assert_array_equal(b, np.full(5, 6))


def test_parameters_that_require_grad_are_written_in_place_like_torch_does():
    def body(t: LocalTransport) -> torch.nn.Parameter:
        p = torch.nn.Parameter(torch.full((2, 3), float(t.rank + 1)))
        ringtree.all_reduce(p, group=t)  # 1 + 2 + 3
        with torch.no_grad():
            p.add_(t.rank)  # ranks now differ: 6, 7, 8
        ringtree.broadcast(p, src=2, group=t)
        return p

    for p in run_ranks(3, body):
        assert p.requires_grad and p.grad is None
        assert torch.equal(p.detach(), torch.full((2, 3), 8.0))


def test_torch_reduce_op_and_avg_floor_for_integers():
    def body(t: LocalTransport) -> tuple[np.ndarray, np.ndarray]:
        x = np.array([t.rank, 7], dtype=np.int32)
        y = np.array([t.rank, 7], dtype=np.float64)
        ringtree.all_reduce(x, op=dist.ReduceOp.MAX, group=t)
        ringtree.all_reduce(y, op="avg", group=t)
        return x, y

    for x, y in run_ranks(4, body):
        np.testing.assert_array_equal(x, [3, 7])
        np.testing.assert_allclose(y, [1.5, 7.0])


def test_reduce_scatter_all_gather_broadcast_reduce_semantics():
    n = 3

    def body(t: LocalTransport) -> dict[str, object]:
        r = t.rank
        x = torch.arange(7, dtype=torch.float64) * (r + 1)  # 7 over 3 ranks: blocks 3, 2, 2
        keep = x.clone()
        rs = torch.empty([3, 2, 2][r], dtype=torch.float64)
        ringtree.reduce_scatter(rs, x, group=t)
        ag = torch.empty(7, dtype=torch.float64)
        ringtree.all_gather(ag, rs, group=t)
        bc = torch.full((4,), float(r))
        ringtree.broadcast(bc, src=2, group=t)
        red = torch.full((4,), float(r + 1))
        ringtree.reduce(red, dst=1, group=t)
        return {"x": x, "keep": keep, "ag": ag, "bc": bc, "red": red}

    out = run_ranks(n, body)
    total = torch.arange(7, dtype=torch.float64) * 6
    for o in out:
        assert torch.equal(o["x"], o["keep"])  # reduce-scatter leaves its input alone
        assert torch.equal(o["ag"], total)
        assert torch.equal(o["bc"], torch.full((4,), 2.0))
    assert torch.equal(out[1]["red"], torch.full((4,), 6.0))
    assert torch.equal(out[0]["red"], torch.full((4,), 1.0))  # non-roots keep their input


def test_async_handles_complete_in_call_order():
    def body(t: LocalTransport) -> list[float]:
        xs = [np.full(1000, float(i + t.rank)) for i in range(3)]
        works = [ringtree.all_reduce(x, group=t, async_op=True) for x in xs[:2]]
        ringtree.all_reduce(xs[2], group=t)  # a sync call waits behind the async ones
        assert all(isinstance(w, ringtree.Work) for w in works)
        assert all(w.wait() for w in works) and all(w.is_completed() for w in works)
        return [float(x[0]) for x in xs]

    for got in run_ranks(2, body):
        assert got == [1.0, 3.0, 5.0]


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda t: ringtree.reduce_scatter(np.empty(5), np.ones(8), group=t),
         "reduce-scatter output has 5 elements; rank "),
        (lambda t: ringtree.all_gather(np.empty(8), np.ones(3), group=t),
         "all-gather input has 3 elements"),
        (lambda t: api.collective("all-reduce", np.ones(8), np.empty(5), group=t),
         "all-reduce output has 5 elements; its input has 8"),
        (lambda t: api.collective("reduce", np.ones(8), np.empty(9), root=1, group=t),
         "reduce output has 9 elements; its input has 8"),
        (lambda t: ringtree.reduce_scatter(np.empty(4, np.float32), np.ones(8), group=t),
         "output dtype float32 differs from input dtype float64"),
        (lambda t: ringtree.all_reduce(np.ones(4, dtype=bool), group=t),
         "dtype bool cannot be reduced with sum: it accepts min, max"),
        (lambda t: ringtree.all_reduce(np.ones(4, dtype=np.complex64), op="max", group=t),
         "dtype complex64 cannot be reduced with max"),
        (lambda t: ringtree.all_reduce(np.ones(4, dtype=np.uint16), group=t),
         "dtype uint16 is not supported"),
        (lambda t: ringtree.all_reduce(torch.ones(4, 4).t(), group=t),
         "input must be contiguous"),
        (lambda t: ringtree.broadcast(np.ones(4), src=5, group=t),
         "src=5 is not a rank of this group: its global ranks are 0..1"),
        (lambda t: ringtree.all_reduce(np.ones(4), algorithm="bogus", group=t),
         "unknown algorithm 'bogus' for all-reduce"),
        (lambda t: ringtree.all_reduce(np.ones(4), timeout=0, group=t),
         "timeout must be > 0 seconds"),
        (lambda t: ringtree.all_reduce([1, 2], group=t),
         "input must be a torch tensor or a numpy array, got list"),
    ],
)
def test_bad_input_is_a_one_line_error_before_any_message(call, expected):
    def body(t: LocalTransport) -> int:
        with pytest.raises(RingtreeError) as info:
            call(t)
        assert expected in str(info.value) and "\n" not in str(info.value)
        return t.messages_sent

    assert run_ranks(2, body) == [0, 0]


def test_mismatched_size_names_the_odd_rank_on_every_rank():
    def body(t: LocalTransport) -> str:
        x = np.ones(1000 if t.rank == 2 else 1024, dtype=np.float32)
        with pytest.raises(MismatchError) as info:
            ringtree.all_reduce(x, group=t, check=True, timeout=10)
        assert info.value.ranks == [2]
        return str(info.value)

    for msg in run_ranks(4, body):
        assert "rank 2 called with count=1000" in msg
        assert "ranks 0, 1, 3 called with count=1024" in msg


def test_a_rank_rejecting_its_input_fails_its_peers_fast_when_checking():
    def body(t: LocalTransport) -> str:
        out = np.empty(3 if t.rank == 1 else 4)  # rank 1's output has the wrong size
        with pytest.raises(RingtreeError) as info:
            ringtree.reduce_scatter(out, np.ones(8), group=t, check=True, timeout=10)
        return f"{type(info.value).__name__}: {info.value}"

    msgs = run_ranks(2, body)
    # issue 15: the peers learn at once; issue 30: the rank raises what torch raises for it
    assert msgs[1].startswith("RingtreeRuntimeError: rank 1: reduce-scatter output has 3 elem")
    assert msgs[0].startswith("MismatchError") and "rank 1 rejected its input" in msgs[0]


def test_check_from_the_environment(monkeypatch):
    monkeypatch.setenv("RINGTREE_CHECK", "1")

    def body(t: LocalTransport) -> None:
        with pytest.raises(MismatchError):
            ringtree.broadcast(np.ones(4), src=t.rank, group=t, timeout=10)

    run_ranks(2, body)


@pytest.mark.multiproc
def test_importing_ringtree_does_not_import_torch_or_mpi():
    code = (
        "import sys, ringtree, ringtree.runtime; ringtree.ReduceOp; "
        "assert 'torch' not in sys.modules and 'mpi4py' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.multiproc
def test_no_process_group_is_a_clear_error():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMI", "MASTER_", "TORCHELASTIC"))}
    code = (
        "import numpy, ringtree\n"
        "try:\n    ringtree.all_reduce(numpy.ones(3))\n"
        "except ringtree.RingtreeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "no process group: call torch.distributed.init_process_group" in out.stdout


def test_torch_style_list_forms_of_all_gather_and_reduce_scatter():
    def body(t: LocalTransport) -> tuple[list[torch.Tensor], torch.Tensor]:
        blocks = [torch.empty(2, 2) for _ in range(3)]
        ringtree.all_gather(blocks, torch.full((2, 2), float(t.rank)), group=t)
        out = torch.empty(4)
        ringtree.reduce_scatter(out, [torch.ones(4) * (r + 1) for r in range(3)], group=t)
        return blocks, out

    for r, (blocks, out) in enumerate(run_ranks(3, body)):
        assert [float(b[0, 0]) for b in blocks] == [0.0, 1.0, 2.0]
        assert torch.equal(out, torch.full((4,), 3.0 * (r + 1)))


def test_list_forms_check_the_number_and_sizes_of_blocks():
    def body(t: LocalTransport) -> None:
        with pytest.raises(RingtreeError, match="a list of 1 tensors: expected one per rank"):
            ringtree.all_gather([torch.empty(2)], torch.ones(2), group=t)
        with pytest.raises(RingtreeError, match=r"blocks have \[3, 1\] elements: expected"):
            ringtree.reduce_scatter(torch.empty(2), [torch.ones(3), torch.ones(1)], group=t)

    run_ranks(2, body)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: torch.ones(4), "input is on cpu: NCCL carries CUDA tensors"),
        (lambda: np.ones(4, dtype=np.float32), "input is a numpy array: NCCL carries CUDA"),
    ],
)
def test_host_memory_on_an_nccl_group_is_a_clear_error(make, expected):
    def body(t: LocalTransport) -> int:
        t.kind = "nccl"  # what a torch transport over NCCL reports
        with pytest.raises(RingtreeError) as info:
            ringtree.all_reduce(make(), group=t, check=False)
        assert expected in str(info.value) and "\n" not in str(info.value)
        return t.messages_sent

    assert run_ranks(2, body) == [0, 0]


def test_an_output_overlapping_its_input_is_refused_on_every_call_not_just_the_first():
    def body(t: LocalTransport) -> list[str]:
        errors = []
        for _ in range(2):  # the second call of the shape finds the first's plan
            out = np.empty(8)
            ringtree.all_to_all_single(out, np.arange(8.0) + 10 * t.rank, group=t)
            for x in (np.arange(8.0), torch.arange(8.0)):  # torch: two views of one memory
                with pytest.raises(RingtreeError) as info:
                    ringtree.all_to_all_single(x, x, group=t)
                errors.append(str(info.value))
            x = np.arange(8.0)
            with pytest.raises(RingtreeError) as info:
                ringtree.reduce_scatter(x[4 * t.rank : 4 * t.rank + 4], x, group=t)
            errors.append(str(info.value))
        return errors

    for errors in run_ranks(2, body):
        assert len(errors) == 6
        assert all("output overlaps its input: pass separate buffers" in e for e in errors)


def test_all_gather_in_place_works_and_a_partial_overlap_is_a_one_line_error():
    def body(t: LocalTransport) -> torch.Tensor:
        out = torch.zeros(8, dtype=torch.bfloat16)
        out[4 * t.rank : 4 * t.rank + 4] = t.rank + 1
        ringtree.all_gather(out, out[4 * t.rank : 4 * t.rank + 4], group=t)  # torch's in-place
        bad = torch.zeros(8, dtype=torch.bfloat16)
        with pytest.raises(RingtreeError, match="not rank .'s block of it") as info:
            ringtree.all_gather(bad, bad[1:5], group=t)
        assert "\n" not in str(info.value)
        return out

    for out in run_ranks(2, body):
        assert out.tolist() == [1.0] * 4 + [2.0] * 4


def test_calls_read_their_input_in_call_order_behind_async_calls():
    def body(t: LocalTransport) -> list[list[float]]:
        a = np.full(2, t.rank + 1.0)
        w = ringtree.all_reduce(a, group=t, async_op=True)  # a becomes 3 on both ranks
        gathered = np.empty(4)
        ringtree.all_gather(gathered, a, group=t)
        parts = [np.full(2, t.rank + 1.0) for _ in range(2)]
        ws = [ringtree.all_reduce(p, group=t, async_op=True) for p in parts]
        scattered = np.empty(2)
        ringtree.reduce_scatter(scattered, parts, group=t)
        ins = [np.full(1, t.rank + 1.0) for _ in range(2)]
        ws += [ringtree.all_reduce(p, group=t, async_op=True) for p in ins]
        outs = [np.empty(1) for _ in range(2)]
        ringtree.all_to_all(outs, ins, group=t)
        src = [np.full(1, t.rank + 1.0) for _ in range(2)]
        ws += [ringtree.all_reduce(p, group=t, async_op=True) for p in src]
        got = np.empty(1)
        ringtree.scatter(got, src if t.rank == 0 else None, src=0, group=t)
        assert w.wait() and all(x.wait() for x in ws)
        return [gathered.tolist(), scattered.tolist(), [float(o[0]) for o in outs],
                got.tolist()]

    for got in run_ranks(2, body):
        assert got == [[3.0] * 4, [6.0] * 2, [3.0, 3.0], [3.0]]


@pytest.mark.parametrize(
    ("bad", "expected", "kind_of_error"),  # the type is torch's for the same input (gloo)
    [
        (lambda t: ringtree.all_gather([np.empty(2)], np.ones(2), group=t),
         "all-gather output is a list of 1 tensors", RuntimeError),
        (lambda t: ringtree.all_to_all_single(np.empty((3, 2)), np.ones((3, 2)), group=t),
         "input has 3 rows (dim 0), not a multiple of the group size 2", ValueError),
        (lambda t: ringtree.all_to_all_single(np.empty(4), np.ones(4), [1.5, 2.5], [2, 2],
                                              group=t),
         "output_split_sizes must be whole numbers", TypeError),
        (lambda t: ringtree.all_to_all([np.empty(2)], [np.ones(2)], group=t),
         "input_tensor_list holds 1 tensors: expected one per rank (2)", RuntimeError),
        (lambda t: ringtree.gather(np.ones(2), [np.empty(2), np.empty(2)], dst=0, group=t),
         "gather_list is given on a rank that is not the destination", ValueError),
        (lambda t: ringtree.broadcast(np.ones(4), src=7, group=t),
         "src=7 is not a rank of this group", RuntimeError),
    ],
)
def test_a_bad_argument_on_one_rank_fails_every_rank_now_and_the_group_stays_usable(
        bad, expected, kind_of_error):
    """The rank with the bad argument raises torch's type of error for it, its peers a
    MismatchError naming it, and the group goes on."""
    good = {
        "all-gather": lambda t: ringtree.all_gather([np.empty(2), np.empty(2)], np.ones(2),
                                                    group=t),
        "all-to-all": lambda t: ringtree.all_to_all_single(np.empty(4), np.ones(4), group=t),
        "lists": lambda t: ringtree.all_to_all([np.empty(2)] * 2, [np.ones(2)] * 2, group=t),
        "gather": lambda t: ringtree.gather(np.ones(2), [np.empty(2), np.empty(2)], dst=0,
                                            group=t),
        "broadcast": lambda t: ringtree.broadcast(np.ones(4), src=0, group=t),
    }
    same = {
        "all-gather": "all-gather",
        "rows": "all-to-all",
        "must be whole": "all-to-all",
        "input_tensor_list": "lists",
        "gather_list": "gather",
        "src=7": "broadcast",
    }
    kind = next(v for k, v in same.items() if k in expected)

    def body(t: LocalTransport) -> str:
        with pytest.raises(kind_of_error if t.rank == 1 else MismatchError) as info:
            bad(t) if t.rank == 1 else good[kind](t)
        assert isinstance(info.value, RingtreeError)  # still one line on the command line
        if t.rank == 1:
            assert not isinstance(info.value, MismatchError)
        x = np.full(3, float(t.rank))
        ringtree.all_reduce(x, group=t, timeout=10)  # the next call runs as it should
        assert x.tolist() == [1.0] * 3
        return str(info.value)

    msgs = run_ranks(2, body)
    assert expected in msgs[1] and "\n" not in msgs[1]
    assert "rank 1 rejected its input" in msgs[0]


def test_a_different_collective_is_named_with_its_algorithm():
    def body(t: LocalTransport) -> str:
        x = np.ones(8)
        with pytest.raises(MismatchError) as info:
            if t.rank == 1:
                ringtree.all_reduce(x, group=t, algorithm="recursive", timeout=10)
            else:
                ringtree.broadcast(x, src=0, group=t, algorithm="tree", timeout=10)
        return str(info.value)

    for msg in run_ranks(3, body):
        assert "rank 1 called with collective=all-reduce" in msg and "algorithm=recursive" in msg
        assert "algorithm=tree" in msg and "#" not in msg


@pytest.mark.multiproc
def test_torch_s_names_keywords_ops_p2p_objects_and_errors_as_torch_s_gloo_has_them():
    """tests/api_cases.py on 3 gloo ranks: every case bitwise torch's result, every bad
    argument torch's type of error, a group's own timeout honoured."""
    from pathlib import Path

    from ringtree.procs.launch import launch_body

    out = launch_body(3, "gloo", "api_cases:run_api", {"timeout_s": 60}, timeout_s=300,
                      env={"PYTHONPATH": str(Path(__file__).parent)})
    for r in out.ranks:  # a rank's own failures first: they explain a peer's
        assert not (r.result and r.result.get("failures")), "\n".join(r.result["failures"])
    assert out.ok, out.failure_message(300)
    assert all(r.result["cases"] >= 50 for r in out.ranks), [r.result for r in out.ranks]


def test_wait_takes_a_timedelta_and_raises_runtime_error_past_it_as_torch():
    from datetime import timedelta

    def body(t: LocalTransport) -> tuple[str, list[float]]:
        x = np.full(4, float(t.rank + 1))
        if t.rank == 1:
            import time

            time.sleep(0.5)  # the peer comes late: rank 0's short wait runs out first
        work = ringtree.all_reduce(x, group=t, async_op=True, timeout=30)
        said = ""
        if t.rank == 0:
            with pytest.raises(RuntimeError, match="timed out after 0.05 s") as info:
                work.wait(timeout=timedelta(milliseconds=50))
            said = str(info.value)
        assert work.wait(timedelta(seconds=30)) is True  # it went on: wait again
        return said, x.tolist()

    (said, x0), (_, x1) = run_ranks(2, body)
    assert said and x0 == x1 == [3.0] * 4


@pytest.mark.parametrize(
    ("call", "kind_of_error"),  # gloo checks these in its worker (a failed CHECK: RuntimeError)
    [
        (lambda t: ringtree.reduce_scatter_tensor(torch.empty(5), torch.ones(8), group=t),
         RuntimeError),
        (lambda t: ringtree.reduce_scatter_single(torch.empty(4), torch.ones(8).double(),
                                                  group=t), RuntimeError),
        (lambda t: ringtree.reduce_scatter(torch.empty(2), [torch.ones(3), torch.ones(1)],
                                           group=t), RuntimeError),
        (lambda t: ringtree.all_reduce(np.ones(4), op=ringtree.ReduceOp.BXOR, group=t),
         RuntimeError),
    ],
)
def test_errors_torch_s_gloo_raises_from_its_worker_are_runtime_errors(call, kind_of_error):
    def body(t: LocalTransport) -> None:
        with pytest.raises(kind_of_error):
            call(t)

    run_ranks(2, body)


def test_p2p_and_objects_on_in_process_ranks():
    """Thread ranks: point-to-point by tag (in posting order per pair and tag, never mixed
    with the collectives in flight), and the object collectives."""

    def body(t: LocalTransport) -> dict:
        r, n = t.rank, 3
        got = {}
        pending = ringtree.all_reduce(np.ones(4), group=t, async_op=True)
        if r == 0:
            ringtree.send(np.array([1.0, 2.0]), dst=2, group=t, tag=9)
            ringtree.send(np.array([3.0, 4.0]), dst=2, group=t, tag=9)
        if r == 2:
            a, b = np.empty(2), np.empty(2)
            got["src"] = ringtree.recv(a, src=0, group=t, tag=9), ringtree.recv(b, 0, t, 9)
            got["ab"] = a.tolist() + b.tolist()
            with pytest.raises(RingtreeError, match="receives from a given rank only"):
                ringtree.irecv(np.empty(2), group=t)
        pending.wait()
        objs = [None] * n
        ringtree.all_gather_object(objs, {"r": r}, group=t)
        got["objs"] = objs
        return got

    out = run_ranks(3, body)
    assert out[2]["src"] == (0, 0) and out[2]["ab"] == [1.0, 2.0, 3.0, 4.0]
    assert all(o["objs"] == [{"r": 0}, {"r": 1}, {"r": 2}] for o in out)


@pytest.mark.multiproc
@pytest.mark.skipif(MPI_MISSING, reason="mpi4py/mpirun not installed")
def test_mpi_ops_p2p_and_objects_under_mpi_as_mpi4py_has_them():
    from pathlib import Path

    from ringtree.procs.launch import launch_body

    out = launch_body(3, "mpi", "api_cases:run_api_mpi", {"timeout_s": 60}, timeout_s=300,
                      env={"PYTHONPATH": str(Path(__file__).parent)})
    for r in out.ranks:
        assert not (r.result and r.result.get("failures")), "\n".join(r.result["failures"])
    assert out.ok, out.failure_message(300)
