"""torch's intra-op threads when several ranks share one machine's cores: torchrun's policy.

After each parallel region (a ``clone`` of a few MiB is one) torch's OpenMP workers spin for
milliseconds before sleeping. With N ranks on C cores and C threads per rank, those spinning
threads take the cores that the next collective's I/O threads and the other ranks need
(docs/engine.md, "Measurements behind the engine's shape"; gloo's own all-reduce suffers the
same). torchrun
sets OMP_NUM_THREADS=1 for this reason; processes started otherwise (``mp.spawn``, a custom
launcher) get the same treatment from ringtree the first time it talks over a CPU group.
"""

from __future__ import annotations

import os
import warnings

#: Set to ``keep`` to leave torch's thread count alone.
ENV = "RINGTREE_THREADS"


def share_cores(group_size: int, cores: int | None = None) -> int | None:
    """Lower torch's intra-op threads to ``max(1, cores // local ranks)`` when the ranks on
    this machine would otherwise run more threads than it has cores.

    Local ranks: LOCAL_WORLD_SIZE when a launcher set it, else ``group_size`` (all local).
    Does nothing when OMP_NUM_THREADS is set (the user or torchrun chose) or RINGTREE_THREADS
    is ``keep``. Returns the new thread count, or None when unchanged. Warns once when it acts.
    """
    if "OMP_NUM_THREADS" in os.environ or os.environ.get(ENV) == "keep":
        return None
    import torch

    cores = cores or os.cpu_count() or 1
    local = int(os.environ.get("LOCAL_WORLD_SIZE") or group_size)
    want = max(1, cores // max(local, 1))
    have = torch.get_num_threads()
    if local <= 1 or have <= want:
        return None
    torch.set_num_threads(want)
    warnings.warn(
        f"ringtree: {local} ranks share {cores} cores: torch intra-op threads lowered from "
        f"{have} to {want} per rank, as torchrun does (set OMP_NUM_THREADS, or {ENV}=keep, "
        "to choose)",
        RuntimeWarning,
        stacklevel=4,
    )
    return want
