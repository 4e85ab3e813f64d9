"""Parsing and printing of sizes, times, bandwidths, parameter counts and money.

GB = 1e9 bytes, GiB = 2**30 (the seed uses decimal units); Gb = 1e9 bits. A size's bare
letter is nccl-tests' (``parsesize`` in its src/common.cu: "We use the binary system"): 4K =
4096, 64M = 2**26, 8G = 8 GiB, the same in every command; with a B it is decimal (4KB = 4000,
where nccl-tests would read 4096 too) and with iB binary (4KiB = 4096).

>>> parse_size("14GB"), parse_size("64MiB"), parse_size("4096")
(14000000000, 67108864, 4096)
>>> parse_time("200ms"), parse_bandwidth("200Gb/s"), parse_params("7B")
(0.2, 25000000000.0, 7000000000)
>>> format_time(0.4375), format_percent(0.1556), format_usd(179.2)
('440 ms (437.5)', '16 % (15.56)', '$180 (179.2)')
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction

from ringtree.errors import RingtreeError

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 2**10, "kb": 10**3, "m": 2**20, "mb": 10**6, "g": 2**30, "gb": 10**9,
    "t": 2**40, "tb": 10**12,
    "ki": 2**10, "kib": 2**10, "mi": 2**20, "mib": 2**20, "gi": 2**30, "gib": 2**30,
    "ti": 2**40, "tib": 2**40,
}
#: The largest size (and parameter count) anything takes: 2**60 bytes, 1 EiB (about 1.15e18 B).
#: Byte counts stay exact in 64-bit integers with room for what schedules multiply them by (an
#: all-reduce sends 2(N-1)/N S per rank), and no buffer comes near it.
MAX_SIZE_BYTES = 2**60
#: The longest time anything takes (a compute step, a latency, a timeout): a year.
MAX_TIME_S = 365 * 86400
#: Bandwidths from 1 B/s to 1e15 B/s (1000 TB/s, over a thousand times NVLink 5): beyond
#: either end the predicted times leave the floating-point range.
MIN_BANDWIDTH_BPS, MAX_BANDWIDTH_BPS = 1.0, 1e15
_NUMBER_UNIT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/\u00b5]*)\s*$")


def parse_size(text: str | int) -> int:
    """Bytes from ``"14GB"``, ``"64MiB"``, ``"4K"`` (= 4096, as nccl-tests reads it) or a
    plain integer.

    Rejects negative, non-integral, unknown-unit and larger than ``MAX_SIZE_BYTES`` (2**60)
    values with a one-line RingtreeError.
    """
    if isinstance(text, int):
        if text < 0:
            raise RingtreeError(f"size must be >= 0 bytes, got {text}")
        return _whole(Fraction(text), str(text), "size")
    if text.strip().startswith("-"):
        raise RingtreeError(f"size {text!r} is negative: expected bytes >= 0 like 4096 or 14GB")
    m = _NUMBER_UNIT.match(text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _SIZE_UNITS:
        raise RingtreeError(
            f"malformed size {text!r}: expected bytes like 4096, 4K, 64KB, 14GB or 64MiB "
            "(GB = 1e9, G and GiB = 2**30)"
        )
    return _whole(_exact(m.group(1), text, "size") * _SIZE_UNITS[unit], text, "size")


def _too_large(text: str, what: str) -> RingtreeError:
    unit = " bytes (1 EiB)" if what == "size" else ""
    return RingtreeError(
        f"{what} {text!r} is too large: at most 2**60 = {MAX_SIZE_BYTES:,}{unit}, "
        "so that byte counts stay exact in 64-bit integers"
    )


def _exact(number: str, text: str, what: str) -> Fraction:
    """The decimal ``number`` exactly (9007199254740993 stays odd, 1e18 is 10**18); a
    RingtreeError when it is 1e19 or more, beyond MAX_SIZE_BYTES whatever the unit."""
    d = Decimal(number)
    if d == 0:
        return Fraction(0)
    if d.adjusted() >= 19:  # 1e999999999 would take forever as an integer
        raise _too_large(text, what)
    if d.adjusted() < -40:  # under 1e-40 x 2**40: no whole number of anything
        return Fraction(1, 10**41)
    return Fraction(d)


def _whole(value: Fraction, text: str, what: str) -> int:
    """``value`` as an int; RingtreeError when over MAX_SIZE_BYTES or not whole."""
    if value > MAX_SIZE_BYTES:
        raise _too_large(text, what)
    if value.denominator != 1:
        raise RingtreeError(
            f"size {text!r} is not a whole number of bytes"
            if what == "size"
            else f"{what} {text!r} must be a whole number >= 1"
        )
    return int(value)


def format_bytes(n: float) -> str:
    """``14e9 -> '14 GB'``, ``2e6 -> '2 MB'``, ``1536 -> '1.54 KB'`` (decimal units, 3 figures)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name (fp32, fp16, bf16, fp8, int8 ...)."""
    from ringtree.dtypes import itemsize

    return itemsize(name)


def _number_unit(text: str, what: str, accepted: str) -> tuple[float, str]:
    """Split ``"1.5 GB/s"`` into ``(1.5, "GB/s")``; a one-line RingtreeError if malformed."""
    if isinstance(text, str) and text.strip().startswith("-"):
        raise RingtreeError(f"{what} {text!r} is negative: expected {accepted}")
    m = _NUMBER_UNIT.match(text) if isinstance(text, str) else None
    if m is None:
        raise RingtreeError(f"malformed {what} {text!r}: expected {accepted}")
    return float(m.group(1)), m.group(2)


# unit -> (multiply, divide): exact for the common cases (5us = 5 / 1e6)
_TIME_UNITS = {
    "": (1, 1), "s": (1, 1), "sec": (1, 1), "ms": (1, 10**3), "us": (1, 10**6),
    "\u00b5s": (1, 10**6), "ns": (1, 10**9), "min": (60, 1), "h": (3600, 1),
}


def parse_time(text: str) -> float:
    """Seconds from ``"200ms"``, ``"1.5s"``, ``"5us"`` (or ``"5\u00b5s"``), ``"100ns"``,
    ``"2min"``, ``"3h"``; a plain number is seconds. Negative or unknown units: RingtreeError."""
    accepted = "a time like 200ms, 1.5s, 5us, 100ns or 3h"
    value, unit = _number_unit(text, "time", accepted)
    if unit not in _TIME_UNITS:
        raise RingtreeError(f"malformed time {text!r}: expected {accepted}")
    mul, div = _TIME_UNITS[unit]
    seconds = value * mul / div
    if not seconds <= MAX_TIME_S:  # also inf (1e400s)
        raise RingtreeError(f"time {text!r} is too long: at most a year ({MAX_TIME_S:,} s)")
    return seconds


_BYTE_PREFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_BANDWIDTH_UNIT = re.compile(r"^(K|M|G|T|Ki|Mi|Gi|Ti|k)?(B|b|bit|bits)?(/s|ps)$")


def parse_bandwidth(text: str) -> float:
    """Bytes per second from ``"900GB/s"``, ``"450 GB/s"``, ``"200Gb/s"`` (bits: = 25 GB/s),
    ``"100Gbps"``, ``"12GiB/s"``; a plain number is bytes/s. Must be > 0.

    Capital B is bytes, small b (or ``bit``) is bits.
    """
    accepted = "a bandwidth like 900GB/s, 200Gb/s (bits), 100Gbps or 12GiB/s"
    value, unit = _number_unit(text, "bandwidth", accepted)
    if unit == "":
        scale = 1.0
    else:
        m = _BANDWIDTH_UNIT.match(unit)
        if m is None or (m.group(3) == "ps" and m.group(2) is None):
            raise RingtreeError(f"malformed bandwidth {text!r}: expected {accepted}")
        prefix = (m.group(1) or "").replace("k", "K")
        bits = m.group(3) == "ps" or (m.group(2) or "B") != "B"
        scale = _BYTE_PREFIX[prefix] / (8 if bits else 1)
    if value <= 0:
        raise RingtreeError(f"bandwidth {text!r} must be > 0")
    bps = value * scale
    if not MIN_BANDWIDTH_BPS <= bps <= MAX_BANDWIDTH_BPS:  # also inf (1e400GB/s)
        raise RingtreeError(
            f"bandwidth {text!r} is out of range: expected 1 B/s to 1000 TB/s (1e15 B/s), "
            "beyond which predicted times leave the floating-point range"
        )
    return bps


_PARAM_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_params(text: str | int) -> int:
    """A parameter count from ``"7e9"``, ``"7B"``, ``"500k"``, ``"1.5M"``, ``"1.2T"``
    (k = 1e3, M = 1e6, B = 1e9, T = 1e12). Must be a whole number from 1 to 2**60."""
    what, accepted = "parameter count", "a count like 7e9, 7B, 500k or 1.5M"
    if isinstance(text, int):
        count = Fraction(text)
    else:
        if text.strip().startswith("-"):
            raise RingtreeError(f"{what} {text!r} is negative: expected {accepted}")
        m = _NUMBER_UNIT.match(text)
        if m is None or m.group(2).lower() not in _PARAM_SUFFIX:
            raise RingtreeError(f"malformed {what} {text!r}: expected {accepted}")
        count = _exact(m.group(1), text, what) * _PARAM_SUFFIX[m.group(2).lower()]
    if count < 1:
        raise RingtreeError(f"{what} {text!r} must be a whole number >= 1")
    return _whole(count, str(text), what)


# -- printing figures the seed's way -----------------------------------------------------------
def figure(x: float) -> float:
    """``x`` rounded as the seed prints figures: two significant figures (437.5 -> 440,
    22.4 -> 22, 179.2 -> 180), three when the first digit is 1 and three are exact (1.12)."""
    if x == 0 or not math.isfinite(x):
        return x
    three = float(f"{x:.3g}")
    if f"{abs(three):e}".startswith("1") and math.isclose(three, x, rel_tol=1e-9):
        return three
    return float(f"{x:.2g}")


def _sig(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant figures, as ``1.25e-3`` below 0.01, else plain with
    thousands separators (``12,000``, ``437.5``, ``2.1``)."""
    if x != 0 and abs(x) < 0.01:
        mantissa, power = f"{x:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(power)}"
    return f"{float(f'{x:.{digits}g}'):,.10g}"


