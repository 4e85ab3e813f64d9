"""What a rank did, when: the record that executors emit and trace exporters read.

One :class:`TraceEvent` per send, receive or reduce of one chunk on one rank. For a transfer
``src -> dst`` of chunk c at step k, ``src`` records ``send`` (peer ``dst``) and ``dst``
records ``recv`` (peer ``src``) and, when the transfer reduces, then ``reduce`` (peer
``src``). So, per rank, the bytes of its ``send`` events add up to
``Schedule.bytes_sent(rank, ...)`` and those of its ``recv`` events to ``bytes_received``.

This module imports nothing but the standard library and :mod:`ringtree.errors`, so the
runtime can record events without pulling in any renderer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ringtree.errors import RingtreeError

KINDS = ("send", "recv", "reduce")


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One send, receive or reduce of one chunk on one rank.

    rank: the rank that did it. kind: ``send``, ``recv`` or ``reduce``.
    step: the schedule's step, from 1. chunk: the chunk index. peer: the other rank (the
    destination of a send, the source of a recv or reduce). bytes: payload bytes.
    t_start_s, t_end_s: seconds on a clock shared by all ranks of the run (e.g.
    ``time.perf_counter`` of processes on one machine); exporters shift them to start at 0.
    phase: the step's label (``reduce-scatter``, ``all-gather``, ...).
    """

    rank: int
    kind: str
    step: int
    chunk: int
    peer: int
    bytes: int
    t_start_s: float
    t_end_s: float
    phase: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise RingtreeError(f"event kind {self.kind!r} unknown: expected one of {KINDS}")
        if self.bytes < 0:
            raise RingtreeError(f"event bytes must be >= 0, got {self.bytes}")
        if self.t_end_s < self.t_start_s:
            raise RingtreeError(
                f"event ends before it starts ({self.t_end_s} s < {self.t_start_s} s)"
            )


@dataclass
class Recorder:
    """Collects one rank's events; ``span`` times a block of code on ``clock`` (seconds).

    >>> rec = Recorder(rank=0)
    >>> with rec.span("send", step=1, chunk=2, peer=1, bytes=1024, phase="reduce-scatter"):
    ...     pass
    >>> rec.events[0].kind, rec.events[0].peer
    ('send', 1)
    """

    rank: int
    clock: Callable[[], float] = time.perf_counter
    events: list[TraceEvent] = field(default_factory=list)

    @contextmanager
    def span(
        self, kind: str, *, step: int, chunk: int, peer: int, bytes: int, phase: str = ""
    ) -> Iterator[None]:
        """Record an event covering the ``with`` block (also when the block raises)."""
        start = self.clock()
        try:
            yield
        finally:
            self.events.append(
                TraceEvent(self.rank, kind, step, chunk, peer, bytes, start, self.clock(), phase)
            )
