"""One rank of ``ringtree lab ddp``: ``python -m ringtree.lab.worker JOB`` under the engine's
launcher (:func:`ringtree.runtime.launch.launch`), which sets torchrun's environment.

1. join the gloo group (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT);
2. train every run of the job on this rank (:func:`ringtree.lab.ddp.train_rank`);
3. pickle what it returns to ``<folder>/rank<r>.pkl`` (parameters, records, events: too big
   for the launcher's JSON) and report to the launcher; on an error, report the error with
   the time it happened (so the lab can name the rank that failed first) and exit 1.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from datetime import timedelta
from pathlib import Path

from ringtree.runtime.launch import write_result


def main(job: str) -> int:
    """Run this rank of the job pickled at ``job``: ``(config, runs, folder)``."""
    import torch.distributed as dist

    from ringtree.lab.ddp import train_rank

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    with open(job, "rb") as f:
        config, runs, folder = pickle.load(f)
    try:
        dist.init_process_group("gloo", timeout=timedelta(seconds=config.timeout_s))
        result = train_rank(rank, n, config, runs)
        with open(Path(folder) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(result, f)
        write_result(rank, {"rank": rank})
        return 0
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0]
        error = f"rank {rank}: {type(e).__name__}: {first}"
        write_result(rank, {"rank": rank, "error": error, "failed_at_s": time.monotonic()})
        print(f"ringtree: error: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