def _shown(exact: float, shown: float, scale: float, unit: str, exact_too: bool) -> str:
    """``shown / scale`` with its unit, then the exact value (4 significant figures, same
    unit) in parentheses when the rounding changed it."""
    number, precise = _sig(shown / scale, 3), _sig(exact / scale, 4)
    if exact_too and not math.isclose(shown, exact, rel_tol=1e-9) and precise != number:
        return f"{number}{unit} ({precise})"
    return f"{number}{unit}"


def format_time(seconds: float, exact: bool = True) -> str:
    """``0.4375 -> '440 ms (437.5)'``, ``1.12 -> '1.12 s'``, ``5e-6 -> '5 us'``.

    The figure is rounded the seed's way (:func:`figure`); with ``exact`` the exact value, in
    the same unit, follows in parentheses when the rounding changed it.
    """
    if seconds == 0:
        return "0 s"
    shown = figure(seconds)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(shown) >= scale * 0.9999999 or unit == "ns":
            return _shown(seconds, shown, scale, f" {unit}", exact)
    raise AssertionError("unreachable")


def format_percent(fraction: float, exact: bool = True) -> str:
    """An overhead fraction as a percentage: ``0.1556 -> '16 % (15.56)'``, ``5.6 -> '560 %'``."""
    return _shown(fraction * 100, figure(fraction * 100), 1.0, " %", exact)


