"""ringtree's API against torch.distributed's own, one rank: a body for
:mod:`ringtree.procs.rank`, started by tests/test_runtime_api.py on 3 local gloo processes.

Every case calls torch's function and ringtree's with torch's keyword names on the same
inputs (small integers: exact in any order of summation) and compares the results bitwise:
the new names (``all_gather_single`` / ``all_gather_into_tensor``, ``reduce_scatter_single`` /
``reduce_scatter_tensor``), the list forms by their keywords, the bitwise ops, point-to-point
(``send``/``recv``, any source, ``isend``/``irecv``, ``batch_isend_irecv`` of torch's own
P2POp), the ``*_object`` collectives, ``Work.wait(timedelta)``. Then bad arguments, made on
every rank alike: ringtree's error must be an instance of the type torch raises for them.
Last, a group made with ``new_group(timeout=2 s)``: ringtree's call on it, with a peer
absent, must fail within that timeout, not RINGTREE_TIMEOUT's 300 s. Returns
``{"cases": n, "failures": [...]}``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import ringtree


def run_api(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """See the module doc."""
    import torch
    import torch.distributed as dist

    warnings.simplefilter("ignore", FutureWarning)  # torch 2.13 deprecates *_tensor
    failures: list[str] = []
    same = _results(engine, torch, dist)
    for name, (theirs, ours) in same.items():
        if not _equal(theirs, ours):
            failures.append(f"rank {engine.rank} {name}: torch {theirs!r}, ringtree {ours!r}")
    errors = _errors(engine, torch, dist)
    for name, call in errors.items():
        want, got = _raised(call(dist)), _raised(call(ringtree))
        dist.barrier()
        if want is None or got is None or not isinstance(got, type(want)):
            failures.append(f"rank {engine.rank} {name}: torch {want!r}, ringtree {got!r}")
    failures += _group_timeout(engine, dist)
    return {"cases": len(same) + len(errors) + 1, "failures": failures}


def _results(e: Any, torch: Any, dist: Any) -> dict[str, tuple[Any, Any]]:
    """Case name -> (torch's result, ringtree's) for calls that must agree bitwise."""
    n, r = e.size, e.rank
    out: dict[str, tuple[Any, Any]] = {}

    def both(name: str, fn: Callable[[Any], Any]) -> None:
        out[name] = (fn(dist), fn(ringtree))

    def x(k: int = 6, dtype: Any = torch.float32) -> Any:
        return (torch.arange(k * n) % 7 + r * 3).to(dtype)

    for fn in ("all_gather_into_tensor", "all_gather_single"):
        both(fn, lambda m, fn=fn: _ret(lambda o: getattr(m, fn)(
            output_tensor=o, input_tensor=x(2)[:2]), torch.empty(2 * n)))
    for fn in ("reduce_scatter_tensor", "reduce_scatter_single"):
        both(fn, lambda m, fn=fn: _ret(lambda o: getattr(m, fn)(
            output=o, input=x(), op=m.ReduceOp.SUM), torch.empty(6)))
    both("all_gather(tensor_list=, tensor=)", lambda m: _ret(lambda ts: m.all_gather(
        tensor_list=ts, tensor=x(1)[:3], group=None, async_op=False),
        [torch.empty(3) for _ in range(n)]))
    both("reduce_scatter(output=, input_list=)", lambda m: _ret(lambda o: m.reduce_scatter(
        output=o, input_list=list(x(2).split(2)), op=m.ReduceOp.MAX), torch.empty(2)))
    for op in ("BAND", "BOR", "BXOR"):
        for dtype in (torch.int32, torch.uint8, torch.int64):
            both(f"all_reduce {op} {dtype}", lambda m, op=op, dtype=dtype: _ret(
                lambda t: m.all_reduce(tensor=t, op=getattr(m.ReduceOp, op)), x(5, dtype)))
    both("broadcast async wait(timedelta)", lambda m: _ret(lambda t: m.broadcast(
        tensor=t, src=n - 1, async_op=True).wait(timeout=timedelta(seconds=30)), x()))
    reduced = [_ret(lambda t, m=m: m.reduce(tensor=t, dst=1, op=m.ReduceOp.PRODUCT),
                    x() % 2 + 1) for m in (dist, ringtree)]
    out["reduce(tensor=, dst=, op=)"] = (reduced[0], reduced[1]) if r == 1 else (0, 0)
    both("gather(gather_list=, dst=)", lambda m: _ret(lambda ts: m.gather(
        tensor=x(1)[:2], gather_list=ts, dst=0), [torch.empty(2) for _ in range(n)]
        if r == 0 else None))
    both("scatter(scatter_list=, src=)", lambda m: _ret(lambda t: m.scatter(
        tensor=t, scatter_list=list(x(2).split(2)) if r == 1 else None, src=1),
        torch.empty(2)))
    both("all_to_all_single(split sizes)", lambda m: _ret(lambda o: m.all_to_all_single(
        output=o, input=x(n)[: n * (r + 1)], output_split_sizes=[s + 1 for s in range(n)],
        input_split_sizes=[r + 1] * n), torch.empty(sum(range(1, n + 1)))))
    both("all_to_all(output_tensor_list=)", lambda m: _ret(lambda ts: m.all_to_all(
        output_tensor_list=ts, input_tensor_list=list(x(1)[:n].split(1))),
        [torch.empty(1) for _ in range(n)]))
    both("barrier(timeout=)", lambda m: m.barrier(group=None, async_op=False, device_ids=None,
                                                   timeout=timedelta(seconds=30)))
    out.update(_p2p(e, torch, dist, x))
    out.update(_objects(e, dist))
    return out


def _p2p(e: Any, torch: Any, dist: Any, x: Callable) -> dict[str, tuple[Any, Any]]:
    n, r = e.size, e.rank
    nxt, prv = (r + 1) % n, (r - 1) % n
    out: dict[str, tuple[Any, Any]] = {}

    def pair(m: Any) -> Any:  # rank 0 sends, rank 1 receives (blocking)
        got = torch.zeros(4)
        if r == 0:
            m.send(tensor=x(2)[:4] + 100, dst=1, tag=7)
        elif r == 1:
            return m.recv(tensor=got, src=0, tag=7), got
        return None

    def any_source(m: Any) -> Any:  # rank n-1 receives from whoever sends (rank 0)
        got, sender = torch.zeros(2), None
        if r == 0:
            m.send(x(1)[:2], n - 1, tag=5)
        elif r == n - 1:
            sender = m.recv(got, tag=5)
        dist.barrier()  # no other message of tag 5 can reach rank n-1's receive
        return sender, got

    def ring(m: Any) -> Any:  # isend/irecv around the ring, waited in reverse order
        got = torch.zeros(3)
        works = [m.irecv(got, src=prv), m.isend(x(1)[:3], dst=nxt)]
        for w in reversed(works):
            w.wait()
        return got

    def batch(m: Any) -> Any:  # torch's own P2POp, receives listed first
        got = [torch.zeros(2), torch.zeros(2)]
        ops = [dist.P2POp(dist.irecv, got[0], prv), dist.P2POp(dist.irecv, got[1], nxt),
               dist.P2POp(dist.isend, x(2)[:2], nxt), dist.P2POp(dist.isend, x(2)[2:4], prv)]
        for w in m.batch_isend_irecv(ops):
            w.wait()
        return got

    for name, fn in (("send/recv tag", pair), ("recv any source", any_source),
                     ("isend/irecv ring", ring), ("batch_isend_irecv", batch)):
        out[name] = (fn(dist), fn(ringtree))
    return out


def _objects(e: Any, dist: Any) -> dict[str, tuple[Any, Any]]:
    n, r = e.size, e.rank
    mine = {"rank": r, "payload": "x" * (10 * r), "nested": [r, (r, str(r))]}

    def bcast(m: Any) -> Any:
        objs = [mine, r, "s"] if r == 1 else [None, None, None]
        m.broadcast_object_list(objs, src=1)
        return objs

    def gathered(m: Any) -> Any:
        objs = [None] * n
        m.all_gather_object(objs, mine)
        return objs

    def gather(m: Any) -> Any:
        objs = [None] * n if r == n - 1 else None
        m.gather_object(mine, objs, dst=n - 1)
        return objs

    def scatter(m: Any) -> Any:
        out = [None]
        m.scatter_object_list(out, [{"to": k, "pad": "y" * k} for k in range(n)] if r == 0
                              else None, src=0)
        return out

    return {name: (fn(dist), fn(ringtree)) for name, fn in (
        ("broadcast_object_list", bcast), ("all_gather_object", gathered),
        ("gather_object", gather), ("scatter_object_list", scatter))}


def _errors(e: Any, torch: Any, dist: Any) -> dict[str, Callable[[Any], Callable[[], Any]]]:
    """Bad arguments given on every rank alike: name -> (module -> the call). Left out: the
    reduce-scatters whose sizes or dtypes torch's gloo checks in its worker thread (a failed
    CHECK that breaks the group's connections); test_runtime_api.py checks ringtree's type
    for them (RuntimeError, as gloo's CHECK raises)."""
    r, T = e.rank, torch
    f32, f64 = T.float32, T.float64
    return {
        "all_gather_into_tensor: output too big": lambda m: lambda: m.all_gather_into_tensor(
            T.empty(10), T.ones(3)),
        "all_gather_into_tensor: dtypes": lambda m: lambda: m.all_gather_into_tensor(
            T.empty(9, dtype=f32), T.ones(3, dtype=f64)),
        "all_to_all_single: dtypes": lambda m: lambda: m.all_to_all_single(
            T.empty(3, dtype=f64), T.ones(3)),
        "all_reduce: max of complex": lambda m: lambda: m.all_reduce(
            T.ones(4, dtype=T.complex64), op=m.ReduceOp.MAX),
        "all_reduce: band of float": lambda m: lambda: m.all_reduce(
            T.ones(4), op=m.ReduceOp.BAND),
        "all_reduce: uint16": lambda m: lambda: m.all_reduce(T.ones(4, dtype=T.uint16)),
        "all_reduce: a list": lambda m: lambda: m.all_reduce([1, 2]),
        "all_reduce: op name": lambda m: lambda: m.all_reduce(T.ones(2), op="bogus"),
        "broadcast: src outside": lambda m: lambda: m.broadcast(T.ones(4), src=5),
        "broadcast: src and group_src": lambda m: lambda: m.broadcast(T.ones(4), src=0,
                                                                       group_src=0),
        "broadcast: src a float": lambda m: lambda: m.broadcast(T.ones(2), src=0.0),
        "broadcast: group_src outside": lambda m: lambda: m.broadcast(T.ones(2), group_src=5),
        "all_gather: list length": lambda m: lambda: m.all_gather([T.empty(2)], T.ones(2)),
        "all_gather: list sizes": lambda m: lambda: m.all_gather(
            [T.empty(3), T.empty(2), T.empty(2)], T.ones(2)),
        "reduce_scatter: list length": lambda m: lambda: m.reduce_scatter(
            T.empty(2), [T.ones(2)]),
        "all_to_all_single: float splits": lambda m: lambda: m.all_to_all_single(
            T.empty(3), T.ones(3), [1.5, 1, 0.5], [1, 1, 1]),
        "all_to_all_single: splits sum": lambda m: lambda: m.all_to_all_single(
            T.empty(3), T.ones(3), [1, 1, 1], [2, 2, 2]),
        "all_to_all: list length": lambda m: lambda: m.all_to_all([T.empty(2)], [T.ones(2)]),
        "gather: no gather_list at dst": lambda m: lambda: m.gather(T.ones(2), None, dst=r),
        "scatter: no scatter_list at src": lambda m: lambda: m.scatter(T.ones(2), None, src=r),
        "send: to itself": lambda m: lambda: m.send(T.ones(2), dst=r),
        "isend: a list": lambda m: lambda: m.isend([1], dst=(r + 1) % e.size),
        "broadcast_object_list: not a list": lambda m: lambda: m.broadcast_object_list(3, 0),
        "scatter_object_list: empty output": lambda m: lambda: m.scatter_object_list(
            [], [1, 2, 3], src=0),
        "batch_isend_irecv: not P2POp": lambda m: lambda: m.batch_isend_irecv([1]),
    }


def _group_timeout(e: Any, dist: Any) -> list[str]:
    """A group with a 2 s timeout: rank 0 calls alone and must fail within it."""
    import torch

    slow = dist.new_group(list(range(e.size)), timeout=timedelta(seconds=2))
    failures = []
    if e.rank == 0:
        start = time.monotonic()
        try:
            ringtree.all_reduce(torch.ones(4), group=slow)
            failures.append("rank 0: a call with its peers absent returned")
        except ringtree.PeerError as error:
            took = time.monotonic() - start
            if not (1.5 < took < 6 and "within the 2 s timeout" in str(error)):
                failures.append(f"rank 0: the 2 s group timeout gave up after {took:.1f} s: "
                                f"{error}")
    dist.barrier()
    return failures


def _ret(call: Callable[[Any], Any], buf: Any) -> Any:
    """``buf`` after ``call(buf)`` (copied: the two runs must not share it)."""
    call(buf)
    if buf is None:
        return None
    return [b.clone() for b in buf] if isinstance(buf, list) else buf.clone()


def _raised(call: Callable[[], Any]) -> BaseException | None:
    try:
        call()
    except Exception as e:  # noqa: BLE001 - compared by type
        return e
    return None


def _equal(a: Any, b: Any) -> bool:
    """Bitwise equality of nested tensors, lists, tuples and plain values."""
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, list | tuple):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_equal(x, y) for x, y in zip(a, b, strict=True)))
    return a == b


