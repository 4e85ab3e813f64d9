"""The pipelined executor's order of operations for one Program, worked out once.

What the executor does next never depends on timing or data -- only on the program: post
every send whose data is ready and every receive whose landing place is free, then wait for
the next receive in program order and apply it; wait for a send only before its data is
overwritten (see :mod:`ringtree.runtime.executor`). So that order is computed once per
program, as a flat tuple of instructions (a *tape*), beside the program in the call plan
(:class:`ringtree.runtime.calls.CallPlan`), and every call replays it. Replaying costs a
tuple unpack and one call per operation, as little as hand-written code making the same
messages (figures: docs/engine.md, "Measurements behind the engine's shape").

Instructions (locations flattened to ``buffer, start, stop``):

* ``(RECV, i, b, lo, hi, peer)``: post receive message ``i`` (the index of its lead part);
* ``(SEND, i, b, lo, hi, peer, packs)``: copy each ``(db, dlo, dhi, sb, slo, shi)`` of
  ``packs`` into the send slot, then post send message ``i``;
* ``(WAIT, i, peer, step, sending)``: wait for send (``sending``) or receive message ``i``;
* ``(REDUCE, i, ab, alo, ahi, lb, llo, lhi, ob, olo, ohi)``: ``out = acc (op) land`` for
  receive part ``i``;
* ``(COPY, i, ob, olo, ohi, lb, llo, lhi)``: copy receive part ``i`` to its place;
* ``(STEP_DONE, step)``: this rank has applied everything it receives up to ``step``;
* ``(LOCAL, db, dlo, dhi, sb, slo, shi)``: copy a region the rank keeps but no message
  writes from its input to its output (an all-to-all's own block), once the first messages
  are posted, so that the copy overlaps their flight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ringtree.runtime.program import Program

RECV, SEND, WAIT, REDUCE, COPY, STEP_DONE, LOCAL = range(7)
Instruction = tuple[Any, ...]


def compile_tape(prog: Program) -> tuple[Instruction, ...]:
    """The operations of ``prog``, in the order the pipelined executor performs them."""
    sends, recvs = prog.sends, prog.recvs
    n_sends, n_recvs = len(sends), len(recvs)
    sent = [False] * n_sends
    tape: list[Instruction] = []
    posted_s = posted_r = 0

    def finish_send(i: int) -> None:
        i = sends[i].lead  # a part of a message: done when its message is
        if not sent[i]:
            tape.append((WAIT, i, sends[i].peer, sends[i].step, True))
            sent[i] = True

    def post_ready_sends(i: int) -> None:
        nonlocal posted_s
        while posted_s < n_sends and sends[posted_s].ready <= i:
            so = sends[posted_s]
            if so.post is not None:  # the first part posts the message
                packs, at = [], so.post[1]
                for part in so.pack:  # parts not side by side: packed into the send slot
                    n = part[2] - part[1]
                    packs.append((so.post[0], at, at + n, *part))
                    at += n
                tape.append((SEND, posted_s, *so.post, so.peer, tuple(packs)))
            posted_s += 1

    for i in range(n_recvs + 1):
        # receives first: a peer's data can only flow into a posted receive, and gloo posts
        # block while the connection's I/O thread is busy with an outgoing message
        while posted_r < n_recvs and recvs[posted_r].post_after <= i:
            ro = recvs[posted_r]
            if ro.post is not None:  # the first part posts the message
                if ro.post_sends:  # it lands over data sent in an earlier step
                    post_ready_sends(i)
                    for si in ro.post_sends:
                        finish_send(si)
                tape.append((RECV, posted_r, *ro.post, ro.peer))
            posted_r += 1
        post_ready_sends(i)
        if i == 0:
            tape.extend((LOCAL, *dst, *src) for src, dst in prog.untouched)
        if i == n_recvs:
            break
        ro = recvs[i]
        if ro.post is not None:
            tape.append((WAIT, i, ro.peer, ro.step, False))
        for si in ro.apply_sends:
            finish_send(si)
        if ro.reduce:
            assert ro.acc is not None and ro.out is not None
            tape.append((REDUCE, i, *ro.acc, *ro.land, *ro.out))
        elif ro.out is not None:
            tape.append((COPY, i, *ro.out, *ro.land))
        if i + 1 == n_recvs or recvs[i + 1].step != ro.step:
            tape.append((STEP_DONE, ro.step))
    for si in range(n_sends):
        finish_send(si)
    return tuple(tape)
