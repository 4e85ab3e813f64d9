"""The events a Schedule would produce on a Link under the alpha-beta-gamma model.

Timeline of one step that starts at T (the model of :mod:`ringtree.cost.terms`): every send
and receive starts at T; a rank's sends share its outgoing link and its receives its incoming
link (full duplex), fairly, so a message of b bytes among messages of sizes b_1..b_m on that
link ends at ``T + alpha + (sum of min(b, b_j) over j) / bandwidth`` -- the last one at
``T + alpha + B_rank / bandwidth``. Reductions start when the step's wire time is over,
``T + alpha + B / bandwidth`` (B: the busiest rank's bytes), and run one after another at
``gamma`` seconds per byte. The step ends after the slowest rank's reductions, so the
trace's length is exactly the model's time (:func:`ringtree.cost.terms.step_times_s`).

Every slice of a step starts at T or after the step's wire time, so on each rank they nest
(the Chrome trace format needs that).
"""

from __future__ import annotations

from ringtree.cost.terms import Link, step_times_s
from ringtree.events import TraceEvent
from ringtree.schedule import Action, Schedule, Transfer


def _shared_ends(sizes: list[int], start_s: float, link: Link) -> list[float]:
    """End times of messages of ``sizes`` bytes that share one link fairly from ``start_s``."""
    return [
        start_s + link.alpha_s + sum(min(b, other) for other in sizes) / link.bandwidth_Bps
        for b in sizes
    ]


def predicted_events(s: Schedule, count: int, itemsize: int, link: Link) -> list[TraceEvent]:
    """Events of ``s`` for ``count`` elements of ``itemsize`` bytes on ``link``, from t = 0.

    Per rank, send bytes add up to ``s.bytes_sent(rank, count, itemsize)`` and recv bytes to
    ``s.bytes_received``; the last event ends at the sum of ``step_times_s(s, ..., link)``.
    """
    sizes = s.chunk_sizes(count)
    wire = s.step_bytes(count, itemsize)
    events: list[TraceEvent] = []
    times_s = step_times_s(s, count, itemsize, link)
    t0 = 0.0
    for k, (step, step_s) in enumerate(zip(s.steps, times_s, strict=True)):
        n = k + 1
        by_rank: dict[tuple[int, str], list[Transfer]] = {}
        for t in step.transfers:
            by_rank.setdefault((t.src, "send"), []).append(t)
            by_rank.setdefault((t.dst, "recv"), []).append(t)
        for (rank, kind), ts in sorted(by_rank.items()):
            b = [sizes[t.chunk] * itemsize for t in ts]
            for t, nbytes, end in zip(ts, b, _shared_ends(b, t0, link), strict=True):
                peer = t.dst if kind == "send" else t.src
                events.append(TraceEvent(rank, kind, n, t.chunk, peer, nbytes, t0, end, step.phase))
            if kind == "recv":
                clock = t0 + link.alpha_s + wire[k] / link.bandwidth_Bps
                for t, nbytes in zip(ts, b, strict=True):
                    if t.action is Action.REDUCE:
                        start, clock = clock, clock + nbytes * link.gamma_s_per_byte
                        events.append(
                            TraceEvent(
                                rank, "reduce", n, t.chunk, t.src, nbytes, start, clock, step.phase
                            )
                        )
        t0 += step_s
    return events
