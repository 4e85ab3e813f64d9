"""TraceEvent validation and the Recorder that executors use to emit events."""

import pytest

from ringtree.errors import RingtreeError
from ringtree.events import Recorder, TraceEvent


def test_event_rejects_bad_kind_negative_bytes_and_reversed_time():
    with pytest.raises(RingtreeError, match="kind 'copy'"):
        TraceEvent(0, "copy", 1, 0, 1, 8, 0.0, 1.0)
    with pytest.raises(RingtreeError, match="bytes must be >= 0"):
        TraceEvent(0, "send", 1, 0, 1, -8, 0.0, 1.0)
    with pytest.raises(RingtreeError, match="ends before it starts"):
        TraceEvent(0, "recv", 1, 0, 1, 8, 2.0, 1.0)


def test_recorder_times_each_span_on_its_clock_even_when_the_block_raises():
    ticks = iter([10.0, 10.5, 11.0, 12.25])
    rec = Recorder(rank=3, clock=lambda: next(ticks))
    with rec.span("send", step=1, chunk=2, peer=0, bytes=64, phase="all-gather"):
        pass
    with pytest.raises(RuntimeError), rec.span("recv", step=2, chunk=1, peer=2, bytes=32):
        raise RuntimeError("peer died")
    assert rec.events == [
        TraceEvent(3, "send", 1, 2, 0, 64, 10.0, 10.5, "all-gather"),
        TraceEvent(3, "recv", 2, 1, 2, 32, 11.0, 12.25, ""),
    ]
