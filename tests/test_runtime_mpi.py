"""The MPI transport's tags, without processes: one communicator carries a call's data, the
fingerprints, the give-up notices and the program's own point-to-point messages, each on
tags of its own."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ringtree.runtime.mpi import CONTROL_TAG, NOTICE_TAG, P2P_TAG, data_tag

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
