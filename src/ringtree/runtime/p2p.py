"""Point-to-point messages in torch.distributed's shape: send, recv, isend, irecv, batches.

``send(tensor, dst)`` / ``recv(tensor, src)`` block; ``isend`` / ``irecv`` post and return a
:class:`P2PWork` (``wait(timeout)``, ``is_completed()``, ``get_future()``,
``source_rank()``); :func:`batch_isend_irecv` posts a list of :class:`P2POp` (ringtree's or
torch's own ``dist.P2POp(dist.isend, ...)``) at once, in any order, without deadlock. Ranks
are torch's: ``dst``/``src`` global ranks, ``group_dst``/``group_src`` ranks of ``group``;
``recv`` without a source takes the first message of ``tag`` from anyone (not over NCCL, as
torch) and returns the sender's global rank. A rank outside ``group`` gets torch's warning
and None (``recv``: -1).

Messages travel on a channel of their own per ``tag`` (:meth:`Transport.channel`), so they
never meet the engine's collectives, whatever is in flight; between one pair of ranks and one
tag they match in posting order, as in MPI. A first ringtree call on a group -- a message
included -- needs every member of the group (it opens that channel for the group, as its
first collective does). Bytes as they are: any dtype the engine moves,
and both sides must give the same number of bytes (a wrong size is a PeerError on the
receiver, as torch's gloo refuses it). A message of S bytes costs one alpha + S / bandwidth.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ringtree.errors import RingtreeError, RingtreeTypeError
from ringtree.runtime import buffers
from ringtree.runtime.errors import PeerError
from ringtree.runtime.groups import Group, group_for, not_a_member_warning
from ringtree.runtime.transport import Transport, TransportClosed, TransportTimeout


class P2PWork:
    """The handle of a posted message, as torch's ``Work``: ``wait(timeout)`` blocks until it
    is done (a timedelta or seconds; default the group's timeout) and raises PeerError when
    the peer died or did not answer in time; ``source_rank()`` names the sender of a
    receive from any source (its global rank)."""

    def __init__(self, group: Group, channel: Transport, req: Any, peer: int | None,
                 sending: bool, tensor: Any) -> None:
        self._group, self._channel, self._req = group, channel, req
        self._peer, self._sending, self._tensor = peer, sending, tensor
        self._done, self._error = False, None
        self._lock = threading.Lock()

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Block until done (see the class doc); True."""
        with self._lock:
            if not self._done:
                self._finish(timeout)
        if self._error is not None:
            raise self._error
        return True

    def _finish(self, timeout: timedelta | float | None) -> None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        seconds = seconds or self._group.settings.timeout_s
        try:
            self._channel.wait(self._req, seconds)
        except (TransportTimeout, TransportClosed) as e:
            self._error = self._peer_error(e, seconds)
        self._done = True

    def _peer_error(self, error: Exception, seconds: float) -> PeerError:
        g, peer = self._group, self._peer
        who = f"rank {g.global_ranks[peer]}" if peer is not None else "any rank"
        what = f"send to {who}" if self._sending else f"recv from {who}"
        why = (f"not done within the {seconds:g} s timeout" if isinstance(error, TransportTimeout)
               else f"the connection broke ({error})")
        return PeerError(f"rank {g.global_rank}: {what}: {why}", rank=g.rank,
                         peer=-1 if peer is None else peer, step=0)

    def is_completed(self) -> bool:
        """Whether the message has gone (or come), without waiting."""
        with self._lock:
            if not self._done and self._channel.done(self._req):
                self._done = True
            return self._done

    def exception(self) -> BaseException | None:
        """The error once waited, else None."""
        return self._error

    def source_rank(self) -> int:
        """The global rank the message came from (a receive, once completed)."""
        if self._sending:
            raise RingtreeError("source_rank() is a receive's: this is a send")
        self.wait()
        peer = self._peer if self._peer is not None else self._channel.source(self._req)
        return self._group.global_ranks[peer]

    def get_future(self) -> Any:
        """A ``torch.futures.Future`` completed with ``[tensor]`` once done (or its error);
        a thread waits for it."""
        import torch

        fut: torch.futures.Future = torch.futures.Future()

        def finish() -> None:
            try:
                self.wait()
                fut.set_result([self._tensor])
            except Exception as e:  # noqa: BLE001 - handed to the future
                fut.set_exception(e)

        threading.Thread(target=finish, daemon=True, name="ringtree-p2p").start()
        return fut


def isend(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
          group_dst: int | None = None) -> P2PWork | None:
    """Post ``tensor`` to ``dst`` (a global rank) or ``group_dst``; returns its handle. The
    tensor must not be written until the handle is waited."""
    return _post(tensor, dst, group_dst, group, tag, sending=True)


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
          group_src: int | None = None) -> P2PWork | None:
    """Post a receive into ``tensor`` from ``src`` (global) or ``group_src``, or from any
    rank when neither is given; returns its handle (``source_rank()`` names the sender)."""
    return _post(tensor, src, group_src, group, tag, sending=False)


