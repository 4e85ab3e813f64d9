"""What a rank did, when: the records the engine emits and trace exporters read.

One :class:`CallRecord` per collective call (what ran, the bytes the transport moved, when
each step was done) and, when asked, one :class:`TraceEvent` per send, receive or reduce of
one chunk on one rank. For a transfer ``src -> dst`` of chunk c at step k, ``src`` records
``send`` (peer ``dst``) and ``dst`` records ``recv`` (peer ``src``) and, when the transfer
reduces, then ``reduce`` (peer ``src``). So, per rank, the bytes of its ``send`` events add up to
``Schedule.bytes_sent(rank, ...)`` and those of its ``recv`` events to ``bytes_received``.

This module imports nothing but the standard library and :mod:`ringtree.errors`: it sits
below the engine and the renderers alike.
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


@dataclass(frozen=True)
class CallRecord:
    """One collective call on one rank, as the engine ran it.

    algorithm, n_chunks: what ran ("auto" resolved). count, itemsize: the call's elements and
    their size. bytes_sent, bytes_received, messages_sent: counted by the transport during
    the call. start_s, end_s: the call's start and end on the recorder's clock; step_done_s:
    when this rank had applied each step's last message (a step it received nothing in
    repeats the previous time).
    """

    rank: int
    n_ranks: int
    collective: str
    algorithm: str
    n_chunks: int | None
    count: int
    itemsize: int
    bytes_sent: int
    bytes_received: int
    messages_sent: int
    start_s: float
    end_s: float
    step_done_s: tuple[float, ...] = ()

    @property
    def nbytes(self) -> int:
        """The call's buffer size in bytes."""
        return self.count * self.itemsize

    @property
    def duration_s(self) -> float:
        """``end_s - start_s``."""
        return self.end_s - self.start_s


@dataclass
class Recorder:
    """Collects one rank's records: a CallRecord per call and, with ``messages`` (the
    default), a TraceEvent per send, receive and reduce. ``span`` times a block of code on
    ``clock`` (seconds).

    >>> rec = Recorder(rank=0)
    >>> with rec.span("send", step=1, chunk=2, peer=1, bytes=1024, phase="reduce-scatter"):
    ...     pass
    >>> rec.events[0].kind, rec.events[0].peer
    ('send', 1)
    """

    rank: int
    clock: Callable[[], float] = time.perf_counter
    events: list[TraceEvent] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    messages: bool = True

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
