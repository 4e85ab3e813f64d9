"""One rank of the engine contract suite: ``python tests/engine_cases.py '<json>'`` under
ringtree's launcher (gloo or MPI). Runs many cases in one process group -- every collective x
every algorithm, random sizes (tiny and uneven included), every op, non-zero roots, several
dtypes, numpy and torch buffers, async handles -- and checks each against the engine's own
collective on the same data, and the bytes the transport sent against the schedule's count.
Ends with a mismatch case (rank 2 calls with another size; every rank must name rank 2)
and, on gloo, a silent peer (the last rank never calls; the others must time out).
Writes ``{"cases": n, "failures": [...]}`` for the launcher.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

from ringtree.algorithms import algorithms_for, get_algorithm
from ringtree.collectives import Collective, ReduceOp, block_bounds
from ringtree.procs.launch import write_result
from ringtree.procs.native import NativeEngine, copy_buffer, make_input
from ringtree.runtime import api, calls
from ringtree.runtime.errors import MismatchError, PeerError

DTYPES = {"gloo": ["float32", "float64", "int32", "int64", "bfloat16", "int8"],
          "nccl": ["float32", "float64", "int32", "int64", "bfloat16", "float16", "int8"],
          "mpi": ["float32", "float64", "int32", "int64", "int8"]}  # fmt: skip


def cases(n: int, backend: str, seed: int) -> list[dict[str, Any]]:
    """The same list on every rank (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    for col in Collective:
        for alg in algorithms_for(col):
            rpn = get_algorithm(col, alg).ranks_per_node_for(n)
            for count in (0, 1, n - 1, int(rng.integers(2, 50)), int(rng.integers(1000, 5000))):
                ops = list(ReduceOp) if col.reduces else [ReduceOp.SUM]
                for op in ops:
                    out.append({
                        "collective": col.value, "algorithm": alg, "count": count,
                        "op": op.value, "root": int(rng.integers(0, n)), "ranks_per_node": rpn,
                        "dtype": str(rng.choice(DTYPES[backend])),
                        "slice_bytes": int(rng.choice([64, 4096, 1 << 22])),
                        "numpy": bool(rng.integers(0, 2)), "async": bool(rng.integers(0, 4) == 0),
                    })  # fmt: skip
    for col in Collective:  # large messages (MiBs, several slices per chunk)
        for alg in algorithms_for(col)[:2]:
            out.append({
                "collective": col.value, "algorithm": alg, "count": 700_001, "op": "sum",
                "root": n - 1, "ranks_per_node": None, "dtype": "float32", "slice_bytes": None,
                "numpy": False, "async": False,
            })  # fmt: skip
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
    inp = copy_buffer(raw if use_numpy else native_kind)
    b = block_bounds(count, n)
    out = None
    if col is Collective.REDUCE_SCATTER:
        out = np.empty(b[rank + 1] - b[rank], dtype=raw.dtype) if isinstance(inp, np.ndarray) \
            else inp.new_empty(b[rank + 1] - b[rank])  # fmt: skip
    elif col is Collective.ALL_GATHER:
        out = np.empty(count, dtype=inp.dtype) if isinstance(inp, np.ndarray) \
            else inp.new_empty(count)  # fmt: skip
    before = transport.counters()[0]
    work = api.collective(
        col, inp, out, op, root, transport, case["async"], algorithm=case["algorithm"],
        timeout=30, check=False, ranks_per_node=case["ranks_per_node"],
        slice_bytes=case["slice_bytes"],
    )  # fmt: skip
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
    if col is Collective.REDUCE and rank != root:
        return None
    result = inp if out is None else out
    got = result if isinstance(result, np.ndarray) else engine.numpy(result)
    exact = np.issubdtype(np.asarray(want).dtype, np.integer) or op is not ReduceOp.AVG
    ok = np.array_equal(got, want) if exact else np.allclose(got, want, rtol=1e-2)
    return None if ok else f"{label}: got {np.asarray(got)[:6]} want {np.asarray(want)[:6]}"


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
    """The last rank never calls: every other rank must raise PeerError within the 1 s
    timeout (plus a little), naming a peer and a step. The group is unusable afterwards."""
    if engine.rank == engine.size - 1:
        time.sleep(2.0)
        return None
    start = time.monotonic()
    try:
        api.all_reduce(engine.array(np.ones(1000, dtype=np.float32)), algorithm="ring",
                       group=transport, timeout=1.0)  # fmt: skip
    except PeerError as e:
        took = time.monotonic() - start
        if took > 2.5 or "step" not in str(e) or e.peer not in range(engine.size):
            return f"rank {engine.rank}: PeerError after {took:.1f} s: {e}"
        return None
    return f"rank {engine.rank}: no error although rank {engine.size - 1} never called"


def main(cfg: dict[str, Any]) -> None:
    engine = NativeEngine(cfg["backend"], 30)
    transport = api.transport_for(None)
    failures = []
    todo = cases(engine.size, cfg["backend"], cfg["seed"])
    for case in todo:
        try:
            bad = run_case(engine, transport, case)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            bad = f"rank {engine.rank} {case}: {type(e).__name__}: {e}"
        if bad:
            failures.append(bad)
            break  # the group may be out of step now
    if not failures and engine.size >= 3:
        bad = mismatch_case(engine, transport)
        if bad:
            failures.append(bad)
    silent = not failures and engine.size >= 3 and cfg["backend"] == "gloo"
    if silent:
        bad = silent_peer_case(engine, transport)
        if bad:
            failures.append(bad)
    write_result(engine.rank, {"cases": len(todo), "failures": failures})
    if not failures and not silent:
        engine.close()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
