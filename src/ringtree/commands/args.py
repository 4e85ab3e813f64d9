"""argparse types shared by commands: they turn bad values into one-line errors."""

from __future__ import annotations

import argparse

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.units import parse_size


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
