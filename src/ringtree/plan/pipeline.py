"""Pipeline schedules: the bubble of 1F1B and interleaved 1F1B, and the order each stage runs
its micro-batches in (for the step's picture).

1F1B (PipeDream-Flush; Narayanan et al. 2021, Sec. 2.2.1): with p stages and m micro-batches
of t_f + t_b each, a step takes (m + p - 1)(t_f + t_b): the bubble is (p - 1)(t_f + t_b), a
fraction (p - 1)/m of the ideal time. Interleaved 1F1B (Sec. 2.2.2) gives each GPU v chunks of
L/(p v) layers: the bubble shrinks to (p - 1)(t_f + t_b)/v, for v times the point-to-point
sends; Megatron-LM needs m to be a multiple of p for it.

:func:`stage_order` lists what stage i runs, as Megatron-LM's schedules do (warm-up forwards,
then one forward one backward, then the cool-down backwards; interleaved: chunks taken p
micro-batches at a time, ``get_model_chunk_id``), and :func:`simulate` times those lists with
each forward waiting for the previous virtual stage and each backward for the next: for equal
stages and no transfers it gives exactly (m + (p-1)/v)(t_f + t_b).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.errors import RingtreeError

F, B = "F", "B"


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Bubble time over the ideal time m (t_f + t_b): (p - 1) / (v m)."""
    return (p - 1) / (v * m)


def check_schedule(p: int, m: int, v: int) -> None:
    """RingtreeError unless the interleaved schedule can run (v > 1 needs m a multiple of p)."""
    if v > 1 and m % p:
        raise RingtreeError(
            f"the interleaved schedule (v={v}) needs the micro-batches per pipeline ({m}) to be "
            f"a multiple of pp={p} (Megatron-LM's rule): change --global-batch or --micro-batch"
        )


def _chunk(k: int, p: int, v: int, forward: bool) -> tuple[int, int]:
    """(micro-batch, chunk) of a stage's k-th forward or backward (Megatron-LM's order)."""
    group, within = divmod(k, p * v)
    chunk = within // p
    mb = group * p + within % p
    return mb, (chunk if forward else v - 1 - chunk)


def stage_order(i: int, p: int, m: int, v: int = 1) -> list[tuple[str, int, int]]:
    """What stage ``i`` of ``p`` runs, in order: (F or B, micro-batch, chunk)."""
    total = m * v
    # warm-up forwards: Megatron-LM's num_warmup_microbatches
    warm = min(p - i - 1, m) if v == 1 else min((p - i - 1) * 2 + (v - 1) * p, total)
    order: list[tuple[str, int, int]] = []
    f = b = 0
    for _ in range(warm):
        order.append((F, *_chunk(f, p, v, True)))
        f += 1
    while f < total:
        order.append((F, *_chunk(f, p, v, True)))
        f += 1
        order.append((B, *_chunk(b, p, v, False)))
        b += 1
    while b < total:
        order.append((B, *_chunk(b, p, v, False)))
        b += 1
    return order


@dataclass(frozen=True)
class Span:
    """One forward or backward of one micro-batch chunk on one stage, timed."""

    stage: int
    kind: str
    micro_batch: int
    chunk: int
    start_s: float
    end_s: float


def simulate(p: int, m: int, v: int, fwd_s: float, bwd_s: float, send_s: float = 0.0,
             last_extra: tuple[float, float] = (0.0, 0.0)) -> list[Span]:
    """Time every stage's order: a chunk's forward waits for the previous virtual stage's
    forward of the same micro-batch (plus ``send_s``), its backward for the next one's
    backward; ``fwd_s``/``bwd_s`` per chunk, the last virtual stage ``last_extra`` longer
    (the output layer)."""
    orders = [stage_order(i, p, m, v) for i in range(p)]
    done: dict[tuple[str, int, int], float] = {}  # (kind, micro-batch, virtual stage) -> end
    free = [0.0] * p
    pos = [0] * p
    spans: list[Span] = []
    last = p * v - 1
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for i in range(p):
            while pos[i] < len(orders[i]):
                kind, mb, chunk = orders[i][pos[i]]
                vs = chunk * p + i
                dep = (kind, mb, vs - 1) if kind == F else (kind, mb, vs + 1)
                first = (kind == F and vs == 0) or (kind == B and vs == last)
                if kind == B and vs == last:
                    dep, first = (F, mb, vs), False
                if not first and dep not in done:
                    break
                ready = 0.0 if first else done[dep] + (send_s if dep[2] != vs else 0.0)
                start = max(free[i], ready)
                dur = fwd_s if kind == F else bwd_s
                if vs == last:
                    dur += last_extra[0] if kind == F else last_extra[1]
                end = start + dur
                done[(kind, mb, vs)] = end
                free[i] = end
                spans.append(Span(i, kind, mb, chunk, start, end))
                pos[i] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - the orders above never deadlock
            raise RingtreeError("pipeline schedule deadlocked")
    return spans
