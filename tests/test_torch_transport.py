"""TorchTransport's error paths and where it posts, without a process group: fakes stand in
for gloo."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ringtree.algorithms import build
from ringtree.collectives import Collective, ReduceOp
from ringtree.runtime import torch_dist
from ringtree.runtime.errors import PeerError
from ringtree.runtime.executor import Context, execute
from ringtree.runtime.kernels import kernels_for
from ringtree.runtime.program import compile_program
from ringtree.runtime.torch_dist import TorchTransport

GLOO_READ_ERROR = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
    "[127.0.0.1]:50414: Connection reset by peer. This is typically a sign of a crash"
)


class Done:
    def wait(self, timeout: timedelta) -> None:
        pass


class DeadPeerGroup:
    """gloo after the peer died: posting a send raises at once; receives hang up on wait."""

    def send(self, bufs: list, peer: int, tag: int) -> Done:
        raise RuntimeError(GLOO_READ_ERROR)

    def recv(self, bufs: list, peer: int, tag: int) -> Done:
        return Done()


def transport_over(group: object, rank: int, size: int) -> TorchTransport:
    t = TorchTransport.__new__(TorchTransport)
    TorchTransport.__bases__[0].__init__(t, rank, size)
    t.kind, t.grouped, t.group, t.up, t.down = "gloo", False, group, group, group
    return t


def test_a_send_refused_at_posting_becomes_a_peer_error_naming_peer_and_step():
    n, rank, count = 4, 2, 64
    t = transport_over(DeadPeerGroup(), rank, n)
    prog = compile_program(build(Collective.ALL_REDUCE, "ring", n), rank, count, 4, in_place=True)
    buf = np.ones(count, dtype=np.float32)
    ctx = Context(label="all-reduce (ring)", timeout_s=1.0)
    with pytest.raises(PeerError) as err:
        execute(prog, t, kernels_for(buf), ReduceOp.SUM, buf, buf, n, ctx)
    msg = str(err.value)
    assert msg.startswith("rank 2: all-reduce (ring) step 1 of 6"), msg
    assert "the connection to rank 3 broke" in msg and "Read error" in msg, msg
    assert "pair.cc" not in msg and "typically" not in msg, msg
    assert err.value.peer == 3 and err.value.step == 1


class Recording:
    """A gloo backend that notes which messages it was handed."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, int]] = []

    def send(self, bufs: list, peer: int, tag: int) -> Done:
        self.posted.append(("send", peer))
        return Done()

    def recv(self, bufs: list, peer: int, tag: int) -> Done:
        self.posted.append(("recv", peer))
        return Done()


class FrontGroup(Recording):
    """A ProcessGroup: posts made on it would go through torch's dispatcher to ``backend``."""

    def __init__(self, backend: Recording | None) -> None:
        super().__init__()
        self.backend = backend

    def rank(self) -> int:
        return 1

    def size(self) -> int:
        return 3

    def _get_backend(self, device: object) -> Recording:
        if self.backend is None:
            raise RuntimeError("No backend type associated with device type cpu")
        return self.backend


def test_posts_go_to_the_groups_gloo_backend_and_to_the_group_without_one():
    backend, down = Recording(), Recording()
    front = FrontGroup(backend)
    t = TorchTransport(front, down=down)
    buf = np.zeros(4, dtype=np.float32)
    for peer in (0, 2):
        t.wait(t.send(buf, peer), 1.0)
        t.wait(t.recv(buf, peer), 1.0)
    assert backend.posted == [("recv", 0), ("send", 2)]  # upwards sends, their receives
    assert down.posted == [("send", 0), ("recv", 2)]  # the duplex companion: downwards
    assert front.posted == []
    alone = FrontGroup(None)  # no backend for host memory: the group itself
    t = TorchTransport(alone)
    t.wait(t.send(buf, 2), 1.0)
    assert alone.posted == [("send", 2)]


def test_a_group_of_several_backends_lets_torch_pick_one_per_tensor(monkeypatch):
    monkeypatch.setattr(torch_dist, "_backend_name", lambda group: "cpu:gloo,cuda:nccl")
    backend = Recording()
    front = FrontGroup(backend)  # its gloo backend would get CUDA tensors too
    t = TorchTransport(front)
    t.wait(t.recv(np.zeros(2, dtype=np.float32), 2), 1.0)
    assert front.posted == [("recv", 2)] and backend.posted == []
