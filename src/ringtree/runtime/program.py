"""One rank's part of a Schedule, compiled for a buffer size: the exact sends and receives it
posts, where each message lands and what happens to it, and what each one waits for.

Pipelining: every chunk is cut into slices (the same cut on every rank, from the chunk's
size alone) and each slice moves as its own message, so a rank reduces slice j while slice
j+1 is still arriving, and forwards slice j in the next step as soon as it is reduced.

Where data lives (no copy where none is needed):

* sends read a view of wherever the region currently lives (the input buffer, or the
  scratch slot its last partial result went to);
* a reduce receives into its own scratch slot and writes ``acc (op) incoming`` back into
  that slot, except the region's *final* write on a rank that keeps the region, which goes
  straight into the output view. So intermediate results never touch the input (the input
  of reduce-scatter and a non-root's input to reduce stay as they were) and no buffer is
  overwritten while a send may still be reading it;
* a copy lands directly in the output view when it is the region's final write and no send
  ever read that view; otherwise in a scratch slot, copied out when final. (Landing over
  sent data would mean waiting for the send before posting the receive: an extra blocking
  wait, which on a loaded machine costs a scheduler wake-up; a copy costs ~50 us per 2 MiB.)

Hazards are resolved statically: each send records how many receives must be applied before
it may be posted; each receive records how many receives must be applied before it is posted
(a direct landing over data an earlier reduce reads), and the sends that must finish before
it is applied (a final write over data that was sent).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule

# Buffer ids in a location ``(buffer, start, stop)``.
INPUT, OUTPUT, SCRATCH = 0, 1, 2
Location = tuple[int, int, int]

#: Default target size of one message; chunks larger than this are cut into slices. Each
#: message costs ~80 us of CPU through torch's point-to-point (Python, the c10d work, gloo's
#: ready-to-receive notice), while loopback moves 4 MiB in ~3 ms: measured on 2 cores, 512 KiB
#: slices were 10-30 % slower than 4 MiB ones (CPU-bound: little to overlap, much to pay).
DEFAULT_SLICE_BYTES = 4 * 1024 * 1024
#: At most this many slices per chunk (each message costs tens of microseconds in Python).
MAX_SLICES = 16


@dataclass(frozen=True, slots=True)
class SendOp:
    """Send ``loc`` (a slice of the schedule's ``chunk``) to ``peer`` at ``step``, once
    ``ready`` receives have been applied."""

    peer: int
    step: int
    chunk: int
    loc: Location
    ready: int


@dataclass(frozen=True, slots=True)
class RecvOp:
    """Receive a slice of ``chunk`` from ``peer`` at ``step`` into ``land``; then apply it.

    reduce: ``out = acc (op) land``; else copy ``land`` to ``out`` (``out`` None: nothing to
    do, the data landed where it belongs). ``post_after``: receives to apply before posting
    (a direct landing must not overwrite data an earlier reduce still reads);
    ``apply_sends``: sends (indices) that must finish before applying (a final write over
    data that was sent).
    """

    peer: int
    step: int
    chunk: int
    land: Location
    reduce: bool
    acc: Location | None
    out: Location | None
    post_after: int
    apply_sends: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    """Everything rank ``rank`` does to run ``schedule`` on ``count`` elements.

    ``untouched`` lists result regions no step writes; when input and output are different
    buffers they are copied over at the end. ``result`` lists every region the rank keeps
    (the AVG division runs over these). Ranges are in elements of the full layout except
    for OUTPUT locations, which are relative to ``out_offset``.
    """

    rank: int
    n_steps: int
    phases: tuple[str, ...]
    sends: tuple[SendOp, ...]
    recvs: tuple[RecvOp, ...]
    scratch_elems: int
    result: tuple[tuple[int, int], ...]
    untouched: tuple[tuple[int, int], ...]
    out_offset: int
    out_elems: int


def slice_bounds(lo: int, hi: int, itemsize: int, slice_bytes: int) -> list[tuple[int, int]]:
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


def result_chunks(s: Schedule, rank: int) -> list[int]:
    """The chunks ``rank`` must hold at the end (its block for reduce-scatter, all for the
    root of reduce, none for other ranks of reduce, all otherwise)."""
    if s.collective is Collective.REDUCE_SCATTER:
        return list(s.block_chunks(rank))
    if s.collective is Collective.REDUCE and rank != s.root:
        return []
    return list(range(s.n_chunks))


def compile_program(
    s: Schedule,
    rank: int,
    count: int,
    itemsize: int,
    *,
    in_place: bool,
    slice_bytes: int = DEFAULT_SLICE_BYTES,
) -> Program:
    """Compile ``rank``'s sends and receives for ``count`` elements.

    in_place: the output buffer is the input buffer (all-reduce, broadcast, reduce,
    all-gather); reduce-scatter writes rank r's block into a separate output.
    """
    bounds = s.chunk_bounds(count)
    keep = set(result_chunks(s, rank))
    if s.collective is Collective.REDUCE_SCATTER:
        blk = s.block_chunks(rank)
        out_offset, out_end = bounds[blk.start], bounds[blk.stop]
    else:
        out_offset, out_end = 0, count
    slices = {c: slice_bounds(bounds[c], bounds[c + 1], itemsize, slice_bytes) for c in keep}

    def regions(c: int) -> list[tuple[int, int]]:
        if c not in slices:
            slices[c] = slice_bounds(bounds[c], bounds[c + 1], itemsize, slice_bytes)
        return slices[c]

    def home(r: tuple[int, int]) -> Location:  # where region r lives at the end
        if in_place:
            return (INPUT, r[0], r[1])
        return (OUTPUT, r[0] - out_offset, r[1] - out_offset)

    # Pass 1: this rank's operations in program order, per step (sends, then receives).
    # per step: sends (peer, region, chunk), receives (peer, region, reduce?, chunk)
    steps: list[tuple[list[tuple[int, tuple[int, int], int]],
                      list[tuple[int, tuple[int, int], bool, int]]]] = []  # fmt: skip
    last_write: dict[tuple[int, int], int] = {}
    n_recv = 0
    for step in s.steps:
        snd, rcv = [], []
        for t in step.transfers:
            if t.src == rank:
                snd.extend((t.dst, r, t.chunk) for r in regions(t.chunk))
            if t.dst == rank:
                for r in regions(t.chunk):
                    rcv.append((t.src, r, t.action is Action.REDUCE, t.chunk))
                    last_write[r] = n_recv
                    n_recv += 1
        steps.append((snd, rcv))

    # Pass 2: follow each region's location and record hazards.
    loc: dict[tuple[int, int], Location] = {}
    readers: dict[Location, list[tuple[int, int]]] = {}  # location -> [(send index, step)]
    written: dict[tuple[int, int], int] = {}  # region -> index of its latest applied write
    sends: list[SendOp] = []
    recvs: list[RecvOp] = []
    scratch = 0
    kept = {r for c in keep for r in slices[c]}

    def new_slot(r: tuple[int, int]) -> Location:
        nonlocal scratch
        slot = (SCRATCH, scratch, scratch + r[1] - r[0])
        scratch += r[1] - r[0]
        return slot

    for k, (snd, rcv) in enumerate(steps):
        for peer, r, chunk in snd:
            where = loc.get(r, (INPUT, r[0], r[1]))
            readers.setdefault(where, []).append((len(sends), k))
            sends.append(SendOp(peer, k, chunk, where, written.get(r, -1) + 1))
        for peer, r, is_reduce, chunk in rcv:
            i = len(recvs)
            final = last_write[r] == i and r in kept
            acc = loc.get(r, (INPUT, r[0], r[1]))
            dest = home(r)
            dest_readers = tuple(si for si, _ in readers.get(dest, []))
            post_after, apply_sends = 0, ()
            if is_reduce:
                land = new_slot(r)
                out = dest if final else land
                if final:
                    apply_sends = dest_readers
            elif final and not dest_readers:
                land, out = dest, None
                post_after = written.get(r, -1) + 1
            else:
                land = new_slot(r)
                out = dest if final else None
                if final:
                    apply_sends = dest_readers
            recvs.append(
                RecvOp(
                    peer,
                    k,
                    chunk,
                    land,
                    is_reduce,
                    acc if is_reduce else None,
                    out,
                    post_after,
                    apply_sends,
                )
            )
            loc[r] = dest if final else land
            written[r] = i
    result = tuple(r for c in sorted(keep) for r in slices[c])
    untouched = tuple(r for r in result if r not in written)
    return Program(
        rank=rank,
        n_steps=len(s.steps),
        phases=tuple(st.phase for st in s.steps),
        sends=tuple(sends),
        recvs=tuple(recvs),
        scratch_elems=scratch,
        result=result,
        untouched=untouched,
        out_offset=out_offset,
        out_elems=out_end - out_offset,
    )
