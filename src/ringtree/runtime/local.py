"""In-process transport: N ranks as N threads of one process, for tests and teaching.

A message (matched by sender, receiver and tag) is copied once, straight from the sender's
view into the receiver's view, by whichever of the two posts second (a rendezvous, like gloo
and MPI's large messages): so a send completes only once its receiver has posted, exactly
the behaviour the executor must survive on real engines. A rank that fails marks the world,
and every rank waiting on it fails within a fraction of a second instead of hanging.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ringtree.collectives import Collective, Part, ReduceOp, Splits
from ringtree.runtime.transport import Buffer, Transport, TransportClosed, TransportTimeout

_POLL_S = 0.05


class _Request:
    __slots__ = ("done", "error", "peer")

    def __init__(self, peer: int) -> None:
        self.done = threading.Event()
        self.error: str | None = None
        self.peer = peer


class LocalWorld:
    """The shared mailboxes of ``size`` in-process ranks; ``transport(r)`` is rank r's end."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._sends: dict[tuple[int, int, int], deque] = {}
        self._recvs: dict[tuple[int, int, int], deque] = {}
        self.failed: dict[int, str] = {}
        self._channels: dict[int, LocalWorld] = {}

    def control(self) -> LocalWorld:
        """A sibling world for control messages (fingerprints), made on first use."""
        return self.channel(-1)

    def channel(self, tag: int) -> LocalWorld:
        """A sibling world for the messages of ``tag`` (-1: control), made on first use."""
        with self._lock:
            world = self._channels.get(tag)
            if world is None:
                world = self._channels[tag] = LocalWorld(self.size)
                world.failed = self.failed  # a failed rank fails every channel
            return world

    def transport(self, rank: int) -> LocalTransport:
        """Rank ``rank``'s transport."""
        return LocalTransport(self, rank)

    def fail(self, rank: int, why: str) -> None:
        """Mark ``rank`` dead: its peers' waits on it raise TransportClosed."""
        with self._lock:
            self.failed.setdefault(rank, why)

    def post(self, src: int, dst: int, buf: Buffer, sending: bool, tag: int = 0) -> _Request:
        req = _Request(dst if sending else src)
        key = (src, dst, tag)
        with self._lock:
            mine = (self._sends if sending else self._recvs).setdefault(key, deque())
            theirs = (self._recvs if sending else self._sends).setdefault(key, deque())
            if not theirs:
                mine.append((req, buf))
                return req
            other, other_buf = theirs.popleft()
        send_buf, recv_buf = (buf, other_buf) if sending else (other_buf, buf)
        if send_buf.nbytes != recv_buf.nbytes:
            why = (
                f"message size mismatch: rank {src} sent {send_buf.nbytes} bytes, "
                f"rank {dst} expected {recv_buf.nbytes}"
            )
            req.error = other.error = why
        else:
            _copy(recv_buf, send_buf)
        req.done.set()
        other.done.set()
        return req


def _copy(dst: Buffer, src: Buffer) -> None:
    if isinstance(dst, np.ndarray):
        np.copyto(dst, src)
    else:
        dst.copy_(src)


class LocalTransport(Transport):
    """One rank's end of a LocalWorld."""

    kind = "local"

    def __init__(self, world: LocalWorld, rank: int) -> None:
        super().__init__(rank, world.size)
        self.world = world
        self._control: LocalTransport | None = None
        self._channels: dict[int, LocalTransport] = {}

    def control(self) -> LocalTransport:
        """This rank's end of the world's control sibling (made on first use)."""
        if self._control is None:
            self._control = self.world.control().transport(self.rank)
        return self._control

    def channel(self, tag: int) -> LocalTransport:
        """This rank's end of the world's sibling for messages of ``tag``."""
        end = self._channels.get(tag)
        if end is None:
            end = self._channels[tag] = self.world.channel(tag).transport(self.rank)
        return end

    def done(self, req: _Request) -> bool:
        """Whether ``req`` has completed."""
        return req.done.is_set()

    def _send(self, buf: Buffer, peer: int, tag: int) -> _Request:
        return self.world.post(self.rank, peer, buf, True, tag)

    def _recv(self, buf: Buffer, peer: int, tag: int) -> _Request:
        return self.world.post(peer, self.rank, buf, False, tag)

    def wait(self, req: _Request, timeout_s: float) -> None:
        """Wait for ``req``; a failed peer raises TransportClosed within ``_POLL_S`` s."""
        deadline = time.monotonic() + timeout_s
        while not req.done.wait(min(_POLL_S, max(0.0, deadline - time.monotonic()))):
            if req.peer in self.world.failed:
                raise TransportClosed(f"rank {req.peer} failed: {self.world.failed[req.peer]}")
            if time.monotonic() >= deadline:
                raise TransportTimeout
        if req.error:
            raise TransportClosed(req.error)


def run_ranks(n: int, body: Callable[[LocalTransport], Any]) -> list[Any]:
    """Run ``body(transport)`` for ranks 0..n-1 on threads; return each rank's value.

    If a rank raises, the world is marked so its peers fail fast, and the first error
    (lowest rank) is re-raised after every thread has ended.
    """
    world = LocalWorld(n)
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def main(r: int) -> None:
        try:
            results[r] = body(world.transport(r))
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            errors[r] = e
            world.fail(r, str(e))

    threads = [threading.Thread(target=main, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results


def run_local(
    collective: Collective | str,
    inputs: Sequence[np.ndarray],
    *,
    algorithm: str = "ring",
    op: ReduceOp = ReduceOp.SUM,
    root: int = 0,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    timeout_s: float = 60.0,
    slice_bytes: int | None = None,
    splits: Splits | None = None,
) -> list[np.ndarray | None]:
    """Run a collective on in-process ranks through the real executor.

    ``inputs`` as for :func:`ringtree.collectives.reference` (for all-gather and gather,
    block r only; gather and scatter blocks must be equal, as torch's are); ``splits``: an
    all-to-all's split sizes (default: even blocks). Returns what each rank holds afterwards,
    in the same shape (None where unspecified). Inputs are not modified.
    """
    from ringtree.runtime import api

    col = Collective.parse(collective)
    lay, n = col.layout, len(inputs)
    count = lay.count_of_inputs([x.size for x in inputs], root)
    kw: dict[str, Any] = {"algorithm": algorithm, "timeout": timeout_s, "n_chunks": n_chunks,
                          "ranks_per_node": ranks_per_node, "slice_bytes": slice_bytes}

    def body(t: LocalTransport) -> np.ndarray | None:
        r = t.rank
        x = np.array(inputs[r], copy=True).reshape(-1)
        if splits is not None:  # an all-to-all's blocks of any size
            out = np.empty(sum(splits.received(r)), dtype=x.dtype)
            api.all_to_all_single(out, x, list(splits.received(r)), list(splits.sent(r)),
                                  group=t, **kw)
            return out
        size = lay.output_elems(count, n, r, root)
        out = None if size is None else np.empty(size, dtype=x.dtype)
        api.collective(col, x, out, op, root, t, **kw)
        if not lay.holds_result(r, root):
            return None
        result = x if out is None else out
        return result[:0] if lay.input is Part.NONE else result  # the barrier holds nothing

    return run_ranks(n, body)
