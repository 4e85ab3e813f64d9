"""The arithmetic the executor needs on buffers: allocate, copy, reduce, finish an average.

Two implementations behind one shape: numpy arrays, and torch tensors (any device). CPU
tensors of the dtypes in NUMPY_VIEWABLE reach the engine as numpy views of their memory (the
API makes them, :func:`ringtree.runtime.buffers.flat`), so they are reduced by numpy: its ufuncs
are single-threaded and release the GIL, whereas torch's intra-op thread pool spins its
workers after each parallel region and steals the cores that the engine's I/O threads and
the other ranks need (docs/engine.md, "Measurements behind the engine's shape").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ringtree.collectives import ReduceOp
from ringtree.errors import RingtreeError, RingtreeRuntimeError

_NP_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PRODUCT: np.multiply,
    ReduceOp.MIN: np.minimum,
    ReduceOp.MAX: np.maximum,
    ReduceOp.BAND: np.bitwise_and,
    ReduceOp.BOR: np.bitwise_or,
    ReduceOp.BXOR: np.bitwise_xor,
}

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
COMPLEX_DTYPES = ("complex64", "complex128")
#: Every dtype the engine moves; the reducing collectives accept the subset in REDUCIBLE.
DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool", *COMPLEX_DTYPES)
_ARITHMETIC = frozenset(o for o in ReduceOp if not o.bitwise)
_BITWISE = frozenset(o for o in ReduceOp if o.bitwise)
#: Which pairwise operations each dtype family supports (AVG combines as SUM): the bitwise
#: ones integers and bool only, as torch's gloo (bool: and, or, xor, min, max).
REDUCIBLE = {
    **{d: _ARITHMETIC for d in FLOAT_DTYPES},
    **{d: frozenset(ReduceOp) for d in INT_DTYPES},
    **{d: frozenset({ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.AVG}) for d in COMPLEX_DTYPES},
    "bool": frozenset({ReduceOp.MIN, ReduceOp.MAX}) | _BITWISE,
}


#: Dtypes whose CPU tensors the engine handles as numpy views of the same memory (numpy has
#: them and reduces them as torch does; float16 and bfloat16 stay torch tensors).
NUMPY_VIEWABLE = frozenset(
    {"float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool", "complex64"}
    | {"complex128"}
)

_DTYPE_NAMES: dict[Any, str] = {}


def dtype_name(buf: Any) -> str:
    """``float32``, ``bfloat16`` ... for a numpy array or a torch tensor."""
    dt = buf.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:  # str(dtype) costs microseconds: remember it
        name = _DTYPE_NAMES[dt] = str(dt).removeprefix("torch.")
    return name


def check_dtype(name: str, op: ReduceOp | None) -> None:
    """Raise RingtreeError unless the engine can move ``name`` (and reduce it with ``op``),
    of torch's type: RuntimeError for a dtype gloo does not move and for a bitwise op on a
    dtype that is not an integer, ValueError for the rest (complex max, as torch)."""
    if name not in DTYPES:
        raise RingtreeRuntimeError(
            f"dtype {name} is not supported: expected one of {', '.join(DTYPES)}"
        )
    if op is not None and op not in REDUCIBLE[name]:
        ok = ", ".join(o.value for o in ReduceOp if o in REDUCIBLE[name])
        error = RingtreeRuntimeError if op.bitwise else RingtreeError
        raise error(f"dtype {name} cannot be reduced with {op.value}: it accepts {ok}")


class NumpyKernels:
    """Kernels on numpy arrays."""

    name = "numpy"

    @staticmethod
    def empty(n: int, like: np.ndarray) -> np.ndarray:
        return np.empty(n, dtype=like.dtype)

    @staticmethod
    def copy(dst: np.ndarray, src: np.ndarray) -> None:
        dst[...] = src  # np.copyto's argument handling costs more than the copy of a few KiB

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
    """Kernels on torch tensors: CUDA tensors, and CPU tensors of dtypes numpy lacks."""

    name = "torch"

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self._fns = {
            ReduceOp.SUM: torch.add,
            ReduceOp.PRODUCT: torch.mul,
            ReduceOp.MIN: torch.minimum,
            ReduceOp.MAX: torch.maximum,
            ReduceOp.BAND: torch.bitwise_and,
            ReduceOp.BOR: torch.bitwise_or,
            ReduceOp.BXOR: torch.bitwise_xor,
        }

    def empty(self, n: int, like: Any) -> Any:
        return self._torch.empty(n, dtype=like.dtype, device=like.device)

    @staticmethod
    def copy(dst: Any, src: Any) -> None:
        dst.copy_(src)

    def reduce(self, op: ReduceOp, a: Any, b: Any, out: Any) -> None:
        """``out = a (op) b``; ``out`` may be ``a`` or ``b``."""
        self._fns[op.combine](a, b, out=out)

    @staticmethod
    def finish(op: ReduceOp, buf: Any, n_ranks: int) -> None:
        """In place: divide by N for AVG (floor division for integers); else nothing."""
        if op is not ReduceOp.AVG:
            return
        if buf.dtype.is_floating_point or buf.dtype.is_complex:
            buf.div_(n_ranks)
        else:
            buf.div_(n_ranks, rounding_mode="floor")


_NUMPY = NumpyKernels()
_TORCH: list[TorchKernels] = []


def kernels_for(buf: Any) -> NumpyKernels | TorchKernels:
    """The kernels that operate on ``buf``'s kind of array (shared, stateless)."""
    if isinstance(buf, np.ndarray):
        return _NUMPY
    if not _TORCH:
        _TORCH.append(TorchKernels())
    return _TORCH[0]
