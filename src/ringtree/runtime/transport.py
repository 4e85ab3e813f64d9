"""The narrow interface every engine implements: post a send, post a receive, wait.

A transport moves bytes between the ranks of one group; it knows nothing of schedules.
Buffers are views (a slice of the caller's tensor or array, never a copy); a posted send's
buffer must not be written, and a posted receive's buffer not read, until ``wait`` returns
for it. Each request is waited at most once. Messages between one pair of ranks with one tag
match in the order they are posted (MPI's non-overtaking rule), which the executor relies on;
messages with different tags never match (:meth:`Transport.message_tag`).

Transports count what they move: ``bytes_sent`` / ``bytes_received`` / ``messages_sent``
are running totals of posted operations, so a caller can take the difference around a call.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from ringtree.errors import RingtreeError

Buffer = Any  # a 1-D contiguous view: numpy.ndarray or torch.Tensor
Request = Any  # whatever the engine returns for a posted operation


class TransportTimeout(Exception):
    """A wait did not finish within its time limit."""


class TransportClosed(Exception):
    """The connection to the peer broke (the peer process died or closed it)."""


class Transport(ABC):
    """Point-to-point messaging for one group of ``size`` ranks, as seen by ``rank``.

    kind: engine name for messages and choices ("local", "gloo", "nccl", "mpi").
    grouped: the engine needs a step's sends and receives posted together (NCCL, where a
    lone send to a peer that is itself sending can deadlock); the executor then runs
    step by step through :meth:`exchange` instead of pipelining single operations.
    """

    kind: str = "abstract"
    grouped: bool = False
    #: Messages from this size land in place over data sent earlier (None: the program's
    #: default, 1 MiB): below it, waiting for that send costs more than a copy on engines
    #: whose late-posted receives cost a round trip (gloo).
    in_place_min_bytes: int | None = None
    #: The tag of messages posted without one (fingerprints on the control channel).
    tag: int = 0

    def in_place_from(self) -> float | None:
        """The ``in_place_min_bytes`` to compile this transport's programs with: never (inf)
        on a grouped engine, which posts a whole step at once; else the transport's own."""
        return math.inf if self.grouped else self.in_place_min_bytes

    def __init__(self, rank: int, size: int) -> None:
        self.rank, self.size = rank, size
        #: The engine's state for calls made with this transport as their group
        #: (:class:`ringtree.runtime.groups.Group`), made on the first such call.
        self.engine_group: Any = None
        self.bytes_sent = 0
        self.bytes_received = 0
        self.messages_sent = 0

    @staticmethod
    def nbytes(buf: Buffer) -> int:
        """Size of a buffer in bytes (numpy arrays and torch tensors both have ``nbytes``)."""
        return int(buf.nbytes)

    def message_tag(self, shape: int) -> int:
        """The tag of the data messages of one call shape (``shape``: a digest of the call's
        fingerprint, the same on every rank, :meth:`CallSignature.digest
        <ringtree.runtime.fingerprint.CallSignature.digest>`): a message of one shape never
        meets a receive of another, so ranks that disagree on a shape they all know (no
        exchange then) time out instead of taking each other's data. Any int here."""
        return shape

    def send(self, buf: Buffer, peer: int, tag: int | None = None) -> Request:
        """Post a send of ``buf`` to ``peer`` (``tag`` None: :attr:`tag`); counts its bytes;
        returns without waiting."""
        self.bytes_sent += self.nbytes(buf)
        self.messages_sent += 1
        return self._send(buf, peer, self.tag if tag is None else tag)

    def recv(self, buf: Buffer, peer: int, tag: int | None = None) -> Request:
        """Post a receive into ``buf`` from ``peer`` (``tag`` None: :attr:`tag`); returns
        without waiting."""
        self.bytes_received += self.nbytes(buf)
        return self._recv(buf, peer, self.tag if tag is None else tag)

    def exchange(
        self, sends: Sequence[tuple[Buffer, int]], recvs: Sequence[tuple[Buffer, int]],
        tag: int | None = None,
    ) -> list[Request]:
        """Post several sends and receives at once; returns the requests to wait for (sends
        first, in order; a grouped engine may return one request for the whole group)."""
        return ([self.send(b, p, tag) for b, p in sends]
                + [self.recv(b, p, tag) for b, p in recvs])

    @abstractmethod
    def _send(self, buf: Buffer, peer: int, tag: int) -> Request: ...

    @abstractmethod
    def _recv(self, buf: Buffer, peer: int, tag: int) -> Request: ...

    @abstractmethod
    def wait(self, req: Request, timeout_s: float) -> None:
        """Block until ``req`` completes. Raises TransportTimeout after ``timeout_s`` seconds,
        TransportClosed if the peer's connection broke."""

    #: Sends complete before the peer posts the matching receive (MPI's eager messages), so
    #: a peer that comes after this rank gave up on a call can match the call's messages and
    #: finish it as if nothing were wrong: the group then looks for the peers' give-up
    #: notices before its calls (:class:`ringtree.runtime.groups.Group`).
    stale_sends: bool = False

    def give_up(self, call: int, waited_for: int) -> None:
        """Tell the peers, without blocking and as far as the engine can, that this rank gave
        up on the group's call number ``call`` (it raised PeerError) while it waited for group
        rank ``waited_for``. Nothing where ranks cannot come late (one process's threads)."""
        return None

    def given_up(self) -> dict[int, tuple[int, int]]:
        """The peers' give-up notices received so far: ``{peer: (call, rank it waited for)}``
        (empty where :meth:`give_up` sends nothing)."""
        return {}

    def channel(self, tag: int) -> Transport:
        """The transport of the program's own point-to-point messages of ``tag``
        (:mod:`ringtree.runtime.p2p`): a channel of their own, so that they never match the
        engine's messages, whatever calls are in flight. RingtreeError where there is none."""
        raise RingtreeError(f"the {self.kind} transport carries no point-to-point messages")

    def done(self, req: Request) -> bool:
        """Whether ``req`` has completed, without waiting (the p2p channels' requests)."""
        raise RingtreeError(f"the {self.kind} transport cannot test a request")

    def recv_any(self, buf: Buffer) -> Request:
        """Post a receive from whichever peer sends first; :meth:`source` says which once it
        has completed. RingtreeError where the engine cannot (torch's src=None)."""
        raise RingtreeError(f"the {self.kind} transport receives from a given rank only: "
                            "pass src=")

    def source(self, req: Request) -> int:
        """The group rank a completed :meth:`recv_any` came from."""
        raise RingtreeError(f"the {self.kind} transport receives from a given rank only")

    def control(self) -> Transport:
        """The transport that fingerprint exchanges travel on: a channel of its own where the
        engine has one (so a rank that checks while a peer sends data never mixes the two),
        else this transport."""
        return self

    def counters(self) -> tuple[int, int, int]:
        """``(bytes_sent, bytes_received, messages_sent)`` so far."""
        return self.bytes_sent, self.bytes_received, self.messages_sent
