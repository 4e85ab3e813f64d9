"""One rank of the engine contract suite: :func:`run_cases`, a body for the one rank main
(:mod:`ringtree.procs.rank`), started by tests/test_engine.py (gloo, MPI or NCCL). Runs many
cases in one process group -- every collective x every algorithm, random sizes (tiny and
uneven included), every op, non-zero roots, several dtypes, numpy and torch buffers, async
handles, all-to-alls with random split sizes -- and checks each against the engine's own
collective on the same data, and the bytes the transport sent against the schedule's count.
Ends with a mismatch case (rank 2 calls with another size; every rank must name rank 2) and,
on gloo, a silent peer (the last rank never calls; the others must time out). Returns
``{"cases": n, "failures": [...]}``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ringtree.algorithms import algorithms_for, build, get_algorithm
from ringtree.collectives import Collective, ReduceOp, Splits
from ringtree.procs.launch import RESULT_DIR_ENV
from ringtree.procs.native import (
    NativeEngine,
    call_buffers,
    copy_buffer,
    make_input,
)
from ringtree.runtime import api, calls
from ringtree.runtime.errors import MismatchError, PeerError

BITWISE = [o for o in ReduceOp if o.bitwise]
DTYPES = {"gloo": ["float32", "float64", "int32", "int64", "bfloat16", "int8"],
          "nccl": ["float32", "float64", "int32", "int64", "bfloat16", "float16", "int8"],
          "mpi": ["float32", "float64", "int32", "int64", "int8"]}


def cases(n: int, backend: str, seed: int) -> list[dict[str, Any]]:
    """The same list on every rank (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    for col in Collective:
        for alg in algorithms_for(col):
            rpn = get_algorithm(col, alg).ranks_per_node_for(n)
            sizes = (0, 1, n - 1, int(rng.integers(2, 50)), int(rng.integers(1000, 5000)))
            for k, size in enumerate(sizes):
                count = col.layout.count(size, n)
                ops = [o for o in ReduceOp if not o.bitwise] if col.reduces else [ReduceOp.SUM]
                if col.reduces and k >= 3:  # a bitwise op on the two larger sizes, integers
                    ops.append(BITWISE[(k + len(out)) % 3])
                for op in ops:
                    dtypes = [d for d in DTYPES[backend] if not op.bitwise or "int" in d]
                    out.append({
                        "collective": col.value, "algorithm": alg, "count": count,
                        "op": op.value, "root": int(rng.integers(0, n)), "ranks_per_node": rpn,
                        "dtype": str(rng.choice(dtypes)),
                        "slice_bytes": int(rng.choice([64, 4096, 1 << 22])),
                        "numpy": bool(rng.integers(0, 2)), "async": bool(rng.integers(0, 4) == 0),
                    })
    for col in Collective:  # large messages (MiBs, several slices per chunk)
        for alg in algorithms_for(col)[:2]:
            rpn = get_algorithm(col, alg).ranks_per_node_for(n)
            out.append({
                "collective": col.value, "algorithm": alg,
                "count": col.layout.count(700_001, n), "op": "sum", "root": n - 1,
                "ranks_per_node": rpn, "dtype": "float32", "slice_bytes": None,
                "numpy": False, "async": False,
            })
    return out


def run_case(engine: NativeEngine, transport: Any, case: dict[str, Any]) -> str | None:
    """None if the case passes, else a one-line description of what went wrong."""
    n, rank = engine.size, engine.rank
    col, op = Collective.parse(case["collective"]), ReduceOp.parse(case["op"])
    count, root, dtype = case["count"], case["root"], case["dtype"]
    raw = make_input(col, count, dtype, op, rank, n)
    native_kind = engine.array(raw)
    want = engine.native(col, copy_buffer(native_kind), op, root, count)
    # ringtree gets the engine's kind, or sometimes a numpy array on gloo's transport
    use_numpy = case["numpy"] and isinstance(raw, np.ndarray) and engine.backend == "gloo"
    inp, out = call_buffers(col, copy_buffer(raw if use_numpy else native_kind), count, n, rank,
                            root)
    before = transport.counters()[0]
    work = api.collective(
        col, inp, out, op, root, transport, case["async"], algorithm=case["algorithm"],
        timeout=30, check=False, ranks_per_node=case["ranks_per_node"],
        slice_bytes=case["slice_bytes"],
    )
    if work is not None:
        work.wait()
    sent = transport.counters()[0] - before
    itemsize = raw.itemsize if isinstance(raw, np.ndarray) else raw.element_size()
    name, chunks = calls.resolve(
        col, case["algorithm"], n, count, itemsize, root, kind=transport.kind
    )
    sched = calls.schedule(col, name, n, root, chunks, case["ranks_per_node"])
    label = f"rank {rank} {case}"
    expected = sched.bytes_sent(rank, count, itemsize)
    if sent != expected:
        return f"{label}: transport sent {sent} B, schedule says {expected}"
    rooted = col in (Collective.REDUCE, Collective.GATHER) and rank != root
    if rooted or col is Collective.BARRIER:  # nothing promised, or nothing to hold
        return None
    result = inp if out is None else out
    got = result if isinstance(result, np.ndarray) else engine.numpy(result)
    exact = np.issubdtype(np.asarray(want).dtype, np.integer) or op is not ReduceOp.AVG
    ok = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-2)
    return None if ok else f"{label}: got {np.asarray(got)[:6]} want {np.asarray(want)[:6]}"


