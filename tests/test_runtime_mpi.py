"""The MPI transport without processes: one communicator carries a call's data, the
fingerprints, the give-up notices and the program's own point-to-point messages, each on
tags of its own; a long wait naps instead of taking a core, and times out."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.runtime import mpi
from ringtree.runtime.mpi import CONTROL_TAG, NOTICE_TAG, P2P_TAG, data_tag
from ringtree.runtime.transport import TransportTimeout

#: MPI_TAG_UB of the standard's minimum, Open MPI's UCX layer and Open MPI's ob1 / MPICH.
TAG_UBS = [32767, (1 << 23) - 1, (1 << 31) - 1]


@given(st.integers(0, (1 << 64) - 1), st.sampled_from(TAG_UBS))
def test_a_call_shape_s_data_never_takes_another_channel_s_tag(shape, tag_ub):
    tag = data_tag(shape, tag_ub)
    assert 0 <= tag <= tag_ub
    assert tag < P2P_TAG  # the user's p2p tag t travels as P2P_TAG + t
    assert tag not in (CONTROL_TAG, NOTICE_TAG)


def test_every_data_tag_below_p2p_s_is_used():
    """The shapes spread over all the tags left (65,534 of them), so that two shapes share a
    tag as rarely as they can."""
    tags = {data_tag(s, (1 << 31) - 1) for s in range(P2P_TAG)}
    assert tags == set(range(P2P_TAG)) - {CONTROL_TAG, NOTICE_TAG}


class _Late:
    """A request that completes ``after_s`` seconds from now (``Test`` as mpi4py's)."""

    def __init__(self, after_s: float) -> None:
        self.done_at, self.tests = time.perf_counter() + after_s, 0

    def Test(self) -> bool:  # noqa: N802 - mpi4py's name
        self.tests += 1
        return time.perf_counter() >= self.done_at


def test_a_long_wait_naps_instead_of_taking_a_core():
    waiter = SimpleNamespace(spin_s=mpi.SPIN_S)
    late = _Late(0.3)
    cpu = time.process_time()
    mpi.MpiTransport.wait(waiter, late, timeout_s=10)
    used = time.process_time() - cpu
    assert time.perf_counter() >= late.done_at
    # yielding all along would take ~0.3 s of this process's CPU; napping after YIELD_S, at
    # most (0.3 s / NAP_S) polls and a few ms
    assert used < 0.1 and late.tests < 0.3 / mpi.NAP_S + 0.01 / 1e-6, (used, late.tests)


def test_a_wait_past_its_timeout_raises():
    with pytest.raises(TransportTimeout):
        mpi.MpiTransport.wait(SimpleNamespace(spin_s=0.0), _Late(5), timeout_s=0.05)
