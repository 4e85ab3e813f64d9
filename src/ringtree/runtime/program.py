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
* except in an in-place all-reduce, whose input is its output: there the partial sums of
  messages of IN_PLACE_MIN_BYTES and up go straight to their place (after the sends that
  read the old value are done), so such a message's landing slot is free once applied, and
  these messages take turns in RING_SLOTS slots (a message is posted into a slot once the
  one before it there is applied). The landing memory stays in cache and nothing is copied
  out: on 4 gloo ranks on 2 cores the reductions of a 64 MiB all-reduce took half the time
  (27 ms of 4 ranks' time per call instead of 54), the call 5-8 % less (medians of 3
  interleaved runs, 15-20 calls each);
* a copy lands directly in the output view when it is the region's final write and no send
  still reads that view: for messages of IN_PLACE_MIN_BYTES and up, sends of earlier
  steps are waited for just before posting it, once a step after theirs is under way (so the
  wait cannot deadlock). Otherwise -- a smaller message over sent data, a send of the same
  step reading it, or an engine that posts a whole step at once (NCCL: threshold inf) --
  it lands in a scratch slot, posted early, and is copied out when final.

Where chunks are: a rank's input and output buffers hold the chunks the schedule says it
brings and must end with (:meth:`~ringtree.schedule.Schedule.input_chunks`,
:meth:`~ringtree.schedule.Schedule.output_chunks`), side by side in that order -- the whole
layout, a block, or an all-to-all's row and column; in place, the one buffer holds the whole
layout. Regions are named by their place in the layout; a chunk's place in a buffer comes
from that order.

