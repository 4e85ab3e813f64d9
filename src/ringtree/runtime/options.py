"""The options every collective takes beyond torch.distributed's own arguments, validated once.

``algorithm``: "auto" (default) or a registered algorithm; ``timeout``: seconds (or a
timedelta) for the whole call, default the group's (RINGTREE_TIMEOUT when set, else a torch
group's own timeout, else 300 s: :class:`ringtree.runtime.groups.Settings`); ``check``:
mismatch detection,
"first" (the default: the first call of each call shape on a group), "always", False/"off",
True = "always"; ``n_chunks``: the schedule's pipeline depth; ``ranks_per_node``: the node
size for hierarchical algorithms (default: from the launcher); ``slice_bytes``: the largest
message (default RINGTREE_SLICE_BYTES); ``recorder``: a :class:`ringtree.events.Recorder`
that receives a CallRecord per call (and per-message TraceEvents when it asks for them).
Every rank must pass the same algorithm, n_chunks, ranks_per_node and slice_bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict

from ringtree.errors import RingtreeError
from ringtree.events import Recorder

AUTO = "auto"


class CallOptions(TypedDict, total=False):
    """The keyword options of every collective (see the module doc)."""

    algorithm: str
    timeout: float | timedelta | None
    check: bool | str | None
    n_chunks: int | None
    ranks_per_node: int | None
    slice_bytes: int | None
    recorder: Recorder | None


@dataclass(frozen=True)
class Options:
    """Validated, canonical options (``timeout_s``/``check``/``slice_bytes`` None: the
    group's settings)."""

    algorithm: str = AUTO
    timeout_s: float | None = None
    check: str | None = None
    n_chunks: int | None = None
    ranks_per_node: int | None = None
    slice_bytes: int | None = None
    recorder: Recorder | None = None

    @classmethod
    def make(cls, given: Mapping[str, Any]) -> Options:
        """Options from keyword arguments; RingtreeError naming a bad or unknown one. The
        same keywords again (a call site in a loop) cost one dictionary lookup."""
        if not given:
            return DEFAULT
        try:
            key = tuple(given.items())
            return _SEEN[key]
        except (KeyError, TypeError):  # new, or unhashable (a recorder): validate
            pass
        opts = cls._validate(given)
        if opts.recorder is None:
            if len(_SEEN) >= 1024:
                _SEEN.clear()
            _SEEN[key] = opts
        return opts

    @classmethod
    def _validate(cls, given: Mapping[str, Any]) -> Options:
        unknown = sorted(set(given) - set(CallOptions.__annotations__))
        if unknown:
            raise RingtreeError(
                f"unknown option {unknown[0]!r}: expected {', '.join(CallOptions.__annotations__)}"
            )
        recorder = given.get("recorder")
        if recorder is not None and not isinstance(recorder, Recorder):
            raise RingtreeError(
                f"recorder must be a ringtree.events.Recorder, got {type(recorder).__name__}"
            )
        return cls(
            algorithm=_algorithm(given.get("algorithm", AUTO)),
            timeout_s=_timeout(given.get("timeout")),
            check=_check(given.get("check")),
            n_chunks=_positive("n_chunks", given.get("n_chunks")),
            ranks_per_node=_positive("ranks_per_node", given.get("ranks_per_node")),
            slice_bytes=_slice(given.get("slice_bytes")),
            recorder=recorder,
        )


DEFAULT = Options()
_SEEN: dict[tuple, Options] = {}


def _algorithm(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RingtreeError(
            f'algorithm must be a name ("auto" or a registered algorithm), got {value!r}'
        )
    return value.strip().lower()


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise RingtreeError(f"timeout must be seconds or a timedelta, got {value!r}")
    if not (seconds > 0 and math.isfinite(seconds)):
        raise RingtreeError(f"timeout must be > 0 seconds, got {value!r}")
    return seconds


def _check(value: Any) -> str | None:
    if value is None:
        return None
    if value is True:
        return "always"
    if value is False:
        return "off"
    if isinstance(value, str) and value.strip().lower() in ("first", "always", "off"):
        return value.strip().lower()
    raise RingtreeError(f'check must be True, False, "first", "always" or "off", got {value!r}')


def _positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RingtreeError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def _slice(value: Any) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 2**30:
        raise RingtreeError(f"slice_bytes must be a whole number of bytes from 1 to 2**30, "
                            f"got {value!r}")
    return value
