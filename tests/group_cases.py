"""The group contract suite, one rank: a body for :mod:`ringtree.procs.rank`, started by
tests/test_groups.py on N local processes (gloo or MPI).

Groups of every kind a training script makes -- a subgroup that leaves rank 0 out, a pair,
overlapping and disjoint groups, groups made before and after ringtree's first call, a group
made with ``use_local_synchronization=True`` by its members only after that call, the groups
of a 2-D device mesh (torch), sub-communicators from ``Split`` (MPI) -- and on each, every
collective x every algorithm with random sizes, ops, dtypes and roots (``src``/``dst`` global
ranks, as torch takes them), checked against the engine's own collective on the same group
with the same root. A rank outside a group calls too and must get what torch gives: None, its
buffer untouched. Returns ``{"cases": n, "failures": [...]}``. :func:`mismatches` and
:func:`used_shape_mismatches` are the ranks calling differently, on new and on used shapes.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ringtree.algorithms import algorithms_for
from ringtree.collectives import Collective, ReduceOp, block_bounds, block_sizes
from ringtree.procs.native import call_buffers, make_input
from ringtree.runtime import api
from ringtree.runtime.mpi import mpi_op

DTYPES = ["float32", "float64", "int32", "int64"]


def torch_groups(engine: Any) -> dict[str, Any]:
    """Every kind of torch group; each value is what this rank passes as ``group=``."""
    import torch
    import torch.distributed as dist

    n, r = engine.size, engine.rank
    made = {
        "sub123": [1, 2, 3],
        "pair02": [0, 2],
        "overlap": [2, 3, n - 1] if n > 4 else [1, 3],
        "low": [0, 1],
        "high": list(range(2, n)),
    }
    groups: dict[str, Any] = {"world": None}
    groups.update({name: dist.new_group(ranks) for name, ranks in made.items()})
    api.all_reduce(torch.ones(4), timeout=30)  # ringtree's first call, on the default group
    made["late"] = [0, n - 1]
    groups["late"] = dist.new_group(made["late"])
    # Made by its members only. torch names such a group after its ranks and the number of
    # groups each member belongs to (distributed_c10d._hash_ranks_to_str), so its members
    # must belong to as many groups: take the first pair that does.
    belongs = [sum(q in ranks for ranks in made.values()) for q in range(n)]
    local = next([a, b] for a in range(n) for b in range(a + 1, n) if belongs[a] == belongs[b])
    dist.barrier()
    if r in local:
        groups["local"] = dist.new_group(local, use_local_synchronization=True)
    else:
        groups["local"] = dist.GroupMember.NON_GROUP_MEMBER
    if n == 4:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        groups["mesh-dp"], groups["mesh-tp"] = mesh.get_group("dp"), mesh.get_group("tp")
    return groups


def mpi_groups(engine: Any) -> dict[str, Any]:
    """Sub-communicators of COMM_WORLD from ``Split`` (COMM_NULL where this rank is out)."""
    comm, mpi, n = engine.comm, engine.MPI, engine.size

    def split(members: list[int]) -> Any:
        color = 0 if engine.rank in members else mpi.UNDEFINED
        return comm.Split(color, engine.rank)

    groups = {"world": None, "sub123": split([1, 2, 3]), "pair02": split([0, 2])}
    api.all_reduce(np.ones(4), timeout=30)  # ringtree's first call, on COMM_WORLD
    groups["late"] = split([0, n - 1])
    groups["high"] = split(list(range(2, n)))
    return groups


def members(engine: Any, group: Any) -> list[int] | None:
    """The group's global ranks, None on a rank outside it."""
    if engine.backend == "mpi":
        mpi = engine.MPI
        if group is None:
            return list(range(engine.size))
        if group == mpi.COMM_NULL:
            return None
        world = mpi.COMM_WORLD.Get_group()
        return list(group.Get_group().Translate_ranks(list(range(group.Get_size())), world))
    import torch.distributed as dist

    if group is None:
        return list(range(engine.size))
    if group == dist.GroupMember.NON_GROUP_MEMBER:
        return None
    return dist.get_process_group_ranks(group)