Merging: in a step, the regions one rank sends another that are contiguous in the layout and
move the same way (all reduced, or all copied) travel as one message of up to ``slice_bytes``
-- recursive halving sends half the buffer as N/2 chunks, which would otherwise be N/2
messages (each costs ~0.1-0.5 ms of hand-offs on a loaded machine). An all-to-all's blocks
for one peer lie apart by nature (Bruck's rounds send every other block), so there every
region one rank sends another in a step joins the message, packed. Sender and receiver
decide from the schedule and the sizes of the blocks they exchange alone, so they agree.
The first part of a message (its *lead*) posts it: the sender's parts are one view when they
lie side by side, else they are packed into a scratch slot first; the receiver's parts land
side by side (consecutive scratch slots, or their final places when every part can land
there and those follow each other) and are applied one by one.

Hazards are resolved statically: each send records how many receives must be applied before
it may be posted; each receive records how many receives must be applied before it is posted
(a direct landing over data an earlier reduce reads, a recycled slot), the sends that must
finish before it is posted (a direct landing over data sent in an earlier step) and before
it is applied (a write over data that was sent).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

from ringtree.collectives import Collective
from ringtree.schedule import Action, Schedule, Size

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
#: Landing slots an in-place all-reduce recycles for its reduced messages (see the module doc).
RING_SLOTS = 4
#: Messages from this size land in place over data sent in an earlier step, after that send,
#: and (in-place all-reduce) write their partial sums in place once the sends that read them
#: are done; smaller ones land in a slot of their own, posted early, without waiting for a
#: send: on 4 gloo ranks on 2 cores, such waits and late posts made Rabenseifner's 64-256 KiB
#: all-reduce 15-40 % slower and recursive doubling's 12-22 % slower than the tree, while
#: copying 1 MiB costs ~40 us.
IN_PLACE_MIN_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SendOp:
    """Send ``loc`` (a slice of the schedule's ``chunk``) to ``peer`` at ``step``, once
    ``ready`` receives have been applied. ``lead``: index of the send whose message carries
    this part (itself for the first part of a message, which posts ``post``: all its parts,
    copied there from ``pack``, their own places, when they do not lie side by side)."""

    peer: int
    step: int
    chunk: int
    loc: Location
    ready: int
    lead: int
    post: Location | None = None
    pack: tuple[Location, ...] = ()


@dataclass(frozen=True, slots=True)
class RecvOp:
    """Receive a slice of ``chunk`` from ``peer`` at ``step`` into ``land``; then apply it.

    reduce: ``out = acc (op) land``; else copy ``land`` to ``out`` (``out`` None: nothing to
    do, the data landed where it belongs). ``post_after``: receives to apply before posting
    (a direct landing must not overwrite data an earlier reduce still reads);
    ``apply_sends``: sends (indices) that must finish before applying (a final write over
    data that was sent). ``lead``: index of the receive that posts the message carrying this
    part (itself for the first part); the lead posts into ``post``, all its parts' landings,
    once the sends in ``post_sends`` have finished (a direct landing over data sent in an
    earlier step).
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
    lead: int
    post: Location | None = None
    post_sends: tuple[int, ...] = ()


@dataclass(frozen=True)
class Program:
    """Everything rank ``rank`` does to run ``schedule`` on ``count`` elements.

    ``untouched``: ``(from, to)`` locations of result regions no step writes, copied from
    the input to the output while the first messages fly (nothing when in place).
    ``result``: where every region the rank keeps ends (the AVG division runs over these).
    ``out_elems``: the size the output buffer must have.
    """

    rank: int
    n_steps: int
    phases: tuple[str, ...]
    sends: tuple[SendOp, ...]
    recvs: tuple[RecvOp, ...]
    scratch_elems: int
    result: tuple[Location, ...]
    untouched: tuple[tuple[Location, Location], ...]
    out_elems: int

    @cached_property
    def tape(self) -> tuple[tuple, ...]:
        """The pipelined executor's operations, in order (:mod:`ringtree.runtime.tape`)."""
        from ringtree.runtime.tape import compile_tape

        return compile_tape(self)


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


def positions(bounds: list[int], chunks: list[int]) -> tuple[dict[int, int], int]:
    """Where each of ``chunks`` starts in a buffer that holds them side by side, in this
    order, and the buffer's size."""
    at, out = 0, {}
    for c in chunks:
        out[c] = at
        at += bounds[c + 1] - bounds[c]
    return out, at


def compile_program(
    s: Schedule,
    rank: int,
    count: Size,
    itemsize: int,
    *,
    in_place: bool,
    slice_bytes: int = DEFAULT_SLICE_BYTES,
    in_place_min_bytes: float | None = None,
) -> Program:
    """Compile ``rank``'s sends and receives for ``count`` elements.

    count: the payload (an element count, or an all-to-all's Splits; a rank needs the sizes
    of the blocks it sends, forwards and receives only).
    in_place: the output buffer is the input buffer and holds the whole layout (all-reduce,
    broadcast, reduce, all-gather); otherwise each holds the rank's chunks (module doc).
    in_place_min_bytes: the message size from which landings go in place and reduced
    messages take turns in recycled slots (None: IN_PLACE_MIN_BYTES). That needs receives
    posted one by one as their landing frees up, so an engine that posts a whole step at once
    (NCCL) passes ``math.inf``; one on which a late-posted receive costs nothing, 0 (see
    :meth:`ringtree.runtime.transport.Transport.in_place_from`).
    """
    bounds = s.chunk_bounds(count)
    outputs = s.output_chunks(rank)
    keep = set(outputs)
    if in_place:  # one buffer of the whole layout
        in_pos = out_pos = {c: bounds[c] for c in range(s.n_chunks)}
        out_elems = bounds[-1]
    else:
        in_pos, _ = positions(bounds, s.input_chunks(rank))
        out_pos, out_elems = positions(bounds, outputs)
    slices = {c: slice_bounds(bounds[c], bounds[c + 1], itemsize, slice_bytes) for c in keep}

    def regions(c: int) -> list[tuple[int, int]]:
        if c not in slices:
            slices[c] = slice_bounds(bounds[c], bounds[c + 1], itemsize, slice_bytes)
        return slices[c]

    def place(buffer: int, pos: dict[int, int], c: int, r: tuple[int, int]) -> Location:
        start = pos[c] + r[0] - bounds[c]
        return (buffer, start, start + r[1] - r[0])

    def home(c: int, r: tuple[int, int]) -> Location | None:  # where region r of chunk c ends
        return place(INPUT if in_place else OUTPUT, out_pos, c, r) if c in out_pos else None

    def now(c: int, r: tuple[int, int]) -> Location:  # where it is: its last landing, or input
        return loc[r] if r in loc else place(INPUT, in_pos, c, r)

    # Pass 1: this rank's operations in program order, per step (sends, then receives).
    # per step: sends (peer, region, chunk, reduces?), receives (peer, region, reduces?, chunk)
    steps: list[tuple[list[tuple[int, tuple[int, int], int, bool]],
                      list[tuple[int, tuple[int, int], bool, int]]]] = []
    last_write: dict[tuple[int, int], int] = {}
    n_recv = 0
    for step in s.steps:
        snd, rcv = [], []
        for t in step.transfers:
            red = t.action is Action.REDUCE
            if t.src == rank:
                snd.extend((t.dst, r, t.chunk, red) for r in regions(t.chunk))
            if t.dst == rank:
                for r in regions(t.chunk):
                    rcv.append((t.src, r, red, t.chunk))
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
    limit = max(1, slice_bytes // itemsize)
    anywhere = s.collective is Collective.ALL_TO_ALL  # any regions for a peer merge (doc)

    def new_slot(n: int) -> Location:
        nonlocal scratch
        slot = (SCRATCH, scratch, scratch + n)
        scratch += n
        return slot

    # In-place all-reduce: big partial sums go straight to their place (the input is the
    # output), so big reduced messages land in RING_SLOTS recycled slots, in cache when reduced.
    ring = RING_SLOTS if in_place and s.collective is Collective.ALL_REDUCE else 0
    threshold = IN_PLACE_MIN_BYTES if in_place_min_bytes is None else in_place_min_bytes
    ring_slots: list[tuple[Location, int]] = []  # (slot, receives to apply before reuse)
    r_steps: list[int] = []  # the step of each receive so far (ascending)
    n_ring = 0
    for k, (snd, rcv) in enumerate(steps):
        base = len(sends)
        s_lead = _leads([(peer, r, red) for peer, r, _, red in snd], limit, anywhere)
        for j, (peer, r, chunk, _) in enumerate(snd):
            where = now(chunk, r)
            readers.setdefault(where, []).append((len(sends), k))
            lead = base + s_lead[j]
            post = where if lead == len(sends) else None
            sends.append(SendOp(peer, k, chunk, where, written.get(r, -1) + 1, lead, post))
        for j in sorted(set(s_lead)):
            parts = [sends[base + q] for q in range(len(snd)) if s_lead[q] == j]
            if len(parts) > 1:
                sends[base + j] = _merged_send(parts, new_slot)
        base = len(recvs)
        r_lead = _leads([(peer, r, red) for peer, r, red, _ in rcv], limit, anywhere)
        landing: dict[int, tuple[Location, Location | None, int, tuple[int, ...]]] = {}
        for j, (peer, r, is_reduce, chunk) in enumerate(rcv):
            if r_lead[j] == j:  # the first part of a message: where all its parts land
                parts = [q for q in range(j, len(rcv)) if r_lead[q] == j]
                finals = [last_write[rcv[q][1]] == base + q and rcv[q][1] in kept for q in parts]
                dests = [home(rcv[q][3], rcv[q][1]) for q in parts]
                dest_readers = [tuple(si for si, _ in readers.get(d, [])) if d else ()
                                for d in dests]
                # a big copy lands in place over data sent in an earlier step once that send
                # is done (posted in a later step than the send's: no deadlock), and a big
                # partial sum goes to its place once the sends that read it are; small ones
                # are staged, so that nothing waits for a send early
                nbytes = sum(rcv[q][1][1] - rcv[q][1][0] for q in parts) * itemsize
                big = nbytes >= threshold
                earlier = big and all(sends[si].step < k for dr in dest_readers for si in dr)
                direct = (not is_reduce and all(finals) and _side_by_side(dests)
                          and (earlier or not any(dest_readers)))
                waits = tuple(sorted({si for dr in dest_readers for si in dr})) if direct else ()
                recycled = ring and is_reduce and big
                if recycled:
                    if len(ring_slots) < ring:  # as big as any message: a slice or a region
                        widest = max(r[1] - r[0] for c in range(s.n_chunks) for r in regions(c))
                        ring_slots.append((new_slot(max(min(limit, count), widest)), 0))
                    slot, free_at = ring_slots[n_ring % ring]
                    ring_slots[n_ring % ring] = (slot, base + parts[-1] + 1)
                    n_ring += 1
                    at = slot[1]
                for q, final, dest, dr in zip(parts, finals, dests, dest_readers, strict=True):
                    r_q = rcv[q][1]
                    n = r_q[1] - r_q[0]
                    if direct:  # lands where it belongs: nothing to apply
                        after = written.get(r_q, -1) + 1
                        if waits:  # once a step after the last sender's is under way
                            last = max(sends[si].step for si in waits)
                            after = max(after, bisect.bisect_right(r_steps, last))
                        landing[q] = (dest, None, after, ())
                    elif recycled:  # a recycled slot; the sum goes to its place
                        landing[q] = ((SCRATCH, at, at + n), dest, free_at, dr)
                        at += n
                    else:  # into a slot of its own; a final write goes on to its place
                        land = new_slot(n)
                        out = dest if final else (land if is_reduce else None)
                        landing[q] = (land, out, 0, dr if final else ())
            land, out, post_after, apply_sends = landing[j]
            lead = base + r_lead[j]
            post = None
            if lead == base + j:
                parts = [landing[q] for q in range(j, len(rcv)) if r_lead[q] == j]
                post = (land[0], land[1], parts[-1][0][2])
                post_after = max(p[2] for p in parts)
            acc = now(chunk, r) if is_reduce else None
            recvs.append(RecvOp(peer, k, chunk, land, is_reduce, acc, out, post_after,
                                apply_sends, lead, post, waits if post else ()))
            r_steps.append(k)
            final = last_write[r] == base + j and r in kept
            h = home(chunk, r)
            loc[r] = h if h is not None and (final or (is_reduce and out == h)) else land
            written[r] = base + j
    result = tuple(place(INPUT if in_place else OUTPUT, out_pos, c, r)
                   for c in outputs for r in slices[c])
    untouched = () if in_place else tuple(
        (place(INPUT, in_pos, c, r), place(OUTPUT, out_pos, c, r))
        for c in outputs for r in slices[c] if r not in written
    )
    return Program(
        rank=rank,
        n_steps=len(s.steps),
        phases=tuple(st.phase for st in s.steps),
        sends=tuple(sends),
        recvs=tuple(recvs),
        scratch_elems=scratch,
        result=result,
        untouched=untouched,
        out_elems=out_elems,
    )


def _leads(
    entries: list[tuple[int, tuple[int, int], bool]], limit: int, anywhere: bool = False
) -> list[int]:
    """For each (peer, region, reduces?) of one step, the position of the first part of its
    message: regions for one peer join the message before when they continue its range (or,
    ``anywhere``, wherever they are), move the same way, and keep it within ``limit``
    elements. Depends on the schedule and the regions' sizes alone, so the sender and the
    receiver of a message cut it the same way."""
    lead = list(range(len(entries)))
    open_msg: dict[int, tuple[int, int, bool, int]] = {}  # peer -> (lead, end, reduces, elems)
    for j, (peer, r, red) in enumerate(entries):
        m, n = open_msg.get(peer), r[1] - r[0]
        if m is not None and (anywhere or m[1] == r[0]) and m[2] == red and m[3] + n <= limit:
            lead[j] = m[0]
            open_msg[peer] = (m[0], r[1], red, m[3] + n)
        else:
            open_msg[peer] = (j, r[1], red, n)
    return lead


def _side_by_side(locs: list[Location]) -> bool:
    """Whether the locations follow each other in one buffer."""
    return all(a[0] == b[0] and a[2] == b[1] for a, b in itertools.pairwise(locs))


def _merged_send(parts: list[SendOp], new_slot: Callable[[int], Location]) -> SendOp:
    """The first part of a message, made to send all of it: one view when the parts lie side
    by side in one buffer, else a scratch slot they are packed into before posting."""
    first, locs = parts[0], [p.loc for p in parts]
    ready = max(p.ready for p in parts)
    if _side_by_side(locs):
        return replace(first, post=(first.loc[0], first.loc[1], locs[-1][2]), ready=ready)
    slot = new_slot(sum(x[2] - x[1] for x in locs))
    return replace(first, post=slot, ready=ready, pack=tuple(locs))