def format_overhead(time_s: float, compute_s: float, exact: bool = True) -> str:
    """Communication time over compute time, as the seed works it out: the printed (rounded)
    time over the compute time, cut to two figures, then the exact ratio:
    ``(0.03111, 0.2) -> '15 % (15.56)'`` (31 ms / 200 ms), ``(0.4375, 0.2) -> '220 % (218.8)'``.
    """
    exact_pct = time_s / compute_s * 100
    if time_s == 0:
        return "0 %"
    ratio = Decimal(repr(figure(time_s))) / Decimal(repr(compute_s)) * 100
    shown = float(
        ratio.scaleb(-ratio.adjusted() + 1).quantize(1, ROUND_DOWN).scaleb(ratio.adjusted() - 1)
    )
    return _shown(exact_pct, shown, 1.0, " %", exact)


def format_usd(usd: float, exact: bool = True) -> str:
    """Dollars: ``179.2 -> '$180 (179.2)'``, ``2.074e-3 -> '$2.1e-3 (2.074e-3)'``, ``2.1 -> '$2.1'``
    (rounded as :func:`figure`, the exact value beside when rounding changed it).

    Amounts under a cent are written with a power of ten, as the seed writes them.
    """
    return "$" + _shown(usd, figure(usd), 1.0, "", exact)


def format_bandwidth(bytes_per_s: float) -> str:
    """``900e9 -> '900 GB/s'``, ``1.25e9 -> '1.25 GB/s'``, ``1.3e8 -> '130 MB/s'``."""
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if abs(bytes_per_s) >= scale:
            return f"{bytes_per_s / scale:.4g} {unit}"
    return f"{bytes_per_s:.4g} B/s"


def format_params(count: int) -> str:
    """``7e9 -> '7B'``, ``500_000 -> '500k'``, ``1_500_000 -> '1.5M'``, ``123 -> '123'``."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if count >= scale:
            return f"{count / scale:.4g}{suffix}"
    return str(count)
