"""Where a rank's data sits, for the program compiler (:mod:`ringtree.runtime.program`).

A *region* is a slice of one chunk of the schedule's layout, named by its element range
``(lo, hi)`` in that layout: every chunk is cut into slices (the same cut on every rank, from
the chunk's size alone), each of which moves as its own message. A *location* is where a
region's data is at some moment: ``(buffer, start, stop)`` in the rank's input buffer, its
output buffer or its scratch space.

A rank's input and output buffers hold the chunks the schedule says it brings and must end
with (:meth:`~ringtree.schedule.Schedule.input_chunks`,
:meth:`~ringtree.schedule.Schedule.output_chunks`), side by side in that order -- the whole
layout, a block, or an all-to-all's row and column; in place, the one buffer holds the whole
layout. A chunk's place in a buffer comes from that order.
"""

from __future__ import annotations

from ringtree.schedule import Schedule, Size

# Buffer ids in a location ``(buffer, start, stop)``.
INPUT, OUTPUT, SCRATCH = 0, 1, 2
Location = tuple[int, int, int]
#: A slice of a chunk: its element range ``(lo, hi)`` in the layout.
Region = tuple[int, int]

#: At most this many slices per chunk (each message costs tens of microseconds in Python).
MAX_SLICES = 16


def slice_bounds(lo: int, hi: int, itemsize: int, slice_bytes: int) -> list[Region]:
    """Cut ``[lo, hi)`` into at most MAX_SLICES near-equal slices of about ``slice_bytes``."""
    n = hi - lo
    k = max(1, min(MAX_SLICES, (n * itemsize) // max(1, slice_bytes)))
    base, extra = divmod(n, k)
    out, start = [], lo
    for j in range(k):
        stop = start + base + (1 if j < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def positions(bounds: list[int], chunks: list[int]) -> tuple[dict[int, int], int]:
    """Where each of ``chunks`` starts in a buffer that holds them side by side, in this
    order, and the buffer's size."""
    at, out = 0, {}
    for c in chunks:
        out[c] = at
        at += bounds[c + 1] - bounds[c]
    return out, at


class Regions:
    """One rank's chunks for one payload: their slices, where each starts (in the input) and
    where it ends (in the output, or in the input when in place).

    ``count``: the payload (an element count, or an all-to-all's Splits); ``in_place``: the
    output buffer is the input buffer and holds the whole layout.
    """

    def __init__(self, s: Schedule, rank: int, count: Size, itemsize: int, *, in_place: bool,
                 slice_bytes: int) -> None:
        self.bounds = bounds = s.chunk_bounds(count)
        self.itemsize, self.slice_bytes, self.in_place = itemsize, slice_bytes, in_place
        self.outputs = s.output_chunks(rank)
        if in_place:  # one buffer of the whole layout
            self.in_pos = self.out_pos = {c: bounds[c] for c in range(s.n_chunks)}
            self.out_elems = bounds[-1]
        else:
            self.in_pos, _ = positions(bounds, s.input_chunks(rank))
            self.out_pos, self.out_elems = positions(bounds, self.outputs)
        self._slices: dict[int, list[Region]] = {}
        #: the regions this rank keeps (of its output chunks)
        self.kept = {r for c in self.outputs for r in self.of(c)}

    def of(self, c: int) -> list[Region]:
        """Chunk ``c``'s regions, in order (cut on first use)."""
        cut = self._slices.get(c)
        if cut is None:
            b = self.bounds
            cut = self._slices[c] = slice_bounds(b[c], b[c + 1], self.itemsize, self.slice_bytes)
        return cut

    def place(self, buffer: int, pos: dict[int, int], c: int, r: Region) -> Location:
        """Region ``r`` of chunk ``c`` in ``buffer``, whose chunks start at ``pos``."""
        start = pos[c] + r[0] - self.bounds[c]
        return (buffer, start, start + r[1] - r[0])

    def start(self, c: int, r: Region) -> Location:
        """Where region ``r`` of chunk ``c`` is before any message: the input."""
        return self.place(INPUT, self.in_pos, c, r)

    def end(self, c: int, r: Region) -> Location:
        """Where region ``r`` of an output chunk ``c`` must end."""
        return self.place(INPUT if self.in_place else OUTPUT, self.out_pos, c, r)

    def home(self, c: int, r: Region) -> Location | None:
        """Where region ``r`` of chunk ``c`` must end (None: the rank does not keep it)."""
        return self.end(c, r) if c in self.out_pos else None

    def result(self) -> tuple[Location, ...]:
        """Where every region the rank keeps ends."""
        return tuple(self.end(c, r) for c in self.outputs for r in self.of(c))

    def untouched(self, written: dict[Region, int]) -> tuple[tuple[Location, Location], ...]:
        """``(input, output)`` locations of the kept regions no message writes (none in
        place: they are where they belong)."""
        if self.in_place:
            return ()
        return tuple((self.start(c, r), self.end(c, r))
                     for c in self.outputs for r in self.of(c) if r not in written)
