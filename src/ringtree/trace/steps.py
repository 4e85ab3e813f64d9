"""A Schedule's step-by-step trace as plain data: who sends which chunk to whom, how many
bytes, and after each step which chunks each rank holds complete (fully reduced/gathered)."""

from __future__ import annotations

from typing import Any

from ringtree.collectives import Collective
from ringtree.schedule import Schedule
from ringtree.simulate import complete_chunks, track


def trace_data(s: Schedule, count: int, itemsize: int) -> dict[str, Any]:
    """The trace of ``s`` for a buffer of ``count`` elements of ``itemsize`` bytes.

    ``steps[k]["complete"][r]`` lists the chunks rank r holds complete after step k+1. An
    all-to-all's transfers also name their block, ``"s->d"`` (from rank s, for rank d).
    """
    sizes = s.chunk_sizes(count)
    n, per_block = s.n_ranks, s.n_chunks // s.n_blocks

    def named(t: Any) -> dict[str, Any]:
        if s.collective is not Collective.ALL_TO_ALL:
            return {}
        block = t.chunk // per_block
        return {"block": f"{block // n}->{block % n}"}

    step_bytes = s.step_bytes(count, itemsize)
    steps = []
    for k, (step, held) in enumerate(zip(s.steps, track(s), strict=True)):
        steps.append(
            {
                "step": k + 1,
                "phase": step.phase,
                "transfers": [
                    {
                        "src": t.src,
                        "dst": t.dst,
                        "chunk": t.chunk,
                        "action": t.action.value,
                        "bytes": sizes[t.chunk] * itemsize,
                        **named(t),
                    }
                    for t in step.transfers
                ],
                "step_bytes": step_bytes[k],
                "complete": complete_chunks(s, held),
            }
        )
    return {
        "collective": s.collective.value,
        "algorithm": s.algorithm,
        "n_ranks": s.n_ranks,
        "n_chunks": s.n_chunks,
        "root": s.root,
        "size_bytes": count * itemsize,
        "chunk_bytes": [n * itemsize for n in sizes],
        "bytes_sent": s.bytes_sent_per_rank(count, itemsize),
        "bytes_received": [s.bytes_received(r, count, itemsize) for r in range(s.n_ranks)],
        "steps": steps,
    }
