"""Run one rank's compiled Program over a Transport.

The pipelined loop applies receives in program order and, before each blocking wait, posts
every send whose data is ready and every receive whose landing place is free, so messages of
the next step are in flight while this step's slices are reduced. That order depends on the
program alone, so it is worked out once per program (:mod:`ringtree.runtime.tape`) and each
call replays it. The only waits on sends are before a write over sent data and before
posting a receive that lands over data sent in an earlier step -- always for sends of the
current step or earlier, which every peer completes without waiting on this rank's later
steps (no deadlock for any valid schedule, by induction over the steps). Grouped transports
(NCCL) run step by step instead: post the step's operations together, wait for all, apply.

Every wait is bounded by the call's deadline; a peer that dies or stops answering becomes a
PeerError naming the peer and the step (NCCL's waits only order streams: there torch's
watchdog catches a dead peer, see :mod:`ringtree.runtime.torch_dist`).

Tracing: given a :class:`ringtree.events.Recorder`, the executor records one TraceEvent
per message (a slice of a chunk): ``send`` from the moment it starts posting the message to
the moment the engine has taken it (the wire time shows on the receiver), ``recv`` from
posting the receive to the data's arrival (waiting for the sender included), ``reduce``
around the reduction of the arrived data into the rank's own. The grouped loop posts a step's
messages together, so their send and recv events span the whole exchange.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ringtree.collectives import ReduceOp
from ringtree.events import Recorder, TraceEvent
from ringtree.runtime.errors import PeerError
from ringtree.runtime.program import Program
from ringtree.runtime.tape import COPY, LOCAL, RECV, REDUCE, SEND, WAIT, Instruction, compile_tape
from ringtree.runtime.transport import Transport, TransportClosed, TransportTimeout


@dataclass
class Context:
    """What an error message needs to say where the call failed.

    label: e.g. ``all-reduce (ring)``; timeout_s: the call's limit; step_done_s: if a list,
    filled with one time (perf_counter) per step: when this rank had applied the step's last
    message (a step it receives nothing in counts as done with the step before).
    recorder: if given, receives a TraceEvent per send, receive and reduce (module doc).
    tag: the tag of the call's messages (:meth:`Transport.message_tag`; None: the
    transport's own).
    """

    label: str
    timeout_s: float
    step_done_s: list[float] | None = field(default=None)
    recorder: Recorder | None = field(default=None)
    tag: int | None = field(default=None)


def execute(
    prog: Program,
    transport: Transport,
    kernels: Any,
    op: ReduceOp,
    inbuf: Any,
    outbuf: Any,
    n_ranks: int,
    ctx: Context,
    tape: tuple[Instruction, ...] | None = None,
) -> None:
    """Run ``prog`` on ``inbuf`` (and ``outbuf``: the same buffer for in-place collectives);
    ``tape``: the program's order of operations (:func:`~ringtree.runtime.tape.compile_tape`,
    worked out here when not given), replayed unless the transport is grouped.

    Afterwards the rank's result regions of ``outbuf`` hold the collective's result (the AVG
    division included). Raises PeerError when a peer fails; the group is then unusable.
    """
    deadline = time.perf_counter() + ctx.timeout_s
    n_scratch = prog.scratch_elems  # none: an empty view, no pool lookup
    scratch = _scratch(transport, kernels, inbuf, n_scratch) if n_scratch else inbuf[:0]
    bufs = (inbuf, outbuf, scratch)
    if transport.grouped:
        _run_grouped(prog, transport, kernels, op, bufs, _waiter(prog, transport, ctx, deadline),
                     ctx)
        for (sb, slo, shi), (db, dlo, dhi) in prog.untouched:  # never moved: copied over
            kernels.copy(bufs[db][dlo:dhi], bufs[sb][slo:shi])
    else:  # the tape copies them while the first messages fly
        _run_pipelined(prog, compile_tape(prog) if tape is None else tape, transport, kernels,
                       op, bufs, deadline, ctx)
    if op is ReduceOp.AVG:
        for b, lo, hi in prog.result:
            kernels.finish(op, bufs[b][lo:hi], n_ranks)


#: Receive buffers up to this size are kept by the transport and reused by later calls:
#: fresh memory costs a page fault per 4 KiB on first touch (measured: +1.5 ms of CPU on a
#: 4 MiB all-reduce, a third of the call), reused memory is already mapped and in cache.
SCRATCH_KEEP_BYTES = 256 * 1024 * 1024


def _scratch(transport: Transport, kernels: Any, like: Any, n: int) -> Any:
    """``n`` elements of scratch of ``like``'s dtype and device, reused across calls."""
    nbytes = n * (like.itemsize if hasattr(like, "itemsize") else like.element_size())
    if nbytes > SCRATCH_KEEP_BYTES:
        return kernels.empty(n, like)
    pool = transport.__dict__.setdefault("_scratch_pool", {})
    key = (like.dtype, getattr(like, "device", None), type(like))
    buf = pool.get(key)
    if buf is None or len(buf) < n:
        buf = pool[key] = kernels.empty(n, like)
    return buf[:n]


