"""torch.distributed point-to-point as a Transport: gloo for CPU tensors, NCCL for CUDA.

Posts through the ``send``/``recv`` of the group's gloo backend (group-local ranks, one C++
call per message, none of the Python checks of ``dist.isend``, nor the ProcessGroup's trip
through torch's op dispatcher, which costs a small call a tenth of its time; a group of
several backends, ``cpu:gloo,cuda:nccl``, posts through the group, which picks one per
tensor). Buffers are tensors, or numpy views of CPU tensors (the API hands the engine those:
a numpy slice costs far less than a tensor slice), which are wrapped with
``torch.from_numpy`` (the same memory). Each call's data messages carry the tag of its call
shape (:meth:`TorchTransport.message_tag`). The figures behind these choices: docs/engine.md,
"Measurements behind the engine's shape". NCCL is a grouped engine: a step's operations are
posted together through ``batch_isend_irecv`` so that two ranks sending to each other cannot
deadlock; they carry byte views, so every dtype moves (NCCL has no int16 or complex).
NCCL's calls return once queued on its stream, and a wait only makes the caller's stream
wait for the message (the reductions that follow are ordered after it), as torch's own NCCL
collectives do: the CPU queues the whole schedule without blocking (a wait with a timeout
would poll the GPU every millisecond, a millisecond per step), and a dead or silent peer is
caught by torch's NCCL watchdog after the process group's timeout. On gloo, waits are
bounded: gloo raises after the timeout and immediately when the peer's connection closes;
both become TransportTimeout / TransportClosed. A post that fails at once (gloo refuses to
send on a pair whose peer has gone) returns a failed request that raises TransportClosed
when waited, where the executor knows the peer and the step.

Full duplex on gloo: a gloo connection carries both directions of a pair through one socket
and one lock, and a send written by the caller's thread holds that lock while the I/O thread
waits to read the other direction -- two ranks exchanging data take turns. So on gloo the
transport has a companion group and sends "downwards" (to a lower rank) on it, "upwards" on
the original: each direction of a pair gets its own socket, lock and I/O thread (a 4 MiB
exchange between two ranks takes three quarters of the time).

Private groups: the companion (RINGTREE_DUPLEX=0 turns it off) and a gloo *control* group for
fingerprint exchanges (on NCCL groups too: host memory, and never in the way of the data) are
made by :func:`open_torch` on the group's members only, through the default store under a
prefix named after the group (torch gives every member the same group name), after a
rendezvous bounded by the first call's timeout -- not through ``dist.new_group``, whose
identity depends on every group each process has made, and which would block ranks that are
not members. An absent member is a PeerError naming it.

Coming late: a member that gives up at the first call's rendezvous adds GAVE_UP to the
arrivals counter, atomically, so that every member agrees on whether the group ever had all
its members (a late one then fails at once, naming who gave up waiting for it, instead of
hanging in gloo's connect); a rank that gives up on a later call leaves a notice in the same
store, which a peer that times out reads to say what happened rather than "died".
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import torch

from ringtree.errors import RingtreeError
from ringtree.runtime.errors import PeerError
from ringtree.runtime.threads import share_cores
from ringtree.runtime.transport import Buffer, Transport, TransportClosed, TransportTimeout

#: Tag of messages posted without one (fingerprints), and of every message on NCCL, whose
#: point-to-point has no tags; a call's data messages carry its shape's tag (message_tag).
TAG = 0x5254
#: gloo takes a tag of 32 bits, torch's binding a signed int: a shape's tag is below this.
_GLOO_TAGS = 1 << 31
#: The program's point-to-point messages of tag t travel with tag P2P_TAG + t, on the
#: private control group (gloo) or the group itself (NCCL, which has no tags).
P2P_TAG = 1 << 24


class TorchTransport(Transport):
    """Point-to-point over a torch.distributed process group.

    ``down``: the group that carries messages to lower ranks (default: ``group`` itself);
    ``control``: the transport of fingerprint exchanges (default: this one); ``store``:
    where give-up notices go (module doc; None: nowhere). Use :func:`open_torch` to make
    them for a group.
    """

    #: the tag this transport's messages carry (a p2p channel's: P2P_TAG + the user's)
    tag: int = TAG

    def __init__(self, group: Any, down: Any = None, control: Transport | None = None,
                 store: Any = None, tag: int = TAG) -> None:
        import torch.distributed as dist

        self._dist = dist
        self.group = group
        super().__init__(group.rank(), group.size())
        self.kind = _backend_name(group)
        self.grouped = self.kind == "nccl"
        # a group of several backends (cpu:gloo,cuda:nccl) keeps the dispatcher's choice
        self.up = _backend(group) if self.kind == "gloo" else group
        self.down = down if down is not None else self.up
        self._control = control
        self._store = store
        self.tag = tag
        self._channels: dict[int, TorchTransport] = {}

    def control(self) -> Transport:
        """The transport fingerprints travel on (see the module doc)."""
        return self._control or self

    def message_tag(self, shape: int) -> int:
        """gloo: a tag per call shape (a gloo slot of its own); NCCL: TAG, it has no tags."""
        return TAG if self.grouped else shape % _GLOO_TAGS

    def channel(self, tag: int) -> TorchTransport:
        """The transport of the program's messages of ``tag``: over gloo the private control
        group's pairs (never in the way of the group's own or ringtree's messages), over
        NCCL the group itself, in posting order (NCCL has no tags)."""
        end = self._channels.get(tag)
        if end is None:
            if not 0 <= tag < (1 << 31) - P2P_TAG:
                raise RingtreeError(f"tag={tag} is out of range: 0..{(1 << 31) - P2P_TAG - 1}")
            carrier = self.group if self.grouped else self.control().group
            end = self._channels[tag] = TorchTransport(carrier, tag=P2P_TAG + tag)
        return end

    def done(self, req: Any) -> bool:
        """``Work.is_completed()``."""
        return bool(req.is_completed())

    def recv_any(self, buf: Buffer) -> Any:
        """gloo's ``recv_anysource`` (not over NCCL, as torch)."""
        if self.grouped:
            raise RingtreeError("NCCL receives from a given rank only: pass src=")
        if type(buf) is np.ndarray:
            buf = torch.from_numpy(buf)
        self.bytes_received += self.nbytes(buf)
        return self.up.recv_anysource([buf], self.tag)

    def source(self, req: Any) -> int:
        """``Work._source_rank()``: the group rank that sent."""
        return int(req._source_rank())

    def give_up(self, call: int, waited_for: int) -> None:
        """Leave a notice in the group's store (nothing when its host is gone)."""
        if self._store is not None:
            with contextlib.suppress(RuntimeError):
                self._store.set(f"gave_up/{self.rank}", f"{call} {waited_for}")

    def given_up(self) -> dict[int, tuple[int, int]]:
        """The peers' notices in the store (a round trip per peer: read after a failure)."""
        found: dict[int, tuple[int, int]] = {}
        if self._store is None:
            return found
        for peer in range(self.size):
            key = f"gave_up/{peer}"
            with contextlib.suppress(RuntimeError, ValueError):
                if peer != self.rank and self._store.check([key]):
                    call, waited = self._store.get(key).decode().split()
                    found[peer] = (int(call), int(waited))
        return found

    def _send(self, buf: Buffer, peer: int, tag: int) -> Any:
        if type(buf) is np.ndarray:  # a numpy view of a CPU tensor: the same memory
            buf = torch.from_numpy(buf)
        try:
            return (self.down if peer < self.rank else self.up).send([buf], peer, tag)
        except RuntimeError as e:
            return _Failed(e)

    def _recv(self, buf: Buffer, peer: int, tag: int) -> Any:
        if type(buf) is np.ndarray:
            buf = torch.from_numpy(buf)
        try:
            return (self.down if peer > self.rank else self.up).recv([buf], peer, tag)
        except RuntimeError as e:
            return _Failed(e)

    def exchange(
        self, sends: Sequence[tuple[Buffer, int]], recvs: Sequence[tuple[Buffer, int]],
        tag: int | None = None,
    ) -> list[Any]:
        """One ``batch_isend_irecv`` for NCCL (coalesced, no tags); plain posts otherwise."""
        if not self.grouped:
            return super().exchange(sends, recvs, tag)
        dist = self._dist
        ops = []
        for buf, peer in sends:
            self.bytes_sent += self.nbytes(buf)
            self.messages_sent += 1
            ops.append(dist.P2POp(dist.isend, _bytes(buf), group=self.group, tag=self.tag,
                                  group_peer=peer))
        for buf, peer in recvs:
            self.bytes_received += self.nbytes(buf)
            ops.append(dist.P2POp(dist.irecv, _bytes(buf), group=self.group, tag=self.tag,
                                  group_peer=peer))
        try:
            return list(dist.batch_isend_irecv(ops)) if ops else []
        except RuntimeError as e:
            return [_Failed(e)]

    def wait(self, req: Any, timeout_s: float) -> None:
        """``Work.wait`` with a timeout (at least 1 ms: gloo reads 0 ms as "no timeout"); on
        NCCL, stream order alone (see the module doc)."""
        try:
            if self.grouped:
                req.wait()
                return
            req.wait(timedelta(seconds=max(timeout_s, 0.001)))
        except RuntimeError as e:
            msg = str(e).split("\n")[0]
            if "Timed out" in msg or "timed out" in msg:
                raise TransportTimeout(msg) from None
            raise TransportClosed(_short(msg)) from None