def run_api_mpi(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """Under MPI: mpi4py's ops as ``op`` (bitwise MPI's own result), point-to-point by tag
    and from any source, and the object collectives, against mpi4py's own."""
    import numpy as np

    comm, MPI, n, r = engine.comm, engine.MPI, engine.size, engine.rank
    failures: list[str] = []

    def check(name: str, ours: Any, theirs: Any) -> None:
        same = (np.array_equal(ours, theirs) if isinstance(ours, np.ndarray)
                else ours == theirs)
        if not same:
            failures.append(f"rank {r} {name}: MPI {theirs!r}, ringtree {ours!r}")

    for op in ("SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "BXOR"):
        x = (np.arange(7, dtype=np.int32) * 5 + r * 3) % 13 + 1
        want = np.empty_like(x)
        comm.Allreduce(x, want, op=getattr(MPI, op))
        ringtree.all_reduce(x, op=getattr(MPI, op))
        check(f"all_reduce op=MPI.{op}", x, want)
    got = np.zeros(3)
    if r == 0:
        ringtree.send(np.arange(3.0) + 1, dst=n - 1, tag=4)
    elif r == n - 1:
        check("recv any source: sender", ringtree.recv(got, tag=4), 0)
        check("recv any source: data", got, np.arange(3.0) + 1)
    ringtree.barrier()
    nxt, prv = (r + 1) % n, (r - 1) % n
    ring = np.zeros(2)
    works = ringtree.batch_isend_irecv([
        ringtree.P2POp(ringtree.irecv, ring, prv), ringtree.P2POp(ringtree.isend,
                                                                   np.full(2, float(r)), nxt)])
    for w in works:
        w.wait()
    check("batch ring", ring, np.full(2, float(prv)))
    mine = {"rank": r, "pad": "z" * r}
    objs = [None] * n
    ringtree.all_gather_object(objs, mine)
    check("all_gather_object", objs, comm.allgather(mine))
    listed = [mine, 7] if r == 1 else [None, None]
    ringtree.broadcast_object_list(listed, src=1)
    check("broadcast_object_list", listed, comm.bcast([mine, 7] if r == 1 else None, root=1))
    return {"cases": 12, "failures": failures}
