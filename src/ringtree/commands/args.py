"""argparse types shared by commands: they turn bad values into one-line errors, and keep
every number inside the range a command can serve in reasonable time and memory."""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ringtree.algorithms import algorithms_for
from ringtree.collectives import Collective
from ringtree.cost.links import parse_link, parse_links
from ringtree.errors import RingtreeError
from ringtree.units import parse_params, parse_size, parse_time

#: -n: ranks are 32-bit integers in MPI and NCCL (and the closed forms serve any N up to that).
MAX_RANKS = 2**31 - 1
#: Pipeline chunks a closed form prices: more than 65,536 chunks cost more in per-step latency
#: than they save on any buffer (auto tries powers of two up to 1,024), and each one is a step
#: the closed form walks.
MAX_CHUNKS = 2**16
#: Plain numbers (prices, hours, steps per second, TFLOP/s, MFU, MiB): from 1e-9 to 1e12, so
#: that products and quotients of a few of them stay finite.
MIN_POSITIVE_NUMBER, MAX_NUMBER = 1e-9, 1e12
#: The shortest time > 0 taken (a compute step, a timeout): 1 ns, the smallest unit read.
MIN_POSITIVE_TIME_S = 1e-9


def _whole_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < low:
        got = repr(text) if value is None else value
        raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {got}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (number of ranks, iterations, chunks)."""
    return _whole_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0 (a root rank)."""
    return _whole_at_least(text, 0)


def int_up_to(limit: int, why: str, *, low: int = 1) -> Callable[[str], int]:
    """An integer from ``low`` (0 or 1) to ``limit``; the error says the limit and ``why``."""

    def convert(text: str) -> int:
        """The integer ``text`` if it is in range."""
        value = positive_int(text) if low == 1 else non_negative_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{value:,} is too large: at most {limit:,} ({why})")
        return value

    convert.__name__ = f"int_up_to_{limit}"
    return convert


#: -n/--ranks where the command needs no schedule of its own (closed forms, any N).
ranks = int_up_to(MAX_RANKS, "ranks are 32-bit integers in MPI and NCCL")
#: Counts of things (layers, sequence length, batch, GPUs, cores): at most 2**60, so that
#: the products of a few of them stay exact and within floating point.
count = int_up_to(2**60, "counts stay exact in 64-bit integers")
#: --chunks of commands that price pipelines from closed forms.
chunks = int_up_to(
    MAX_CHUNKS,
    "beyond that per-step latency outweighs any gain, and every chunk is a step to price",
)


def size(text: str) -> int:
    """A size in bytes: 4096, 4K (= 4096, as nccl-tests), 64KB, 14GB, 64MiB."""
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


def flavors(text: str) -> tuple[str, ...]:
    """Data-parallel flavours, comma-separated: ``zero2,zero3`` (fsdp = zero3)."""
    from ringtree.plan.strategy import parse_flavors

    return _convert(parse_flavors, text)


def _number(text: str, minimum_exclusive: bool) -> float:
    """A float from MIN_POSITIVE_NUMBER (or 0 unless ``minimum_exclusive``) to MAX_NUMBER."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 if minimum_exclusive else value >= 0) or value == float("inf"):
        bound = "> 0" if minimum_exclusive else ">= 0"
        raise RingtreeError(f"expected a number {bound}, got {text!r}")
    if value > MAX_NUMBER or 0 < value < MIN_POSITIVE_NUMBER:
        low = f"{MIN_POSITIVE_NUMBER:g}" + ("" if minimum_exclusive else " (or 0)")
        raise RingtreeError(
            f"number {text!r} is out of range: expected {low} to {MAX_NUMBER:g}, so that the "
            "figures computed from it stay finite"
        )
    return value


def duration(text: str) -> float:
    """A time >= 0 in seconds: 200ms, 1.5s, 5us, 3h."""
    return _convert(parse_time, text)


def positive_duration(text: str) -> float:
    """A time > 0 in seconds (a compute time per step)."""
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"time {text!r} must be > 0")
    if seconds < MIN_POSITIVE_TIME_S:
        raise argparse.ArgumentTypeError(f"time {text!r} is too short: at least 1ns")
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


#: The help of every command's collective argument.
COLLECTIVE_HELP = "one of " + ", ".join(c.value for c in Collective)
#: Every registered algorithm's name, for help texts (each collective has some of them).
ALGORITHM_NAMES = ", ".join(sorted({a for c in Collective for a in algorithms_for(c)}))


def collective(text: str) -> Collective:
    """A collective name, hyphens or underscores."""
    try:
        return Collective.parse(text)
    except RingtreeError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_workers(
    parser: argparse.ArgumentParser, convert: Callable[[str], int] = ranks, required: bool = True
) -> None:
    """``-n/--ranks N``: number of ranks (workers), at most MAX_RANKS (or what ``convert``
    takes)."""
    parser.add_argument(
        "-n", "--ranks", type=convert, required=required, metavar="N", help="number of ranks"
    )


def add_ranks_per_node(parser: argparse.ArgumentParser, help: str) -> None:
    """``--ranks-per-node G`` (default None: one node), for the hierarchical algorithms."""
    parser.add_argument("--ranks-per-node", type=positive_int, default=None, metavar="G", help=help)


def add_nodes(parser: Any, gpus_help: str) -> None:
    """``--nodes K`` (default 1) and ``--gpus-per-node G`` (default None: the cluster's) of a
    --cluster; ``parser`` may be an argument group."""
    parser.add_argument("--nodes", type=positive_int, default=1, metavar="K",
                        help="nodes of the --cluster (default 1)")
    parser.add_argument("--gpus-per-node", type=positive_int, default=None, metavar="G",
                        help=gpus_help)


def output_file(*suffixes: str, stdout_dash: bool = False) -> Callable[[str], str]:
    """A path the command will write, checked when the arguments are read, before any work:
    its suffix (one of ``suffixes``, when given) and that it can be written (the folder
    exists, is writable, the name is not a folder). ``stdout_dash``: "-" is stdout."""

    def convert(text: str) -> str:
        """``text`` if the command can write it."""
        if stdout_dash and text == "-":
            return text
        if suffixes and Path(text).suffix.lower() not in suffixes:
            raise argparse.ArgumentTypeError(f"file {text!r} must end in {' or '.join(suffixes)}")
        try:
            check_writable(text)
        except RingtreeError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text

    convert.__name__ = "output file"
    return convert


def check_writable(path: str) -> None:
    """RingtreeError (one line, with the system's reason) unless ``path`` can be written.

    A new file is created and removed again; an existing regular file is opened for
    appending (nothing written); a device or pipe (/dev/null, a process substitution) only
    needs write permission; a folder is refused."""
    if not path.strip():
        raise RingtreeError("the file name is empty")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise RingtreeError(f"cannot write {path!r}: {e.strerror}") from None
    try:
        if mode is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.close(fd)
            os.unlink(path)
        elif stat.S_ISDIR(mode):
            raise RingtreeError(f"cannot write {path!r}: it is a folder")
        elif stat.S_ISREG(mode):
            with open(path, "a"):
                pass
        elif not os.access(path, os.W_OK):
            raise RingtreeError(f"cannot write {path!r}: permission denied")
    except OSError as e:
        raise RingtreeError(f"cannot write {path!r}: {e.strerror or e}") from None