class _Failed:
    """A post that raised: waiting for it raises the post's error (``Work.wait``'s shape)."""

    def __init__(self, error: RuntimeError) -> None:
        self.error = error

    def wait(self, timeout: timedelta) -> None:
        raise self.error


def _backend(group: Any) -> Any:
    """The gloo backend of process ``group``, whose ``send``/``recv`` skip the dispatcher
    (``group`` itself when it is one, or when this torch has no ``_get_backend``)."""
    try:
        return group._get_backend(torch.device("cpu"))
    except (AttributeError, RuntimeError):
        return group


def _bytes(buf: Any) -> Any:
    """``buf`` as bytes (a view): NCCL moves every dtype, int16, bool and complex included,
    as uint8 -- point-to-point needs no arithmetic."""
    if buf.dtype == torch.uint8:
        return buf
    if buf.numel() == 0:  # an empty slice may have stride 0, which view() refuses
        return buf.new_empty(0, dtype=torch.uint8)
    return buf.view(torch.uint8)


def _short(msg: str) -> str:
    """Drop gloo's source-location prefix ``[.../pair.cc:553] ``."""
    if msg.startswith("[") and "] " in msg:
        msg = msg.split("] ", 1)[1]
    return msg.split(". This is typically")[0]


def _backend_name(group: Any) -> str:
    import torch.distributed as dist

    try:
        return str(dist.get_backend(group))
    except (RuntimeError, ValueError):  # a private ProcessGroupGloo: not in torch's registry
        return "gloo"


