"""A rank that comes after its peers gave up, one rank: a body for :mod:`ringtree.procs.rank`,
started by tests/test_groups.py on local processes (gloo or MPI).

The last rank sleeps ``late_s`` before an all-reduce that its peers call with a timeout of
``call_timeout_s`` (< late_s): once on a group already used (MPI's eager messages let the
late rank finish the call on what its peers sent before they gave up), once as the first call
on a fresh group (the rendezvous, the fingerprint exchange). The peers must raise PeerError
naming the late rank within their timeout; the late rank must raise PeerError too, saying
that its peers gave up waiting for it, not that they died, and not wait for ever.
Returns ``{"cases": 2, "failures": [...]}``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ringtree.runtime import api
from ringtree.runtime.errors import PeerError


def late_peer(engine: Any, cfg: dict[str, Any]) -> dict[str, Any]:
    """See the module doc."""
    last, timeout_s, late_s = engine.size - 1, cfg["call_timeout_s"], cfg["late_s"]
    if engine.backend == "mpi":
        fresh: Any = engine.comm.Dup()
    else:
        import torch.distributed as dist

        fresh = dist.new_group(list(range(engine.size)))
    def x() -> Any:
        return engine.array(np.ones(8, np.float32))

    api.all_reduce(x(), timeout=30)  # the default group's first call, every rank on time
    failures = []
    for case, group in (("a used call shape", None), ("the first call on a group", fresh)):
        engine.barrier()
        start = time.monotonic()
        if engine.rank == last:
            time.sleep(late_s)
        error: Exception | None = None
        try:
            api.all_reduce(x(), group=group, timeout=timeout_s)
        except Exception as e:  # noqa: BLE001 - checked below
            error = e
        took = time.monotonic() - start
        what = f"rank {engine.rank}, {case}, after {took:.1f} s: {error!r}"
        if not isinstance(error, PeerError):
            failures.append(f"{what}: expected PeerError")
        elif engine.rank != last and (error.peer != last or took > timeout_s + 3):
            failures.append(f"{what}: expected to name rank {last} within the timeout")
        elif engine.rank == last and not (
            "gave up" in str(error) and "this rank" in str(error) and "died" not in str(error)
            and took < late_s + timeout_s + 3
        ):
            failures.append(f"{what}: expected 'gave up waiting for this rank'")
        engine.barrier()
    return {"cases": 2, "failures": failures}
