"""Link profiles: the constants ``ringtree calibrate`` fitted on the user's own machines,
as a TOML file that ``cost``, ``crossover`` and ``plan`` take as a link.

One file holds one link per transport (``[links.gloo]``, ``[links.mpi]``), each with the
plain alpha-beta(-gamma) constants (``alpha_s``, ``bandwidth_Bps``, ``gamma_s_per_byte``)
and, for processes that shared one machine, the one-machine model (``[links.NAME.host]``:
``cores``, ``alpha_s``, ``message_s``, ``bandwidth_Bps``, ``gamma_s_per_byte``; see
:mod:`ringtree.cost.host`), plus how well each fitted (``[links.NAME.fit]``). ``FILE.toml``
names the first link in the file, ``FILE.toml#mpi`` a given one.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ringtree.cost.host import HostLink, HostModel
from ringtree.errors import RingtreeError

FORMAT = 1


def is_profile_ref(text: str) -> bool:
    """Whether a link argument names a profile file (``*.toml`` or ``*.toml#NAME``)."""
    path = text.strip().split("#", 1)[0]
    return path.lower().endswith(".toml")


def load_profile(ref: str) -> HostLink:
    """The link ``FILE.toml[#NAME]`` names; RingtreeError (one line naming the file and the
    problem) when the file is unreadable, not TOML, lacks a link or holds a bad value."""
    return profile_entry(ref)[0]


def profile_entry(ref: str) -> tuple[HostLink, dict[str, Any]]:
    """The link ``FILE.toml[#NAME]`` names and its whole table (backend, ranks, fit)."""
    path, _, name = ref.strip().partition("#")
    data = read_toml(path)
    links = data.get("links")
    if not isinstance(links, dict) or not links:
        raise RingtreeError(
            f"profile {path!r} has no [links.NAME] table: write one with "
            "'ringtree calibrate -o FILE.toml'"
        )
    if name:
        if name not in links:
            raise RingtreeError(f"profile {path!r} has no link {name!r}: it has {', '.join(links)}")
    else:
        name = next(iter(links))
    return link_from_table(links[name], f"{path}#{name}"), links[name]


def read_toml(path: str) -> dict[str, Any]:
    """A TOML file's tables; RingtreeError when unreadable or malformed."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise RingtreeError(f"cannot read profile {path!r}: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise RingtreeError(f"profile {path!r} is not valid TOML: {e}") from None


def _number(
    table: Mapping[str, Any], key: str, where: str, *, positive: bool, default: float | None = None
) -> float:
    value = table.get(key, default)
    if value is None:
        raise RingtreeError(f"profile {where} lacks {key}")
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (value <= 0 if positive else value < 0):
        bound = "> 0" if positive else ">= 0"
        raise RingtreeError(f"profile {where}: {key} must be a number {bound}, got {value!r}")
    return float(value)


def link_from_table(table: Any, where: str) -> HostLink:
    """A HostLink from one ``[links.NAME]`` table (RingtreeError on a bad value)."""
    if not isinstance(table, dict):
        raise RingtreeError(f"profile {where} is not a table")
    host = None
    if "host" in table:
        h = table["host"]
        if not isinstance(h, dict):
            raise RingtreeError(f"profile {where}: host must be a table")
        host = HostModel(
            cores=_number(h, "cores", where + " host", positive=True),
            alpha_s=_number(h, "alpha_s", where + " host", positive=False),
            message_s=_number(h, "message_s", where + " host", positive=False, default=0.0),
            bandwidth_Bps=_number(h, "bandwidth_Bps", where + " host", positive=True),
            gamma_s_per_byte=_number(
                h, "gamma_s_per_byte", where + " host", positive=False, default=0.0
            ),
            n_ranks=int(table.get("n_ranks", 0) or 0),
        )
    name = str(table.get("name") or where)
    return HostLink(
        name=name,
        bandwidth_Bps=_number(table, "bandwidth_Bps", where, positive=True),
        alpha_s=_number(table, "alpha_s", where, positive=False),
        gamma_s_per_byte=_number(table, "gamma_s_per_byte", where, positive=False, default=0.0),
        note=str(table.get("note", "")),
        source=f"fitted by ringtree calibrate ({where})",
        host=host,
    )


# -- writing -------------------------------------------------------------------------------
def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML has no {v}")
        return repr(v)
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def toml_text(data: Mapping[str, Any], header: str = "") -> str:
    """``data`` (nested dicts of numbers, strings, booleans, lists) as TOML, tables after
    the plain keys of their parent; ``header`` lines become ``#`` comments on top."""
    lines = [f"# {h}" if h else "#" for h in header.splitlines()]

    def table(prefix: str, d: Mapping[str, Any]) -> None:
        plain = {k: v for k, v in d.items() if not isinstance(v, Mapping)}
        if prefix and (plain or not any(isinstance(v, Mapping) for v in d.values())):
            lines.append("")
            lines.append(f"[{prefix}]")
        for k, v in plain.items():
            lines.append(f"{_key(k)} = {_toml_value(v)}")
        for k, v in d.items():
            if isinstance(v, Mapping):
                table(f"{prefix}.{_key(k)}" if prefix else _key(k), v)

    table("", data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(k)


def link_table(link: HostLink, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``[links.NAME]`` table of ``link`` (what :func:`link_from_table` reads back)."""
    t: dict[str, Any] = {"name": link.name, "note": link.note}
    t.update(extra or {})
    t.update(
        alpha_s=link.alpha_s,
        bandwidth_Bps=link.bandwidth_Bps,
        gamma_s_per_byte=link.gamma_s_per_byte,
    )
    if link.host is not None:
        h = link.host
        t["host"] = {
            "cores": h.cores,
            "alpha_s": h.alpha_s,
            "message_s": h.message_s,
            "bandwidth_Bps": h.bandwidth_Bps,
            "gamma_s_per_byte": h.gamma_s_per_byte,
        }
    return t


def write_profile(path: str | Path, tables: Mapping[str, Any], header: str = "") -> None:
    """Write a profile file (RingtreeError if it cannot be written)."""
    text = toml_text({"profile": {"format": FORMAT}, **tables}, header)
    try:
        Path(path).write_text(text)
    except OSError as e:
        raise RingtreeError(f"cannot write profile {str(path)!r}: {e.strerror}") from None