def _run_pipelined(prog, tape, transport, kernels, op, bufs, deadline, ctx) -> None:  # noqa: ANN001
    """Replay ``tape``, ``prog``'s order of operations (:mod:`ringtree.runtime.tape`): the
    hot loop of every call, so waits are inlined (each bounded by ``deadline``, a
    ``time.perf_counter`` value)."""
    s_req: list[Any] = [None] * len(prog.sends)
    r_req: list[Any] = [None] * len(prog.recvs)
    send, recv, reduce, copy = transport.send, transport.recv, kernels.reduce, kernels.copy
    twait, time_s = transport.wait, time.perf_counter
    marks, rec, tag = ctx.step_done_s, ctx.recorder, ctx.tag
    if rec is not None:
        parts_s, parts_r = _parts(prog)
        r_posted_at = [0.0] * len(prog.recvs)
        clock = rec.clock

        def event(kind: str, o: Any, loc: Any, start: float) -> None:
            nbytes = transport.nbytes(bufs[loc[0]][loc[1] : loc[2]])
            _record(rec, prog, kind, o, nbytes, start)

    for ins in tape:
        code = ins[0]
        if code == RECV:
            _, i, b, lo, hi, peer = ins
            if rec is not None:
                r_posted_at[i] = clock()
            r_req[i] = recv(bufs[b][lo:hi], peer, tag)
        elif code == SEND:
            _, i, b, lo, hi, peer, packs = ins
            start = clock() if rec is not None else 0.0
            for db, dlo, dhi, sb, slo, shi in packs:
                copy(bufs[db][dlo:dhi], bufs[sb][slo:shi])
            s_req[i] = send(bufs[b][lo:hi], peer, tag)
            if rec is not None:
                for j in parts_s[i]:
                    event("send", prog.sends[j], prog.sends[j].loc, start)
        elif code == WAIT:
            _, i, peer, step, sending = ins
            try:
                twait((s_req if sending else r_req)[i], deadline - time_s())
            except (TransportTimeout, TransportClosed) as e:
                raise _peer_error(prog, transport, ctx, e, peer, step, sending) from None
            if rec is not None and not sending:
                for j in parts_r[i]:
                    event("recv", prog.recvs[j], prog.recvs[j].land, r_posted_at[i])
        elif code == REDUCE:
            _, i, ab, alo, ahi, lb, llo, lhi, ob, olo, ohi = ins
            start = clock() if rec is not None else 0.0
            reduce(op, bufs[ab][alo:ahi], bufs[lb][llo:lhi], bufs[ob][olo:ohi])
            if rec is not None:
                event("reduce", prog.recvs[i], prog.recvs[i].land, start)
        elif code == COPY:
            _, i, ob, olo, ohi, lb, llo, lhi = ins
            copy(bufs[ob][olo:ohi], bufs[lb][llo:lhi])
        elif code == LOCAL:
            _, ob, olo, ohi, lb, llo, lhi = ins
            copy(bufs[ob][olo:ohi], bufs[lb][llo:lhi])
        elif marks is not None:  # STEP_DONE
            now = time.perf_counter()
            marks.extend([now] * (ins[1] + 1 - len(marks)))
    if marks is not None:
        marks.extend([time.perf_counter()] * (prog.n_steps - len(marks)))


