"""TorchTransport's error paths, without a process group: a fake group stands in for gloo."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from ringtree.algorithms import build
from ringtree.collectives import Collective, ReduceOp
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
    t.kind, t.grouped, t.group, t.down = "gloo", False, group, group
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