def send(tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0,
         group_dst: int | None = None) -> None:
    """Send ``tensor`` to ``dst`` and wait until it has gone (the group's timeout)."""
    work = isend(tensor, dst, group, tag, group_dst)
    if work is not None:
        work.wait()


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0,
         group_src: int | None = None) -> int:
    """Receive into ``tensor`` from ``src`` (or any rank); the sender's global rank (-1 on a
    rank outside ``group``, as torch)."""
    work = irecv(tensor, src, group, tag, group_src)
    return -1 if work is None else work.source_rank()


@dataclass
class P2POp:
    """One operation of :func:`batch_isend_irecv`, as torch's ``P2POp``: ``op`` is
    :func:`isend` or :func:`irecv` (or torch's), ``peer`` a global rank or ``group_peer``
    a rank of ``group``."""

    op: Callable[..., Any]
    tensor: Any
    peer: int | None = None
    group: Any = None
    tag: int = 0
    group_peer: int | None = None


def batch_isend_irecv(p2p_op_list: Sequence[Any]) -> list[P2PWork]:
    """Post every operation of ``p2p_op_list`` (ringtree's or torch's P2POp) now, in any
    order, and return their handles. Posting never blocks, so ``[recv_from_1, send_to_1]``
    cannot deadlock; on NCCL the list goes as one group call. torch's errors: an item that
    is not a P2POp, or ops on different groups, a ValueError (an empty list too)."""
    ops = list(p2p_op_list)
    if not ops:
        raise RingtreeError("batch_isend_irecv needs a non-empty list of P2POp")
    for item in ops:
        if not all(hasattr(item, a) for a in ("op", "tensor", "peer", "group", "tag")):
            raise RingtreeError(f"batch_isend_irecv takes P2POp objects, got "
                                f"{type(item).__name__}")
    if len({id(item.group) for item in ops}) > 1:
        raise RingtreeError("every P2POp of a batch must be on the same group")
    g = group_for(ops[0].group)
    if g is None:
        not_a_member_warning("batch_isend_irecv")
        return []
    sends, recvs = [], []
    for item in ops:
        sending = _sending(item.op)
        role = "dst" if sending else "src"
        in_group = getattr(item, "group_peer", None)  # torch's P2POp gives both
        peer = g.root(None, in_group, role) if in_group is not None else g.root(item.peer,
                                                                                None, role)
        _check_peer(g, peer, sending)
        (sends if sending else recvs).append((item, peer))
    return _post_batch(g, sends, recvs)


def _post_batch(g: Group, sends: list, recvs: list) -> list[P2PWork]:
    """Post a batch's sends and receives per tag, each tag's as one exchange."""
    works: dict[int, P2PWork] = {}
    for tag in sorted({item.tag for item, _ in sends + recvs}):
        channel = g.transport.channel(_tag(tag))
        mine_s = [(i, p) for i, p in sends if i.tag == tag]
        mine_r = [(i, p) for i, p in recvs if i.tag == tag]
        bufs_s = [(_buffer(i.tensor, g, False), p) for i, p in mine_s]
        bufs_r = [(_buffer(i.tensor, g, True), p) for i, p in mine_r]
        reqs = channel.exchange(bufs_s, bufs_r)
        if len(reqs) == 1 and len(mine_s) + len(mine_r) > 1:  # one request for the group
            reqs = reqs * (len(mine_s) + len(mine_r))
        for (item, peer), req, sending in zip(
                mine_s + mine_r, reqs, [True] * len(mine_s) + [False] * len(mine_r),
                strict=True):
            works[id(item)] = P2PWork(g, channel, req, peer, sending, item.tensor)
    return [works[id(item)] for item, _ in sends + recvs]


def _sending(op: Any) -> bool:
    """Whether a P2POp's ``op`` is a send (ringtree's isend/send or torch's)."""
    name = getattr(op, "__name__", "")
    if name in ("isend", "send"):
        return True
    if name in ("irecv", "recv"):
        return False
    raise RingtreeError(f"a P2POp's op must be isend or irecv, got {op!r}")


def _post(tensor: Any, peer: int | None, group_peer: int | None, group: Any, tag: int,
          sending: bool) -> P2PWork | None:
    g = group_for(group)
    what = "isend" if sending else "irecv"
    if g is None:
        not_a_member_warning(what)
        return None
    buf = _buffer(tensor, g, writable=not sending)
    channel = g.transport.channel(_tag(tag))
    if not sending and peer is None and group_peer is None:
        return P2PWork(g, channel, channel.recv_any(buf), None, False, tensor)
    rank = g.root(peer, group_peer, "dst" if sending else "src")
    _check_peer(g, rank, sending)
    req = channel.send(buf, rank) if sending else channel.recv(buf, rank)
    return P2PWork(g, channel, req, rank, sending, tensor)


def _buffer(tensor: Any, g: Group, writable: bool) -> Any:
    return buffers.flat(tensor, "tensor", g.kind, writable=writable)


def _tag(tag: Any) -> int:
    if not isinstance(tag, int) or isinstance(tag, bool):
        raise RingtreeTypeError(f"tag must be an int, got {tag!r}")
    return tag


def _check_peer(g: Group, peer: int, sending: bool) -> None:
    """torch's ValueError for a message to or from this rank itself."""
    if peer == g.rank:
        role = "destination" if sending else "source"
        raise RingtreeError(f"Invalid {role} rank: {role} rank should not be the same as the "
                            "rank of the current process")