def group_timeout_s(group: Any) -> float | None:
    """The timeout of torch process ``group`` (``init_process_group(timeout=)``,
    ``new_group(timeout=)``; torch's default otherwise: 30 min for gloo, 10 for NCCL), read
    from its backend's options; None when this torch keeps it elsewhere."""
    for device in ("cpu", "cuda"):
        try:
            timeout = group._get_backend(torch.device(device)).options._timeout
        except (AttributeError, RuntimeError):
            continue
        seconds = timeout.total_seconds()
        if seconds > 0:
            return float(seconds)
    return None


#: How many times this process opened ringtree's private groups for a group name: part of
#: their store prefix, so that a group opened again (caches cleared) never meets old keys.
_EPOCHS: dict[str, itertools.count] = {}


def open_torch(group: Any, timeout_s: float, duplex: bool = True) -> TorchTransport:
    """The transport of torch process ``group`` with its private groups (module doc), made
    once per group on each member; PeerError naming the members that did not arrive within
    ``timeout_s``. RingtreeError when torch.distributed is not initialized."""
    import torch.distributed as dist

    if not dist.is_initialized():
        raise RingtreeError(
            "torch.distributed is not initialized: call "
            "torch.distributed.init_process_group first (torchrun sets up the environment)"
        )
    kind = _backend_name(group)
    rank, size = group.rank(), group.size()
    if size == 1:
        return TorchTransport(group)
    if kind == "gloo":
        share_cores(size)
    name = str(group.group_name)
    epoch = next(_EPOCHS.setdefault(name, itertools.count()))
    default = dist.distributed_c10d._get_default_store()
    store = dist.PrefixStore(f"ringtree/{name}/{epoch}/", default)
    _rendezvous(store, rank, size, timeout_s, dist.get_process_group_ranks(group))
    control = TorchTransport(_private_gloo(store, "control", rank, size, timeout_s))
    down = None
    if kind == "gloo" and duplex:
        down = _private_gloo(store, "duplex", rank, size, timeout_s)
    return TorchTransport(group, down=down, control=control, store=store)