def native(engine: Any, group: Any, col: Collective, x: Any, op: ReduceOp, root: int,
           ranks: list[int]) -> np.ndarray:
    """The engine's own collective on the group (root: a global rank)."""
    if engine.backend == "mpi":
        return _native_mpi(engine, group, col, x, op, root, ranks)
    n, me, count = len(ranks), ranks.index(engine.rank), x.numel()
    import torch
    import torch.distributed as dist

    dop = {"product": dist.ReduceOp.PRODUCT}.get(op.value, getattr(dist.ReduceOp, op.name))
    t = x.clone()
    sizes = block_sizes(count, n)
    if col is Collective.ALL_TO_ALL:
        t = torch.empty(n * sizes[me], dtype=x.dtype)
        dist.all_to_all_single(t, x.clone(), [sizes[me]] * n, sizes, group=group)
    elif col is Collective.GATHER:
        parts = [torch.empty_like(x) for _ in range(n)] if engine.rank == root else None
        dist.gather(x.clone(), parts, dst=root, group=group)
        t = torch.cat(parts) if parts is not None else x[:0]
    elif col is Collective.SCATTER:
        t = torch.empty(sizes[me], dtype=x.dtype)
        dist.scatter(t, list(x.clone().split(sizes)) if engine.rank == root else None, src=root,
                     group=group)
    elif col is Collective.BARRIER:
        dist.barrier(group=group)
        t = x[:0]
    elif col is Collective.ALL_REDUCE:
        dist.all_reduce(t, op=dop, group=group)
    elif col is Collective.BROADCAST:
        dist.broadcast(t, src=root, group=group)
    elif col is Collective.REDUCE:
        dist.reduce(t, dst=root, op=dop, group=group)
    elif col is Collective.REDUCE_SCATTER:
        dist.all_reduce(t, op=dop, group=group)  # torch's reduce-scatter needs equal blocks
        b = block_bounds(count, n)
        t = t[b[me] : b[me + 1]].clone()
    else:
        sizes = torch.tensor([x.numel()])
        all_sizes = [torch.zeros(1, dtype=sizes.dtype) for _ in range(n)]
        dist.all_gather(all_sizes, sizes, group=group)
        width = int(max(s.item() for s in all_sizes))
        padded = torch.zeros(width, dtype=x.dtype)
        padded[: x.numel()] = x
        parts = [torch.empty(width, dtype=x.dtype) for _ in range(n)]
        dist.all_gather(parts, padded, group=group)
        t = torch.cat([p[: int(s.item())] for p, s in zip(parts, all_sizes, strict=True)])
    return t.numpy()


def _native_mpi(engine: Any, group: Any, col: Collective, x: np.ndarray, op: ReduceOp,
                root: int, ranks: list[int]) -> np.ndarray:
    mpi = engine.MPI
    comm = group if group is not None else mpi.COMM_WORLD
    mop = mpi_op(op)
    n, groot = len(ranks), ranks.index(root)
    me, sizes = comm.Get_rank(), block_sizes(x.size, n)
    if col is Collective.ALL_TO_ALL:
        out = np.empty(n * sizes[me], dtype=x.dtype)
        comm.Alltoallv([x, sizes], [out, [sizes[me]] * n])
    elif col is Collective.GATHER:
        out = np.empty(n * x.size, dtype=x.dtype) if me == groot else x[:0]
        comm.Gather(x, out if me == groot else None, root=groot)
    elif col is Collective.SCATTER:
        out = np.empty(sizes[me], dtype=x.dtype)
        comm.Scatter(x if me == groot else None, out, root=groot)
    elif col is Collective.BARRIER:
        comm.Barrier()
        out = x[:0]
    elif col is Collective.ALL_REDUCE:
        out = np.empty_like(x)
        comm.Allreduce(x, out, op=mop)
    elif col is Collective.BROADCAST:
        out = x.copy()
        comm.Bcast(out, root=groot)
    elif col is Collective.REDUCE:
        out = x.copy()
        comm.Reduce(x, out if comm.Get_rank() == groot else None, op=mop, root=groot)
    elif col is Collective.REDUCE_SCATTER:
        b = block_bounds(x.size, n)
        out = np.empty(b[comm.Get_rank() + 1] - b[comm.Get_rank()], dtype=x.dtype)
        comm.Reduce_scatter(x, out, recvcounts=[b[i + 1] - b[i] for i in range(n)], op=mop)
    else:
        counts = comm.allgather(x.size)
        out = np.empty(sum(counts), dtype=x.dtype)
        comm.Allgatherv(x, [out, counts])
    return out


