"""argparse types shared by commands: they turn bad values into one-line errors."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ringtree.collectives import Collective
from ringtree.cost.links import parse_link, parse_links
from ringtree.errors import RingtreeError
from ringtree.units import parse_params, parse_size, parse_time


def positive_int(text: str) -> int:
    """An integer >= 1 (number of ranks, iterations, chunks)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a root rank)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value}")
    return value


def size(text: str) -> int:
    """A size in bytes: 4096, 64KB, 14GB, 64MiB."""
    try:
        return parse_size(text)
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _convert(parse: Callable[[str], Any], text: str) -> Any:
    """``parse(text)``, its RingtreeError turned into argparse's one-line error."""
    try:
        return parse(text)
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number(text: str, minimum_exclusive: bool) -> float:
    """A finite float >= 0 (> 0 when ``minimum_exclusive``)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 if minimum_exclusive else value >= 0) or value == float("inf"):
        bound = "> 0" if minimum_exclusive else ">= 0"
        raise RingtreeError(f"expected a number {bound}, got {text!r}")
    return value


def duration(text: str) -> float:
    """A time >= 0 in seconds: 200ms, 1.5s, 5us, 3h."""
    return _convert(parse_time, text)


def positive_duration(text: str) -> float:
    """A time > 0 in seconds (a compute time per step)."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"time {text!r} must be > 0")
    return seconds


def params(text: str) -> int:
    """A parameter count: 7e9, 7B, 500k, 1.5M."""
    return _convert(parse_params, text)


def non_negative_number(text: str) -> float:
    """A number >= 0 (a price, a number of hours)."""
    return _convert(lambda t: _number(t, minimum_exclusive=False), text)


def positive_number(text: str) -> float:
    """A number > 0 (steps per second)."""
    return _convert(lambda t: _number(t, minimum_exclusive=True), text)


def link(text: str) -> Any:
    """One link: a preset or ``custom:bw=450GB/s,lat=3us``."""
    return _convert(parse_link, text)


def links(text: str) -> Any:
    """A link preset, ``custom:bw=450GB/s,lat=3us``, or ``INTRA+INTER`` (nvlink4+ib-hdr)."""
    return _convert(parse_links, text)


def collective(text: str) -> Collective:
    """A collective name, hyphens or underscores."""
    try:
        return Collective.parse(text)
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_workers(parser: argparse.ArgumentParser) -> None:
    """``-n/--ranks N``: number of ranks (workers)."""
    parser.add_argument(
        "-n", "--ranks", type=positive_int, required=True, metavar="N", help="number of ranks"
    )
