"""The caller's buffers as the engine sees them: 1-D views of the same memory, or one-line
errors naming the buffer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ringtree.errors import RingtreeError
from ringtree.runtime import buffers
from ringtree.runtime.buffers import flat


def test_a_cpu_tensor_of_a_numpy_dtype_is_a_numpy_view_of_its_memory():
    tensors = [
        torch.arange(6, dtype=torch.float32).reshape(2, 3),
        torch.nn.Parameter(torch.zeros(4, dtype=torch.float64)),
        torch.zeros(3, dtype=torch.bool),
        torch.zeros(2, 2, dtype=torch.complex64),
    ]
    for t in tensors:
        v = flat(t, "input", "gloo", writable=True)
        assert isinstance(v, np.ndarray) and v.shape == (t.numel(),)
        v[0] = 1
        assert t.reshape(-1)[0].item() == 1  # the same memory
        assert flat(t, "input", "gloo", writable=True) is not v  # a new view per call


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dtypes_numpy_does_not_reduce_like_torch_stay_tensors(dtype):
    t = torch.zeros(2, 3, dtype=dtype, requires_grad=True)
    v = flat(t, "output", "gloo", writable=True)
    assert isinstance(v, torch.Tensor) and v.shape == (6,) and not v.requires_grad
    assert v.data_ptr() == t.data_ptr()


def test_numpy_arrays_pass_as_they_are_or_flattened():
    a = np.zeros(5)
    assert flat(a, "input", "gloo", writable=False) is a
    b = np.zeros((2, 2))
    assert np.shares_memory(flat(b, "input", "gloo", writable=False), b)


@pytest.mark.parametrize(
    ("buf", "kind", "writable", "expected"),
    [
        (torch.ones(4, 4).t(), "gloo", False, "input must be contiguous"),
        (np.ones((4, 4)).T, "gloo", False, "input must be contiguous"),
        (np.ones(4)[::2], "mpi", False, "input must be contiguous"),
        (np.frombuffer(b"\0" * 8, dtype=np.float32), "gloo", True, "input is read-only"),
        (torch.ones(4), "nccl", False, "input is on cpu: NCCL carries CUDA tensors"),
        (np.ones(4), "nccl", False, "input is a numpy array: NCCL carries CUDA tensors"),
        (torch.ones(3, dtype=torch.complex64).conj(), "gloo", False, "lazily conjugated"),
        (torch._neg_view(torch.ones(3)), "gloo", False, "or negated view"),
        ([1.0, 2.0], "gloo", False, "input must be a torch tensor or a numpy array, got list"),
    ],
)
def test_what_cannot_be_a_view_is_a_one_line_error(buf, kind, writable, expected):
    with pytest.raises(RingtreeError) as info:
        flat(buf, "input", kind, writable)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_a_list_is_joined_into_one_buffer_and_filled_when_its_turn_comes():
    parts = [torch.arange(3.0), torch.arange(2.0).reshape(2, 1)]
    whole = buffers.join(parts, "the list")
    assert whole.shape == (5,) and whole.dtype == torch.float32
    buffers.fill_from(whole, parts)
    assert whole.tolist() == [0.0, 1.0, 2.0, 0.0, 1.0]
    joined = buffers.concat([np.ones(2, np.int16)] * 2, 2, "x")
    assert joined.dtype == np.int16 and joined.shape == (4,)
    with pytest.raises(RingtreeError, match="the list mixes dtypes float32 and float64"):
        buffers.join([np.ones(2, np.float32), np.ones(2)], "the list")