def cases(seed: int) -> list[dict[str, Any]]:
    """The same list on every rank: every collective x algorithm, two sizes each."""
    rng = np.random.default_rng(seed)
    out = []
    for col in Collective:
        for alg in ["auto", *algorithms_for(col)]:
            for count in (int(rng.integers(0, 9)), int(rng.integers(100, 3000))):
                # gather and scatter get a multiple of the group's size in run_case
                ops = [o for o in ReduceOp if o is not ReduceOp.AVG] if col.reduces else [None]
                op = str(rng.choice([o.value for o in ops])) if col.reduces else "sum"
                bitwise = ReduceOp.parse(op).bitwise  # integers only
                out.append({"collective": col.value, "algorithm": alg, "count": count,
                            "op": op, "root_index": int(rng.integers(0, 64)),
                            "dtype": str(rng.choice([d for d in DTYPES
                                                     if not bitwise or "int" in d]))})
    return out


def run_case(engine: Any, name: str, group: Any, case: dict[str, Any]) -> str | None:
    """None if the case passes, else what went wrong."""
    col, op = Collective.parse(case["collective"]), ReduceOp.parse(case["op"])
    ranks = members(engine, group)
    label = f"rank {engine.rank} group {name} {case}"
    if ranks is None:  # outside the group: torch's behaviour, None and nothing written
        x = np.arange(5, dtype=np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = api.collective(col, x, np.empty(5, dtype=np.float32), op, 0, group)
        if got is not None or not np.array_equal(x, np.arange(5)):
            return f"{label}: a non-member's call returned {got!r} or wrote its buffer"
        return None
    n, me = len(ranks), ranks.index(engine.rank)
    root = ranks[case["root_index"] % n]  # a global rank, as torch takes src/dst
    count = col.layout.count(case["count"], n)
    raw = make_input(col, count, case["dtype"], op, me, n)
    x = raw if engine.backend == "mpi" else _tensor(raw)
    want = native(engine, group, col, x, op, root, ranks)
    inp = x.copy() if isinstance(x, np.ndarray) else x.clone()
    inp, out = call_buffers(col, inp, count, n, me, ranks.index(root))
    api.collective(col, inp, out, op, root, group, algorithm=case["algorithm"], timeout=30)
    nothing = col in (Collective.REDUCE, Collective.GATHER) and engine.rank != root
    if nothing or col is Collective.BARRIER:
        return None
    got = np.asarray(inp if out is None else out)
    if not np.array_equal(got, want):
        return f"{label}: got {got[:6]} want {np.asarray(want)[:6]}"
    return None


def _tensor(a: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(np.ascontiguousarray(a))


def run_groups(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every case on every group (stopping at the first failure: the group may be out of
    step afterwards)."""
    groups = mpi_groups(engine) if engine.backend == "mpi" else torch_groups(engine)
    todo = cases(cfg["seed"])
    one_each = [next(c for c in todo if c["collective"] == col.value) for col in Collective]
    done = 0
    for name, group in groups.items():
        outside = members(engine, group) is None
        for case in one_each if outside else todo:  # outside: once per collective suffices
            bad = run_case(engine, name, group, case)
            done += 1
            if bad:
                return {"cases": done, "failures": [bad]}
    return {"cases": done, "failures": []}


def _array(engine: Any, values: np.ndarray) -> Any:
    return values if engine.backend == "mpi" else _tensor(values)


def mismatches(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """With the default settings, rank 1 calls differently from ranks 0 and 2 -- another
    size, dtype, collective, root, or a wrong all-gather output -- and every rank must raise
    MismatchError naming rank 1 alone. Each case is a new call shape on every rank (the
    default checks the first call of a shape)."""
    r, odd = engine.rank, 1
    f32 = np.float32

    def case_size(k: int) -> None:
        api.all_reduce(_array(engine, np.ones(1000 + k if r == odd else 1024 + k, f32)))

    def case_dtype(k: int) -> None:
        api.all_reduce(_array(engine, np.ones(64 + k, np.int32 if r == odd else f32)))

    def case_collective(k: int) -> None:
        x = _array(engine, np.ones(64 + k, f32))
        api.broadcast(x, src=0) if r == odd else api.all_reduce(x)

    def case_root(k: int) -> None:
        api.broadcast(_array(engine, np.ones(64 + k, f32)), src=odd if r == odd else 0)

    def case_output(k: int) -> None:
        n = engine.size
        out = np.empty(8 * n - (1 if r == odd else 0), f32)
        api.all_gather(_array(engine, out), _array(engine, np.ones(8, f32)))

    failures = []
    cases_ = [case_size, case_dtype, case_collective, case_root, case_output]
    for k, case in enumerate(cases_):
        try:
            case(k)
            failures.append(f"rank {r} {case.__name__}: no error")
        except Exception as e:  # noqa: BLE001 - checked below
            ok = (
                type(e).__name__ == "MismatchError" and e.ranks == [odd] and f"rank {odd}" in str(e)
            )
            if not ok:
                failures.append(f"rank {r} {case.__name__}: {type(e).__name__}: {e}")
    api.all_reduce(_array(engine, np.ones(16, f32)))  # the group still works
    return {"cases": len(cases_), "failures": failures}


#: used_shape_mismatches' cases: (name, what the others call, what the odd rank calls, the
#: shapes every rank called before); a shape is (element count, dtype)
USED_SHAPE_CASES = [
    ("count, both used", (1024, "float32"), (1000, "float32"),
     [(1024, "float32"), (1000, "float32")]),
    ("dtype, both used", (1024, "float32"), (1024, "int32"),
     [(1024, "float32"), (1024, "int32")]),
    ("bigger, both used", (256, "float32"), (512, "float32"),
     [(256, "float32"), (512, "float32")]),
    ("count, odd's new", (1024, "float32"), (900, "float32"), [(1024, "float32")]),
]


def used_shape_mismatches(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The last rank all-reduces another count or dtype than its peers on a call shape some
    ranks already used (the default check skips the exchange there): every rank must raise
    MismatchError or PeerError -- no stale data returned as success, no signal, no MPI error.
    Each case on a group of its own (a new torch group, an MPI ``Dup``), all at once
    (``async_op``), so that their timeouts overlap."""
    n, r, odd = engine.size, engine.rank, engine.size - 1

    def fresh() -> Any:
        return engine.comm.Dup() if engine.backend == "mpi" else engine.dist.new_group(
            list(range(n)))

    def buf(shape: tuple[int, str]) -> Any:
        return _array(engine, np.full(shape[0], r + 1, dtype=shape[1]))

    groups = [fresh() for _ in USED_SHAPE_CASES]
    for group, (_, _, _, before) in zip(groups, USED_SHAPE_CASES, strict=True):
        for shape in before:
            api.all_reduce(buf(shape), group=group, timeout=30)
    works = [api.all_reduce(buf(mine if r == odd else theirs), group=group, async_op=True,
                            timeout=cfg["call_timeout_s"])
             for group, (_, theirs, mine, _) in zip(groups, USED_SHAPE_CASES, strict=True)]
    failures = []
    for work, (name, *_) in zip(works, USED_SHAPE_CASES, strict=True):
        try:
            work.wait()
            failures.append(f"rank {r} {name}: the call returned as if it had succeeded")
        except Exception as e:  # noqa: BLE001 - checked below
            if type(e).__name__ not in ("MismatchError", "PeerError"):
                failures.append(f"rank {r} {name}: {type(e).__name__}: {e}")
    return {"cases": len(USED_SHAPE_CASES), "failures": failures}


def absent_peer(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """The last rank never calls (alive and silent until the others are done, or ``wait_s``):
    the others' first call on the group must raise PeerError naming it within the call's
    timeout (plus start-up slack)."""
    import os
    import time
    from pathlib import Path

    from ringtree.procs.launch import RESULT_DIR_ENV

    last, folder = engine.size - 1, Path(os.environ[RESULT_DIR_ENV])
    if engine.rank == last:
        deadline = time.monotonic() + cfg["wait_s"]
        others = [folder / f"absent-done.{r}" for r in range(last)]
        while not all(p.exists() for p in others) and time.monotonic() < deadline:
            time.sleep(0.02)
        return {"cases": 1, "failures": [], "keep": True}
    timeout_s = cfg["call_timeout_s"]
    start = time.monotonic()
    try:
        api.all_reduce(_array(engine, np.ones(8, np.float32)), timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - checked below
        took = time.monotonic() - start
        ok = type(e).__name__ == "PeerError" and f"{last}" in str(e) and e.peer == last
        if ok and took <= timeout_s + 3.0:
            return {"cases": 1, "failures": [], "took_s": took}
        return {"cases": 1, "failures": [f"rank {engine.rank} after {took:.1f} s: {e!r}"]}
    finally:
        (folder / f"absent-done.{engine.rank}").touch()
    return {"cases": 1, "failures": [f"rank {engine.rank}: no error without rank {last}"]}
