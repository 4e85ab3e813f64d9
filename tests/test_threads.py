"""torchrun's thread policy for ranks sharing a machine's cores."""

from __future__ import annotations

import pytest
import torch

from ringtree.runtime.threads import share_cores


@pytest.fixture
def threads(monkeypatch):
    before = torch.get_num_threads()
    for key in ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE", "RINGTREE_THREADS"):
        monkeypatch.delenv(key, raising=False)
    torch.set_num_threads(8)
    yield
    torch.set_num_threads(before)


def test_ranks_sharing_cores_get_an_equal_share_and_a_warning(threads):
    with pytest.warns(RuntimeWarning, match="4 ranks share 8 cores: .* from 8 to 2"):
        assert share_cores(4, cores=8) == 2
    assert torch.get_num_threads() == 2


def test_more_ranks_than_cores_leave_one_thread_each(threads):
    with pytest.warns(RuntimeWarning):
        assert share_cores(4, cores=2) == 1
    assert torch.get_num_threads() == 1


def test_a_launcher_s_local_world_size_counts_instead_of_the_group(threads, monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # 16 ranks, one per machine
    assert share_cores(16, cores=8) is None
    assert torch.get_num_threads() == 8


@pytest.mark.parametrize("key, value", [("OMP_NUM_THREADS", "8"), ("RINGTREE_THREADS", "keep")])
def test_an_explicit_choice_is_left_alone(threads, monkeypatch, key, value):
    monkeypatch.setenv(key, value)
    assert share_cores(4, cores=8) is None
    assert torch.get_num_threads() == 8


def test_never_raises_the_count(threads):
    torch.set_num_threads(1)
    assert share_cores(2, cores=8) is None
    assert torch.get_num_threads() == 1
