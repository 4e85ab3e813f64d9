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
  out, which halves the reductions' time (figures: docs/engine.md, "Measurements behind the
  engine's shape");
* a copy lands directly in the output view when it is the region's final write and no send
  still reads that view: for messages of IN_PLACE_MIN_BYTES and up, sends of earlier
  steps are waited for just before posting it, once a step after theirs is under way (so the
  wait cannot deadlock). Otherwise -- a smaller message over sent data, a send of the same
  step reading it, or an engine that posts a whole step at once (NCCL: threshold inf) --
  it lands in a scratch slot, posted early, and is copied out when final.

Where chunks are, and how they are cut into regions: :mod:`ringtree.runtime.regions`.

Merging: in a step, the regions one rank sends another that are contiguous in the layout and
move the same way (all reduced, or all copied) travel as one message of up to ``slice_bytes``
-- recursive halving sends half the buffer as N/2 chunks, which would otherwise be N/2
messages, each a round of thread hand-offs. An all-to-all's blocks
for one peer lie apart by nature (Bruck's rounds send every other block), so there every
region one rank sends another in a step joins the message, packed. Sender and receiver
decide from the schedule and the sizes of the blocks they exchange alone, so they agree.
The first part of a message (its *lead*) posts it: the sender's parts are one view when they
lie side by side, else they are packed into a scratch slot first; the receiver's parts land
side by side (consecutive scratch slots, or their final places when every part can land
there and those follow each other) and are applied one by one.

The compiler works in passes: :func:`step_operations` lists, per step, the region-sized
sends and receives this rank makes (named records); a :class:`_Compiler` then follows each
region's location through them, step by step -- the sends of a step (:meth:`_Compiler.send`),
then where each received message lands (:meth:`_Compiler.receive`) -- taking scratch memory
from :class:`Slots`; :func:`compile_program` drives them.

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
from typing import NamedTuple

from ringtree.collectives import Collective
from ringtree.runtime.regions import SCRATCH, Location, Region, Regions
from ringtree.schedule import Action, Schedule, Size

#: Default target size of one message; chunks larger than this are cut into slices. Each
#: message costs ~80 us of CPU through torch's point-to-point (Python, the c10d work, gloo's
#: ready-to-receive notice), while loopback moves 4 MiB in ~3 ms: measured on 2 cores, 512 KiB
#: slices were 10-30 % slower than 4 MiB ones (CPU-bound: little to overlap, much to pay).
DEFAULT_SLICE_BYTES = 4 * 1024 * 1024
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
    ``out_elems``: the size the output buffer must have. The executor's order of operations
    is worked out from it once, beside it in the call plan (:mod:`ringtree.runtime.tape`).
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
    regions = Regions(s, rank, count, itemsize, in_place=in_place, slice_bytes=slice_bytes)
    steps, last_write = step_operations(s, rank, regions)
    # In-place all-reduce: big partial sums go straight to their place (the input is the
    # output), so big reduced messages land in RING_SLOTS recycled slots, in cache when reduced.
    ring = RING_SLOTS if in_place and s.collective is Collective.ALL_REDUCE else 0
    limit = max(1, slice_bytes // itemsize)
    ring_elems = 0
    if ring:  # as big as any message: a slice or a region
        widest = max(r[1] - r[0] for c in range(s.n_chunks) for r in regions.of(c))
        ring_elems = max(min(limit, count), widest)
    threshold = IN_PLACE_MIN_BYTES if in_place_min_bytes is None else in_place_min_bytes
    comp = _Compiler(regions, last_write, Slots(ring, ring_elems), limit,
                     s.collective is Collective.ALL_TO_ALL, threshold)
    for k, step in enumerate(steps):
        comp.send(k, step.sends)
        comp.receive(k, step.recvs)
    return Program(
        rank=rank, n_steps=len(s.steps), phases=tuple(st.phase for st in s.steps),
        sends=tuple(comp.sends), recvs=tuple(comp.recvs), scratch_elems=comp.slots.elems,
        result=regions.result(), untouched=regions.untouched(comp.written),
        out_elems=regions.out_elems,
    )


class StepSend(NamedTuple):
    """One region this rank sends in a step."""

    peer: int
    region: Region
    chunk: int
    reduce: bool


class StepRecv(NamedTuple):
    """One region this rank receives in a step."""

    peer: int
    region: Region
    chunk: int
    reduce: bool


@dataclass
class Step:
    """This rank's region-sized operations in one step, in program order."""

    sends: list[StepSend]
    recvs: list[StepRecv]


def step_operations(s: Schedule, rank: int,
                    regions: Regions) -> tuple[list[Step], dict[Region, int]]:
    """Pass 1: ``rank``'s sends and receives in each step, one per region of each chunk it
    transfers; and, per region, the index of the last receive that writes it."""
    steps: list[Step] = []
    last_write: dict[Region, int] = {}
    n_recv = 0
    for step in s.steps:
        here = Step([], [])
        for t in step.transfers:
            red = t.action is Action.REDUCE
            if t.src == rank:
                here.sends.extend(StepSend(t.dst, r, t.chunk, red) for r in regions.of(t.chunk))
            if t.dst == rank:
                for r in regions.of(t.chunk):
                    here.recvs.append(StepRecv(t.src, r, t.chunk, red))
                    last_write[r] = n_recv
                    n_recv += 1
        steps.append(here)
    return steps, last_write


class Slots:
    """Scratch memory: a fresh slot per staged landing or packed send, and the ``ring``
    slots of ``ring_elems`` that an in-place all-reduce's big reduced messages take turns in
    (a message is posted into a slot once the one before it there is applied)."""

    def __init__(self, ring: int = 0, ring_elems: int = 0) -> None:
        self.elems = 0
        self.ring, self._ring_elems = ring, ring_elems
        self._recycled: list[tuple[Location, int]] = []  # (slot, receives to apply first)
        self._turn = 0

    def new(self, n: int) -> Location:
        """A slot of ``n`` elements of its own."""
        slot = (SCRATCH, self.elems, self.elems + n)
        self.elems += n
        return slot

    def recycle(self, free_after: int) -> tuple[int, int]:
        """The next recycled slot for a message applied by receive ``free_after - 1``: its
        start, and how many receives must be applied before it may be posted there."""
        if len(self._recycled) < self.ring:
            self._recycled.append((self.new(self._ring_elems), 0))
        at = self._turn % self.ring
        slot, free_at = self._recycled[at]
        self._recycled[at] = (slot, free_after)
        self._turn += 1
        return slot[1], free_at


class Landing(NamedTuple):
    """Where one part of a received message lands and what follows: ``out`` (None: it
    landed where it belongs), the receives to apply before posting, the sends to finish
    before applying."""

    land: Location
    out: Location | None
    post_after: int
    apply_sends: tuple[int, ...]


class _Compiler:
    """Pass 2: follow each region's location through the steps and record the hazards
    (module doc), one step at a time: its sends, then its receives."""

    def __init__(self, regions: Regions, last_write: dict[Region, int], slots: Slots,
                 limit: int, anywhere: bool, threshold: float) -> None:
        self.regions, self.last_write, self.slots = regions, last_write, slots
        self.limit, self.anywhere, self.threshold = limit, anywhere, threshold
        self.loc: dict[Region, Location] = {}  # where a region is, once a message moved it
        self.readers: dict[Location, list[tuple[int, int]]] = {}  # -> [(send index, step)]
        self.written: dict[Region, int] = {}  # region -> index of its latest applied write
        self.sends: list[SendOp] = []
        self.recvs: list[RecvOp] = []
        self.r_steps: list[int] = []  # the step of each receive so far (ascending)

    def now(self, c: int, r: Region) -> Location:
        """Where region ``r`` of chunk ``c`` is: its last landing, or the input."""
        return self.loc[r] if r in self.loc else self.regions.start(c, r)

    def send(self, k: int, ops: list[StepSend]) -> None:
        """Step ``k``'s sends: each part reads where its region is now; the parts of one
        message are posted by the first, as one view or packed into a slot."""
        sends, base = self.sends, len(self.sends)
        lead = _leads([(o.peer, o.region, o.reduce) for o in ops], self.limit, self.anywhere)
        for j, o in enumerate(ops):
            where = self.now(o.chunk, o.region)
            self.readers.setdefault(where, []).append((len(sends), k))
            post = where if lead[j] == j else None
            sends.append(SendOp(o.peer, k, o.chunk, where, self.written.get(o.region, -1) + 1,
                                base + lead[j], post))
        for j in sorted(set(lead)):
            parts = [sends[base + q] for q in range(len(ops)) if lead[q] == j]
            if len(parts) > 1:
                sends[base + j] = _merged_send(parts, self.slots.new)

    def receive(self, k: int, ops: list[StepRecv]) -> None:
        """Step ``k``'s receives: where each message lands (:meth:`_land`), then each part's
        RecvOp, and where its region is afterwards."""
        base = len(self.recvs)
        lead = _leads([(o.peer, o.region, o.reduce) for o in ops], self.limit, self.anywhere)
        landing: dict[int, Landing] = {}
        waits: tuple[int, ...] = ()
        for j, o in enumerate(ops):
            if lead[j] == j:  # the first part of a message: where all its parts land
                parts = [q for q in range(j, len(ops)) if lead[q] == j]
                waits = self._land(k, base, [(q, ops[q]) for q in parts], landing)
            land, out, post_after, apply_sends = landing[j]
            post = None
            if lead[j] == j:
                parts_of = [landing[q] for q in range(j, len(ops)) if lead[q] == j]
                post = (land[0], land[1], parts_of[-1].land[2])
                post_after = max(p.post_after for p in parts_of)
            acc = self.now(o.chunk, o.region) if o.reduce else None
            self.recvs.append(RecvOp(o.peer, k, o.chunk, land, o.reduce, acc, out, post_after,
                                     apply_sends, base + lead[j], post, waits if post else ()))
            self.r_steps.append(k)
            final = self.last_write[o.region] == base + j and o.region in self.regions.kept
            h = self.regions.home(o.chunk, o.region)
            self.loc[o.region] = (h if h is not None and (final or (o.reduce and out == h))
                                  else land)
            self.written[o.region] = base + j

    def _land(self, k: int, base: int, parts: list[tuple[int, StepRecv]],
              landing: dict[int, Landing]) -> tuple[int, ...]:
        """Where the parts of one message of step ``k`` land, into ``landing``; returns the
        sends to finish before posting it (a direct landing over data sent earlier).

        A big copy lands in place over data sent in an earlier step once that send is done
        (posted in a later step than the send's: no deadlock), and a big partial sum goes to
        its place once the sends that read it are; small ones are staged, so that nothing
        waits for a send early."""
        reduce = parts[0][1].reduce
        finals = [self.last_write[o.region] == base + q and o.region in self.regions.kept
                  for q, o in parts]
        dests = [self.regions.home(o.chunk, o.region) for _, o in parts]
        dest_readers = [tuple(si for si, _ in self.readers.get(d, [])) if d else ()
                        for d in dests]
        elems = sum(o.region[1] - o.region[0] for _, o in parts)
        big = elems * self.regions.itemsize >= self.threshold
        earlier = big and all(self.sends[si].step < k for dr in dest_readers for si in dr)
        direct = (not reduce and all(finals) and _side_by_side(dests)
                  and (earlier or not any(dest_readers)))
        waits = tuple(sorted({si for dr in dest_readers for si in dr})) if direct else ()
        recycled = bool(self.slots.ring) and reduce and big
        if recycled:
            at, free_at = self.slots.recycle(base + parts[-1][0] + 1)
        for (q, o), final, dest, dr in zip(parts, finals, dests, dest_readers, strict=True):
            n = o.region[1] - o.region[0]
            if direct:  # lands where it belongs: nothing to apply
                after = self.written.get(o.region, -1) + 1
                if waits:  # once a step after the last sender's is under way
                    last = max(self.sends[si].step for si in waits)
                    after = max(after, bisect.bisect_right(self.r_steps, last))
                landing[q] = Landing(dest, None, after, ())
            elif recycled:  # a recycled slot; the sum goes to its place
                landing[q] = Landing((SCRATCH, at, at + n), dest, free_at, dr)
                at += n
            else:  # into a slot of its own; a final write goes on to its place
                land = self.slots.new(n)
                out = dest if final else (land if reduce else None)
                landing[q] = Landing(land, out, 0, dr if final else ())
        return waits


def _leads(
    entries: list[tuple[int, Region, bool]], limit: int, anywhere: bool = False
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
