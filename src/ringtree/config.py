"""Every ``RINGTREE_*`` environment variable in one table, each validated when read.

A bad value is a one-line :class:`~ringtree.errors.RingtreeError` naming the variable and what
it accepts (never a raw ValueError on every call). The engine reads its variables once per
group, when ringtree first uses the group (as NCCL reads ``NCCL_*`` at initialisation); the
table is printed in docs/config.md, and a test checks that the two agree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ringtree.errors import RingtreeError
from ringtree.units import parse_size

CHECK_MODES = ("first", "always", "off")
#: Local processes per core beyond which a run warns and the commands want --force: above it
#: they queue for the cores, start slowly and time noise.
RANKS_PER_CORE = 4
DEBUG_LEVELS = ("WARN", "INFO")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _seconds(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError
    return value


def _check_mode(text: str) -> str:
    key = text.strip().lower()
    if key in ("first", "always", "off"):
        return key
    if key in _TRUE:  # "check on": the thorough check, as RINGTREE_CHECK=1 always meant
        return "always"
    if key in _FALSE:
        return "off"
    raise ValueError


def _flag(text: str) -> bool:
    key = text.strip().lower()
    if key in _TRUE:
        return True
    if key in _FALSE:
        return False
    raise ValueError


def _slice_bytes(text: str) -> int:
    value = parse_size(text)
    if not 64 <= value <= 2**30:
        raise ValueError
    return value


def _level(text: str) -> str:
    key = text.strip().upper()
    key = {"WARNING": "WARN"}.get(key, key)
    if key not in DEBUG_LEVELS:
        raise ValueError
    return key


def _text(text: str) -> str:
    return text.strip()


def _rank_start(text: str) -> str:
    key = text.strip().lower()
    if key not in ("fork", "spawn"):
        raise ValueError
    return key


def _threads(text: str) -> str:
    key = text.strip().lower()
    if key not in ("keep", "share"):
        raise ValueError
    return key


@dataclass(frozen=True)
class Variable:
    """One environment variable: its default (as text), what it accepts, what it does."""

    name: str
    default: str
    accepts: str
    parse: Callable[[str], Any]
    doc: str


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("RINGTREE_TIMEOUT", "300", "seconds > 0", _seconds,
                 "limit of a whole collective call, first call on a group included; a dead or "
                 "silent peer raises PeerError naming it. Unset, a torch group's own timeout "
                 "stands (init_process_group(timeout=), torch's default 30 min for gloo), "
                 "300 s elsewhere (MPI, transports)"),
        Variable("RINGTREE_CHECK", "first", "first, always or off (1/0 as always/off)",
                 _check_mode,
                 "mismatch detection: exchange a fingerprint of the call on the first call of "
                 "each call shape on a group (first), on every call (always), or never (off)"),
        Variable("RINGTREE_ALGO", "", "NCCL_ALGO's syntax: ring, ring,tree, ^ring, "
                 "allreduce:ring;alltoall:bruck", _text,
                 "what algorithm=\"auto\" may pick, as NCCL_ALGO: one name forces it, a list "
                 "restricts the choice, per collective where scoped; ignored (a WARN line) for "
                 "a collective it leaves nothing to run"),
        Variable("RINGTREE_SLICE_BYTES", "4MiB", "a size from 64 B to 1 GiB", _slice_bytes,
                 "largest message the engine sends; larger chunks are cut into slices"),
        Variable("RINGTREE_DUPLEX", "1", "1 or 0", _flag,
                 "gloo: a second connection per pair so both directions move at once"),
        Variable("RINGTREE_THREADS", "share", "share or keep", _threads,
                 "share: lower torch's intra-op threads when local ranks outnumber the cores "
                 "(as torchrun does); keep: leave them"),
        Variable("RINGTREE_RANK_START", "fork", "fork or spawn", _rank_start,
                 "how the launcher starts gloo and NCCL ranks: forked from one process that "
                 "imported torch once (fork), or each a fresh Python (spawn)"),
        Variable("RINGTREE_DEBUG", "WARN", "WARN or INFO", _level,
                 "INFO logs, once per call shape and group, the algorithm chosen and why "
                 "(like NCCL_DEBUG=INFO)"),
        Variable("RINGTREE_DEBUG_FILE", "", "a path; %h is the host, %p the process id",
                 _text, "where RINGTREE_DEBUG writes (default: standard error)"),
    )
}


def read(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The value of ``name`` in ``env`` (default: the process environment), parsed; its
    default when unset or empty; RingtreeError naming the variable when malformed."""
    var = VARIABLES[name]
    raw = (os.environ if env is None else env).get(name, "")
    text = raw if raw.strip() else var.default
    try:
        return var.parse(text)
    except (ValueError, RingtreeError):
        raise RingtreeError(f"{name}={raw!r} is not valid: expected {var.accepts}") from None


def is_set(name: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether ``name`` is set to something in ``env`` (default: the process environment)."""
    return bool((os.environ if env is None else env).get(name, "").strip())


def table() -> list[dict[str, str]]:
    """The variables as rows (name, default, accepts, doc), for documentation."""
    return [
        {"name": v.name, "default": v.default, "accepts": v.accepts, "doc": v.doc}
        for v in VARIABLES.values()
    ]
