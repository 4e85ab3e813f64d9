"""Element types by name: one alias table and one size table for every command and engine.

Canonical names are numpy's and torch's (``float32``, ``bfloat16``, ``int8`` ...); the
aliases people type (``fp32``, ``float``, ``half``, ``bf16``, ``fp8``, ``int`` ...) map onto
them. ``fp8`` is ``float8_e4m3``; ``tf32`` is stored as ``float32``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ringtree.errors import RingtreeError

ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2,
    "float8_e4m3": 1, "float8_e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16,
}
ALIASES = {
    "fp64": "float64", "double": "float64",
    "fp32": "float32", "float": "float32", "tf32": "float32",
    "fp16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3", "e4m3": "float8_e4m3", "e5m2": "float8_e5m2",
    "int": "int32",
}


def canonical(name: str, offered: Sequence[str] | None = None, where: str = "") -> str:
    """The canonical name of ``name`` (``fp32`` -> ``float32``); RingtreeError when it is
    unknown, or not among ``offered`` (``where`` says by what, e.g. "run --backend mpi")."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    allowed = list(ITEMSIZE) if offered is None else list(offered)
    if key not in allowed:
        what = f"dtype {name!r} is not offered by {where}" if where else f"unknown dtype {name!r}"
        raise RingtreeError(f"{what}: expected one of {', '.join(allowed)}")
    return key


def itemsize(name: str) -> int:
    """Bytes per element of a dtype name (any alias)."""
    return ITEMSIZE[canonical(name)]