def _rendezvous(store: Any, rank: int, size: int, timeout_s: float, ranks: list[int]) -> None:
    """Wait until every member of the group has arrived, ``timeout_s`` at most: each member
    appends its rank to one key (so that whoever times out knows who is missing, even if the
    store's host is gone by then) and counts itself in another. One ``compare_set`` decides
    the outcome for all: the last to arrive sets ``state`` to ``complete``, a member that
    times out to ``abandoned`` (first noting whom it waited for), whichever comes first; a
    member that finds ``abandoned`` -- the late one, or one still waiting -- fails at once,
    naming who gave up waiting for whom."""
    store.append("arrived", f"{rank},")
    start = time.monotonic()
    deadline, pause = start + timeout_s, 0.001
    seen = {rank}
    try:
        state = store.compare_set("state", "", "complete") if store.add(
            "arrivals", 1) >= size else b""
        while state not in (b"complete", b"abandoned"):
            seen = {int(x) for x in store.get("arrived").decode().split(",") if x}
            if time.monotonic() >= deadline:
                missing = "/".join(map(str, sorted(set(range(size)) - seen)))
                store.append("gave_up", f"{rank}:{timeout_s:g}:{missing},")
                if store.compare_set("state", "", "abandoned") == b"complete":
                    return  # the last member came before this give-up: it does not stand
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
            if store.check(["state"]):
                state = store.get("state")
    except RuntimeError:  # the store's host is gone: who arrived is what we saw last
        state = b""
    if state == b"complete":
        return
    if state == b"abandoned":
        raise _abandoned(store, rank, ranks)
    raise _absent(rank, ranks, seen, start, timeout_s)


def _absent(rank: int, ranks: list[int], seen: set[int], start: float,
            timeout_s: float) -> PeerError:
    """The PeerError of a member whose timeout ran out at the rendezvous (``seen``: the
    members it saw arrive)."""
    missing = sorted(set(range(len(ranks))) - seen - {rank})
    missing = missing or [r for r in range(len(ranks)) if r != rank]
    who = ", ".join(f"{r} (global rank {ranks[r]})" for r in missing)
    return PeerError(
        f"rank {rank}: the first ringtree call on this group waited "
        f"{time.monotonic() - start:.3g} s for group rank{'s' if len(missing) > 1 else ''} "
        f"{who}, which did not make it within the {timeout_s:g} s timeout (died, hangs, or "
        "called something else)",
        rank=rank, peer=missing[0], step=0,
    )


def _abandoned(store: Any, rank: int, ranks: list[int]) -> PeerError:
    """The PeerError of a member that finds the rendezvous abandoned: a peer gave up waiting
    (for this rank, when it is the late one). ``peer``: the first absent rank other than this
    one, else the rank that gave up."""
    quits: list[str] = []
    culprits: list[int] = []
    with contextlib.suppress(RuntimeError, ValueError):
        for item in store.get("gave_up").decode().split(","):
            if item:
                r, t, missing = item.split(":")
                names = [int(m) for m in missing.split("/") if m]
                waited = ", ".join("this rank" if m == rank else f"group rank {m}"
                                   for m in names) or "its peers"
                quits.append(f"group rank {r} (global rank {ranks[int(r)]}) gave up waiting "
                             f"for {waited} when its {t} s timeout ran out")
                culprits += [m for m in names if m != rank] + [int(r)]
    why = "; ".join(quits) or "a peer gave up waiting for its peers"
    return PeerError(f"rank {rank}: the first ringtree call on this group cannot run: {why}",
                     rank=rank, peer=culprits[0] if culprits else -1, step=0)


def _private_gloo(store: Any, purpose: str, rank: int, size: int, timeout_s: float) -> Any:
    """A gloo process group of the same members, connected through ``store`` (every member
    has arrived, so connecting does not wait on an absent one)."""
    import torch.distributed as dist

    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = timedelta(seconds=max(timeout_s, 1.0))
    opts._devices = [dist.ProcessGroupGloo.create_default_device()]
    return dist.ProcessGroupGloo(dist.PrefixStore(purpose + "/", store), rank, size, opts)
