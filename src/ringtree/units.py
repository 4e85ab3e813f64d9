"""Parsing and printing of sizes. GB = 1e9 bytes, GiB = 2**30 (the seed uses decimal units).

>>> parse_size("14GB"), parse_size("64MiB"), parse_size("4096")
(14000000000, 67108864, 4096)
"""

from __future__ import annotations

import re

from ringtree.errors import RingtreeError

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30, "gib": 2**30,
    "ti": 2**40, "tib": 2**40,
}  # fmt: skip
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from ``"14GB"``, ``"64MiB"``, ``"4K"`` (= 4000) or a plain integer.

    Rejects negative, non-integral and unknown-unit values with a one-line RingtreeError.
    """
    if isinstance(text, int):
        if text < 0:
            raise RingtreeError(f"size must be >= 0 bytes, got {text}")
        return text
    m = _NUMBER_UNIT.match(text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise RingtreeError(
            f"malformed size {text!r}: expected bytes like 4096, 64KB, 14GB or 64MiB "
            "(GB = 1e9, GiB = 2**30)"
        )
    value = float(m.group(1)) * _SIZE_UNITS[unit]
    if value != int(value):
        raise RingtreeError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def format_bytes(n: float) -> str:
    """``14e9 -> '14 GB'``, ``2e6 -> '2 MB'``, ``1536 -> '1.54 KB'`` (decimal units, 3 figures)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


DTYPE_BYTES = {
    "fp64": 8, "float64": 8, "double": 8,
    "fp32": 4, "float32": 4, "float": 4, "tf32": 4,
    "fp16": 2, "float16": 2, "half": 2, "bf16": 2, "bfloat16": 2,
    "fp8": 1, "e4m3": 1, "e5m2": 1,
    "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1,
}  # fmt: skip


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name (fp32, fp16, bf16, fp8, int8 ...)."""
    key = name.strip().lower()
    if key not in DTYPE_BYTES:
        known = ", ".join(sorted(DTYPE_BYTES))
        raise RingtreeError(f"unknown dtype {name!r}: expected one of {known}")
    return DTYPE_BYTES[key]
