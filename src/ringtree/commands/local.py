"""Checks made before a command starts processes on this machine (``run``, ``demo``, ``bench``,
``calibrate``, ``validate``, ``lab ddp``): PyTorch is installed when the transport needs it,
the processes fit the cores, their buffers fit the memory. Each refuses with a one-line
RingtreeError before anything starts."""

from __future__ import annotations

import argparse
import importlib.util
import os

from ringtree.config import RANKS_PER_CORE
from ringtree.dtypes import itemsize as dtype_itemsize
from ringtree.errors import RingtreeError
from ringtree.units import format_bytes

#: Never more local processes than this, --force or not: each builds the whole schedule and
#: opens a connection to every peer, which at a few thousand exhausts file and port limits.
MAX_LOCAL_RANKS = 1024
#: What one rank holds, in copies of the buffer: its input and a fresh copy per call, the
#: result, the engine's own result and the engine's scratch, plus the integers the input is
#: made of while it is built (16 bytes per element).
BUFFER_COPIES_PER_RANK = 6
INPUT_BYTES_PER_ELEMENT = 16


def torch_missing() -> bool:
    """Whether ``import torch`` would fail for want of the package (checked without importing
    it, which takes seconds)."""
    try:
        return importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):  # a blocked or half-removed torch
        return True


def require_torch(command: str, otherwise: str = "") -> None:
    """RingtreeError, saying how to install it (and ``otherwise``, what works without it),
    when PyTorch is missing."""
    if torch_missing():
        instead = f" ({otherwise})" if otherwise else ""
        raise RingtreeError(f"{command} needs PyTorch: pip install 'ringtree[torch]'{instead}")


def add_force(p: argparse.ArgumentParser, most: int = MAX_LOCAL_RANKS) -> None:
    """``--force``: start more processes than the cores can hold (``most`` at most)."""
    p.add_argument(
        "--force",
        action="store_true",
        help=f"start more than {RANKS_PER_CORE} processes per core anyway (at most "
        f"{most}; expect slow start-up and noisy timings)",
    )


def cores() -> int:
    """This machine's cores (what the processes would share)."""
    return os.cpu_count() or 1


def check_ranks(n_ranks: int, force: bool, flag: str = "-n") -> None:
    """RingtreeError when ``n_ranks`` local processes are more than the cores can hold
    (RANKS_PER_CORE per core, unless ``force``) or more than MAX_LOCAL_RANKS (``flag``:
    the option that gave them, in the message)."""
    if n_ranks > MAX_LOCAL_RANKS:
        raise RingtreeError(
            f"{flag} {n_ranks:,}: at most {MAX_LOCAL_RANKS:,} local processes, even with --force "
            "(each connects to every other; thousands exhaust the file and port limits)"
        )
    limit = RANKS_PER_CORE * cores()
    if n_ranks > limit and not force:
        raise RingtreeError(
            f"{flag} {n_ranks:,}: {n_ranks:,} local processes on {cores()} cores is more than "
            f"{RANKS_PER_CORE} per core (at most {limit}): they would queue for the cores and "
            "time noise; use fewer, or --force to start them anyway"
        )


def memory_bytes() -> int | None:
    """This machine's physical memory (None when the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def check_memory(
    n_ranks: int, size_bytes: int, dtype: str, *, what: str = "--size", flag: str = "--size"
) -> None:
    """RingtreeError when ``n_ranks`` processes, each holding BUFFER_COPIES_PER_RANK copies of
    a ``size_bytes`` buffer (and the input's integers), need more than the machine's memory.
    (An unknown ``dtype`` counts as bytes: the command names it next.)"""
    try:
        itemsize = dtype_itemsize(dtype)
    except RingtreeError:
        itemsize = 1
    total = memory_bytes()
    per_rank = BUFFER_COPIES_PER_RANK * size_bytes + INPUT_BYTES_PER_ELEMENT * (
        size_bytes // max(1, itemsize)
    )
    need = n_ranks * per_rank
    if total is not None and need > total:
        raise RingtreeError(
            f"{what} {format_bytes(size_bytes)} on {n_ranks} processes needs about "
            f"{format_bytes(need)} of memory ({BUFFER_COPIES_PER_RANK} copies of the buffer "
            f"per process, and {INPUT_BYTES_PER_ELEMENT} B per element while its input is "
            f"built), more than this machine's {format_bytes(total)}: use a smaller {flag}"
        )