def split_cases(n: int, seed: int) -> list[Splits]:
    """Random all-to-all split sizes (the same on every rank): empty blocks, a rank that
    sends nothing, large blocks."""
    rng = np.random.default_rng(seed + 1)
    out = [Splits.of(rng.integers(0, 9, (n, n)).tolist()) for _ in range(3)]
    quiet = rng.integers(0, 300, (n, n))
    quiet[n - 1] = 0  # the last rank sends nothing
    out.append(Splits.of(quiet.tolist()))
    out.append(Splits.of(rng.integers(100_000, 300_000, (n, n)).tolist()))
    return out


def run_split_case(engine: NativeEngine, transport: Any, splits: Splits) -> str | None:
    """An all-to-all with split sizes against the engine's own (torch's all_to_all_single
    with split sizes, MPI's Alltoallv) and the pairwise schedule's bytes."""
    n, rank = engine.size, engine.rank
    sent, received = list(splits.sent(rank)), list(splits.received(rank))
    x = np.arange(sum(sent), dtype=np.float32) + 1000 * rank
    want = np.empty(sum(received), dtype=np.float32)
    if engine.backend == "mpi":
        engine.comm.Alltoallv([x, sent], [want, received])
    else:
        t = engine.torch.empty(sum(received), dtype=engine.torch.float32, device=engine.device)
        engine.dist.all_to_all_single(t, engine.array(x.copy()), received, sent)
        want = engine.numpy(t)
    inp = engine.array(x.copy())
    out = engine.array(np.full(sum(received), -1, dtype=np.float32))
    before = transport.counters()[0]
    api.all_to_all_single(out, inp, received, sent, group=transport, timeout=30)
    sent_bytes = transport.counters()[0] - before
    expected = build(Collective.ALL_TO_ALL, "pairwise", n).bytes_sent(rank, splits, 4)
    label = f"rank {rank} all-to-all with splits {splits.rows}"
    if sent_bytes != expected:
        return f"{label}: transport sent {sent_bytes} B, schedule says {expected}"
    got = out if isinstance(out, np.ndarray) else engine.numpy(out)
    return None if np.array_equal(got, want) else f"{label}: got {got[:6]} want {want[:6]}"


def mismatch_case(engine: NativeEngine, transport: Any) -> str | None:
    """Rank 2 all-reduces 1000 elements, the others 1024: every rank must name rank 2."""
    count = 1000 if engine.rank == 2 else 1024
    x = engine.array(np.ones(count, dtype=np.float32))
    try:
        api.all_reduce(x, group=transport, check=True, timeout=30)
    except MismatchError as e:
        if e.ranks == [2] and "rank 2" in str(e):
            return None
        return f"rank {engine.rank}: mismatch error does not name rank 2 alone: {e}"
    return f"rank {engine.rank}: no mismatch error although rank 2 called with another size"


def silent_peer_case(engine: NativeEngine, transport: Any) -> str | None:
    """The last rank never calls (it stays alive, silent, until the others are done or a
    deadline passes): every other rank must raise PeerError within the 1 s timeout (plus
    start-up slack), naming a peer and a step. The group is unusable afterwards."""
    folder = Path(os.environ[RESULT_DIR_ENV])
    last = engine.size - 1
    if engine.rank == last:
        deadline = time.monotonic() + 30
        others = [folder / f"silent-done.{r}" for r in range(last)]
        while not all(p.exists() for p in others) and time.monotonic() < deadline:
            time.sleep(0.02)
        return None
    start = time.monotonic()
    try:
        api.all_reduce(engine.array(np.ones(1000, dtype=np.float32)), algorithm="ring",
                       group=transport, timeout=1.0, check=False)
    except PeerError as e:
        took = time.monotonic() - start
        if took > 3.0 or "step" not in str(e) or e.peer not in range(engine.size):
            return f"rank {engine.rank}: PeerError after {took:.1f} s: {e}"
        return None
    finally:
        (folder / f"silent-done.{engine.rank}").touch()
    return f"rank {engine.rank}: no error although rank {last} never called"


def _first_failure(engine: NativeEngine, cases: Any, run: Any, name: Any) -> str | None:
    """The first case whose ``run`` reports a failure or raises (the rest are skipped: the
    group may be out of step then)."""
    for case in cases:
        try:
            bad = run(case)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            bad = f"rank {engine.rank} {name(case)}: {type(e).__name__}: {e}"
        if bad:
            return bad
    return None


def run_cases(engine: NativeEngine, cfg: dict[str, Any]) -> dict[str, Any]:
    """Every case, then the mismatch and (gloo) silent-peer cases; leaves the group open
    after the silent peer (it is broken then)."""
    transport = api.transport_for(None)
    failures = []
    todo = cases(engine.size, cfg["backend"], cfg["seed"])
    bad = _first_failure(engine, todo, lambda case: run_case(engine, transport, case), str)
    if bad is None:
        bad = _first_failure(engine, split_cases(engine.size, cfg["seed"]),
                             lambda sp: run_split_case(engine, transport, sp),
                             lambda sp: f"splits {sp.rows}")
    if bad:
        failures.append(bad)
    if not failures and engine.size >= 3:
        bad = mismatch_case(engine, transport)
        if bad:
            failures.append(bad)
    if not failures and engine.size >= 3 and cfg["backend"] == "gloo":
        bad = silent_peer_case(engine, transport)
        if bad:
            failures.append(bad)
    return {"cases": len(todo), "failures": failures}