def _run_grouped(prog, transport, kernels, op, bufs, wait, ctx) -> None:  # noqa: ANN001
    rec = ctx.recorder

    def view(loc):  # noqa: ANN001, ANN202
        return bufs[loc[0]][loc[1] : loc[2]]

    def event(kind: str, o: Any, buf: Any, start: float) -> None:
        _record(rec, prog, kind, o, transport.nbytes(buf), start)

    by_step_s: dict[int, list] = {}
    by_step_r: dict[int, list] = {}
    parts_of_s: dict[int, list] = {}
    for so in prog.sends:
        parts_of_s.setdefault(so.step, []).append(so)
        if so.post is not None:  # the first part of each message sends all of it
            by_step_s.setdefault(so.step, []).append(so)
    for ro in prog.recvs:
        by_step_r.setdefault(ro.step, []).append(ro)
    for k in range(prog.n_steps):
        snd, rcv = by_step_s.get(k, []), by_step_r.get(k, [])
        if not snd and not rcv:
            continue
        start = rec.clock() if rec is not None else 0.0
        rcv_posts = [ro for ro in rcv if ro.post is not None]
        for so in snd:
            _pack(so, kernels, view)
        reqs = transport.exchange([(view(so.post), so.peer) for so in snd],
                                  [(view(ro.post), ro.peer) for ro in rcv_posts], ctx.tag)
        peer = rcv[0].peer if rcv else snd[0].peer  # coalesced requests: name one peer
        for req in reqs:
            wait(req, peer, k, not rcv)
        if rec is not None:
            for kind, ops, where in (("send", parts_of_s.get(k, []), "loc"), ("recv", rcv, "land")):
                for o in ops:
                    event(kind, o, view(getattr(o, where)), start)
        for ro in rcv:
            start = rec.clock() if rec is not None else 0.0
            _apply(ro, kernels, op, view)
            if rec is not None and ro.reduce:
                event("reduce", ro, view(ro.land), start)
        if ctx.step_done_s is not None:
            now = time.perf_counter()
            ctx.step_done_s.extend([now] * (k + 1 - len(ctx.step_done_s)))
    if ctx.step_done_s is not None:
        ctx.step_done_s.extend([time.perf_counter()] * (prog.n_steps - len(ctx.step_done_s)))


def _record(rec: Recorder | None, prog: Program, kind: str, o: Any, nbytes: int,
            start_s: float) -> None:
    """Append the event of SendOp/RecvOp ``o`` (``kind``) from ``start_s`` until now."""
    assert rec is not None
    rec.events.append(TraceEvent(rec.rank, kind, o.step + 1, o.chunk, o.peer, nbytes, start_s,
                                 rec.clock(), prog.phases[o.step]))


def _parts(prog: Program) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """For the trace: the parts (indices) of each message, by the index of its first part."""
    out: tuple[dict[int, list[int]], dict[int, list[int]]] = ({}, {})
    for parts, ops in zip(out, (prog.sends, prog.recvs), strict=True):
        for j, o in enumerate(ops):
            parts.setdefault(o.lead, []).append(j)
    return out


def _pack(so, kernels, view: Callable) -> None:  # noqa: ANN001
    """Copy the parts of a message that do not lie side by side into its send slot."""
    at = so.post[1]
    for part in so.pack:
        n = part[2] - part[1]
        kernels.copy(view((so.post[0], at, at + n)), view(part))
        at += n


def _apply(ro, kernels, op: ReduceOp, view: Callable) -> None:  # noqa: ANN001
    if ro.reduce:
        kernels.reduce(op, view(ro.acc), view(ro.land), view(ro.out))
    elif ro.out is not None:
        kernels.copy(view(ro.out), view(ro.land))


def _waiter(prog: Program, transport: Transport, ctx: Context, deadline: float) -> Callable:
    """``wait(req, peer, step, sending)``: the transport's wait until ``deadline``, its
    failures turned into PeerError."""

    def wait(req: Any, peer: int, step: int, sending: bool) -> None:
        try:
            transport.wait(req, deadline - time.perf_counter())
        except (TransportTimeout, TransportClosed) as e:
            raise _peer_error(prog, transport, ctx, e, peer, step, sending) from None

    return wait


def _peer_error(prog: Program, transport: Transport, ctx: Context, error: Exception, peer: int,
                step: int, sending: bool) -> PeerError:
    """What a failed wait for a message to or from ``peer`` in ``step`` says."""
    rank = transport.rank
    phase = f" ({prog.phases[step]})" if prog.phases[step] else ""
    where = f"rank {rank}: {ctx.label} step {step + 1} of {prog.n_steps}{phase}"
    if isinstance(error, TransportTimeout):
        what = f"rank {peer} did not take its data" if sending else f"nothing came from rank {peer}"
        msg = (f"{where}: {what} within the {ctx.timeout_s:g} s timeout (rank {peer} died, "
               "hangs, or called a different collective or size)")
    else:
        msg = (f"{where}: the connection to rank {peer} broke (rank {peer} died or failed "
               f"first): {error}")
    return PeerError(msg, rank=rank, peer=peer, step=step + 1)
