"""The arithmetic the executor needs on buffers: allocate, copy, reduce, finish an average.

Two implementations behind one shape: numpy arrays, and torch tensors (any device). On CPU,
torch tensors of dtypes numpy handles are reduced through zero-copy numpy views: numpy's
ufuncs are single-threaded and release the GIL, whereas torch's intra-op thread pool spins
its workers after each parallel region and steals the cores that the engine's I/O threads
and the other ranks need (measured: 2-3x slower collectives on 2 cores).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ringtree.collectives import ReduceOp
from ringtree.errors import RingtreeError

_NP_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
}

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
COMPLEX_DTYPES = ("complex64", "complex128")
#: Every dtype the engine moves; the reducing collectives accept the subset in REDUCIBLE.
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool", *COMPLEX_DTYPES)
#: Which pairwise operations each dtype family supports (AVG combines as SUM).
REDUCIBLE = {
    **{d: frozenset(ReduceOp) for d in FLOAT_DTYPES + INT_DTYPES},
    **{d: frozenset({ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.AVG}) for d in COMPLEX_DTYPES},
    "bool": frozenset({ReduceOp.MIN, ReduceOp.MAX}),
}


_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(buf: Any) -> str:
    """``float32``, ``bfloat16`` ... for a numpy array or a torch tensor."""
    dt = buf.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:  # str(dtype) costs microseconds: remember it
        name = _DTYPE_NAMES[dt] = str(dt).removeprefix("torch.")
    return name


def check_dtype(name: str, op: ReduceOp | None) -> None:
    """Raise RingtreeError unless the engine can move ``name`` (and reduce it with ``op``)."""
    if name not in DTYPES:
        raise RingtreeError(f"dtype {name} is not supported: expected one of {', '.join(DTYPES)}")
    if op is not None and op not in REDUCIBLE[name]:
        ok = ", ".join(o.value for o in ReduceOp if o in REDUCIBLE[name])
        raise RingtreeError(f"dtype {name} cannot be reduced with {op.value}: it accepts {ok}")


class NumpyKernels:
    """Kernels on numpy arrays."""

    name = "numpy"

    @staticmethod
    def empty(n: int, like: np.ndarray) -> np.ndarray:
        return np.empty(n, dtype=like.dtype)

    def arithmetic(self, bufs: tuple[Any, ...]) -> tuple[NumpyKernels, tuple[Any, ...]]:
        """The kernels and views of ``bufs`` that reductions and copies run on: these."""
        return self, bufs

    @staticmethod
    def copy(dst: np.ndarray, src: np.ndarray) -> None:
        np.copyto(dst, src)

    @staticmethod
    def reduce(op: ReduceOp, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """``out = a (op) b``; ``out`` may be ``a`` or ``b``."""
        _NP_UFUNCS[op.combine](a, b, out=out)

    @staticmethod
    def finish(op: ReduceOp, buf: np.ndarray, n_ranks: int) -> None:
        """In place: divide by N for AVG (floor division for integers); else nothing."""
        if op is not ReduceOp.AVG:
            return
        if np.issubdtype(buf.dtype, np.integer):
            np.floor_divide(buf, n_ranks, out=buf)
        else:
            np.true_divide(buf, buf.dtype.type(n_ranks), out=buf)


class TorchKernels:
    """Kernels on torch tensors; CPU dtypes that numpy has go through numpy views."""

    name = "torch"
    _NUMPY_OK = frozenset(
        {"float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool", "complex64"}
        | {"complex128"}
    )

    def __init__(self, like: Any) -> None:
        import torch

        self._torch = torch
        self.via_numpy = like.device.type == "cpu" and dtype_name(like) in self._NUMPY_OK
        self._fns = {
            ReduceOp.SUM: torch.add,
            ReduceOp.PRODUCT: torch.mul,
            ReduceOp.MIN: torch.minimum,
            ReduceOp.MAX: torch.maximum,
        }

    def empty(self, n: int, like: Any) -> Any:
        return self._torch.empty(n, dtype=like.dtype, device=like.device)

    def arithmetic(
        self, bufs: tuple[Any, ...]
    ) -> tuple[NumpyKernels | TorchKernels, tuple[Any, ...]]:
        """The kernels and views of ``bufs`` that reductions and copies run on: numpy views
        of the whole buffers when the dtype allows (slicing a numpy view costs 0.15 us, a
        tensor slice plus its ``.numpy()`` 1.8 us, three per reduction), else these."""
        if self.via_numpy:
            return _NUMPY, tuple(b.numpy() for b in bufs)
        return self, bufs

    def copy(self, dst: Any, src: Any) -> None:
        if self.via_numpy:
            np.copyto(dst.numpy(), src.numpy())
        else:
            dst.copy_(src)

    def reduce(self, op: ReduceOp, a: Any, b: Any, out: Any) -> None:
        """``out = a (op) b``; ``out`` may be ``a`` or ``b``."""
        if self.via_numpy:
            _NP_UFUNCS[op.combine](a.numpy(), b.numpy(), out=out.numpy())
        else:
            self._fns[op.combine](a, b, out=out)

    def finish(self, op: ReduceOp, buf: Any, n_ranks: int) -> None:
        """In place: divide by N for AVG (floor division for integers); else nothing."""
        if op is not ReduceOp.AVG:
            return
        if self.via_numpy:
            NumpyKernels.finish(op, buf.numpy(), n_ranks)
        elif buf.dtype.is_floating_point or buf.dtype.is_complex:
            buf.div_(n_ranks)
        else:
            buf.div_(n_ranks, rounding_mode="floor")


_NUMPY = NumpyKernels()
_TORCH: dict[tuple[Any, Any], TorchKernels] = {}


def kernels_for(buf: Any) -> NumpyKernels | TorchKernels:
    """The kernels that operate on ``buf``'s kind of array (shared, stateless)."""
    if isinstance(buf, np.ndarray):
        return _NUMPY
    key = (buf.device.type, buf.dtype)
    k = _TORCH.get(key)
    if k is None:
        k = _TORCH[key] = TorchKernels(buf)
    return k
