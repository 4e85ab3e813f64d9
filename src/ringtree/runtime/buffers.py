"""The caller's buffers as the engine works on them: 1-D views of the same memory, never copies.

Two kinds of buffer reach the engine, numpy arrays and torch tensors, and both satisfy
:class:`Buffer`. A CPU tensor of a dtype numpy has (float32/64, ints, bool, complex) enters
as a numpy view of its memory: per call, a few numpy operations replace some twenty torch
calls (slices, ``.numpy()``, ``.device``), each of which costs microseconds when torch's code
has left the CPU caches -- as it has in a training step, between collectives. The transports
take numpy views (gloo wraps them with ``torch.from_numpy``). Other tensors (CUDA, float16,
bfloat16) stay tensors, detached from autograd (same memory: a parameter that requires grad
can be written, as torch's collectives write it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ringtree.collectives import block_bounds
from ringtree.errors import RingtreeError, RingtreeRuntimeError, RingtreeTypeError
from ringtree.runtime.kernels import NUMPY_VIEWABLE, dtype_name


class Buffer(Protocol):
    """What the engine reads of a buffer (numpy arrays and torch tensors both have it)."""

    dtype: Any
    nbytes: int

    def __getitem__(self, key: slice) -> Any: ...


def flat(buf: Any, what: str, kind: str, writable: bool) -> Any:
    """A 1-D view of ``buf`` for a transport of ``kind`` (module doc); RingtreeError naming
    ``what`` when it cannot be one (not contiguous, read-only, not a buffer, host memory on
    NCCL)."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise RingtreeError(f"{what} must be contiguous: got strides {buf.strides}")
        if writable and not buf.flags.writeable:
            raise RingtreeError(f"{what} is read-only: pass a writable array")
        if kind == "nccl":
            raise RingtreeError(
                f"{what} is a numpy array: NCCL carries CUDA tensors (torch.from_numpy(a)"
                ".cuda()), or use a gloo group for host memory"
            )
        return buf if buf.ndim == 1 else buf.reshape(-1)
    if not hasattr(buf, "is_contiguous"):
        raise RingtreeTypeError(
            f"{what} must be a torch tensor or a numpy array, got {type(buf).__name__}"
        )
    arr = None if kind == "nccl" else _numpy_view(buf, what)
    if arr is not None:  # a new array: never ``is`` another
        if not arr.flags.c_contiguous:
            raise RingtreeError(f"{what} must be contiguous: call .contiguous() first")
        return arr if arr.ndim == 1 else arr.reshape(-1)
    if not buf.is_contiguous():
        raise RingtreeError(f"{what} must be contiguous: call .contiguous() first")
    if kind == "nccl" and buf.device.type != "cuda":
        raise RingtreeError(
            f"{what} is on {buf.device}: NCCL carries CUDA tensors (move it with .cuda(), "
            "or use a gloo group for CPU tensors)"
        )
    view = buf.detach()
    return view if view.dim() == 1 else view.view(-1)


def _numpy_view(t: Any, what: str) -> np.ndarray | None:
    """A numpy view of CPU tensor ``t`` when its dtype is in NUMPY_VIEWABLE (one torch call in
    the common case), else None; RingtreeError for a lazily conjugated or negated view."""
    try:
        arr = t.numpy()
    except TypeError:  # not in host memory, or a dtype numpy lacks (bfloat16)
        return None
    except RuntimeError:  # it requires grad, or its memory does not hold its values
        if t.is_conj() or t.is_neg():
            raise RingtreeError(
                f"{what} is a lazily conjugated or negated view: call .resolve_conj() and "
                ".resolve_neg() first (the engine moves memory as it is)"
            ) from None
        if not t.requires_grad:
            raise
        return _numpy_view(t.detach(), what)
    return arr if dtype_name(arr) in NUMPY_VIEWABLE else None


def numel(x: Any) -> int:
    """Number of elements."""
    return int(x.size) if isinstance(x, np.ndarray) else int(x.numel())


def itemsize(x: Any) -> int:
    """Bytes per element."""
    return int(x.itemsize) if isinstance(x, np.ndarray) else int(x.element_size())


def device(x: Any) -> Any:
    """The tensor's device, None for a numpy array."""
    return getattr(x, "device", None)


def span(a: Any) -> tuple[int, int]:
    """The byte addresses ``[start, end)`` of ``a``'s memory."""
    start = a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data_ptr()
    return start, start + int(a.nbytes)


def overlap(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` share any byte (numpy's bounds test, 0.3 us, for two arrays:
    their addresses cost 1.4 us each)."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return bool(np.may_share_memory(a, b))
    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1 and min(a1 - a0, b1 - b0) > 0


def same_memory(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` start at the same address."""
    return span(a)[0] == span(b)[0]


def concat(parts: Sequence[Any], n: int, what: str) -> Any:
    """An empty flat buffer for a list of N per-rank blocks (:func:`join`); RingtreeError
    unless there are N blocks of the np.array_split sizes of their total."""
    if len(parts) != n:
        raise RingtreeRuntimeError(
            f"{what} is a list of {len(parts)} tensors: expected one per rank ({n})"
        )
    sizes = [numel(p) for p in parts]
    b = block_bounds(sum(sizes), n)
    want = [b[r + 1] - b[r] for r in range(n)]
    if sizes != want:
        raise RingtreeRuntimeError(f"{what} blocks have {sizes} elements: expected {want}")
    return join(parts, what)


def join(parts: Sequence[Any], what: str) -> Any:
    """An empty flat buffer of ``parts``' sizes together, of their kind, dtype and device
    (:func:`fill_from` copies the parts in, :func:`split_into` back out); RingtreeError when
    the parts' dtypes differ."""
    first = parts[0]
    odd = next((p for p in parts if p.dtype != first.dtype), None)
    if odd is not None:
        raise RingtreeError(f"{what} mixes dtypes {first.dtype} and {odd.dtype}: give one dtype")
    total = sum(numel(p) for p in parts)
    if isinstance(first, np.ndarray):
        return np.empty(total, dtype=first.dtype)
    return first.new_empty(total)


def empty_view(x: Any) -> Any:
    """A view of none of ``x``'s elements (a buffer that is not there: same kind, dtype and
    device)."""
    return x.reshape(-1)[:0]


def split_into(whole: Any, parts: Sequence[Any]) -> None:
    """Copy consecutive slices of ``whole`` into ``parts`` (each keeps its shape)."""
    start = 0
    for p in parts:
        k = numel(p)
        src = whole[start : start + k].reshape(p.shape)
        if isinstance(p, np.ndarray):
            np.copyto(p, src)
        else:
            p.copy_(src)
        start += k


def fill_from(whole: Any, parts: Sequence[Any]) -> None:
    """Copy ``parts`` side by side into ``whole`` (the inverse of :func:`split_into`)."""
    start = 0
    for p in parts:
        k = numel(p)
        dst = whole[start : start + k]
        if isinstance(dst, np.ndarray):
            np.copyto(dst, np.asarray(p).reshape(-1))
        else:
            dst.copy_(p.reshape(-1))
        start += k


def on_caller_stream(x: Any, fn: Callable[[], None]) -> Callable[[], None]:
    """``fn``, run on the caller's current CUDA stream when ``x`` is a CUDA tensor (an async
    call runs on another thread, whose current device and stream are not the caller's)."""
    if isinstance(x, np.ndarray) or x.device.type != "cuda":
        return fn
    import torch

    stream = torch.cuda.current_stream(x.device)

    def run() -> None:
        with torch.cuda.stream(stream):
            fn()

    return run
