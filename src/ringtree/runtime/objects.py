"""Collectives of picklable Python objects, as torch.distributed defines them, over the
engine's own collectives.

``broadcast_object_list(object_list, src)``: every rank's ``object_list`` becomes the root's
(same length everywhere); ``all_gather_object(object_list, obj)``: ``object_list[r]`` is rank
r's ``obj`` on every rank (the list has N entries); ``gather_object(obj, object_gather_list,
dst)``: the same on the destination only; ``scatter_object_list(output, input, src)``: rank
r's ``output[0]`` is the root's ``input[r]``. Roots as torch's (``src``/``dst`` global
ranks, ``group_src``/``group_dst`` group ranks, global rank 0 by default).

Each object is pickled (``pickle.dumps``, the highest protocol) and its bytes travel as uint8
buffers: the sizes first (one int64 per object), then the bytes, padded to the largest where
the collective needs equal blocks (all-gather, gather, scatter), as torch does. Cost: two
collectives, of 8 bytes per object and of the pickled bytes. Unpickling runs code the peers
chose: use these only among trusted ranks, as torch warns. On an NCCL group the buffers are
CUDA tensors of ``device`` (default: the current one).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from ringtree.errors import RingtreeError, RingtreeTypeError
from ringtree.runtime import api
from ringtree.runtime.groups import Group, group_for, not_a_member_warning


def broadcast_object_list(object_list: list[Any], src: int | None = None, group: Any = None,
                          device: Any = None, group_src: int | None = None) -> None:
    """Make every rank's ``object_list`` the root's, in place (see the module doc)."""
    g = _group(group, "broadcast_object_list")
    if g is None:
        return
    if not isinstance(object_list, list):
        raise RingtreeTypeError(f"object_list must be a list, got {type(object_list).__name__}")
    root = g.root(*api.root_of(src, group_src), "src")
    mine = g.rank == root
    blobs = [_dumps(o) for o in object_list] if mine else []
    sizes = _array(g, [len(b) for b in blobs] if mine else [0] * len(object_list), device)
    api.broadcast(sizes, group_src=root, group=g)
    lengths = _ints(sizes)
    data = _bytes(g, b"".join(blobs) if mine else bytes(sum(lengths)), device)
    api.broadcast(data, group_src=root, group=g)
    if not mine:
        object_list[:] = _loads_all(_raw(data), lengths)


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """Fill ``object_list[r]`` with rank r's ``obj`` on every rank (N entries: a shorter list
    is an IndexError, as torch's)."""
    g = _group(group, "all_gather_object")
    if g is None:
        return
    blob = _dumps(obj)
    sizes = _array(g, [0] * g.size, None)
    api.all_gather(sizes, _array(g, [len(blob)], None), group=g)
    lengths = _ints(sizes)
    width = max(lengths)
    whole = _bytes(g, bytes(width * g.size), None)
    api.all_gather(whole, _bytes(g, blob.ljust(width, b"\0"), None), group=g)
    raw = _raw(whole)
    for r in range(g.size):
        object_list[r] = pickle.loads(raw[r * width: r * width + lengths[r]])


def gather_object(obj: Any, object_gather_list: list[Any] | None = None, dst: int | None = None,
                  group: Any = None, group_dst: int | None = None) -> None:
    """Fill the destination's ``object_gather_list[r]`` with rank r's ``obj`` (only the
    destination gives the list, of N entries, as torch)."""
    g = _group(group, "gather_object")
    if g is None:
        return
    root = g.root(*api.root_of(dst, group_dst), "dst")
    mine = g.rank == root
    if mine and object_gather_list is None:
        raise RingtreeError("Argument ``gather_list`` must be specified on destination rank.")
    blob = _dumps(obj)
    sizes = _array(g, [0] * g.size, None)
    api.all_gather(sizes, _array(g, [len(blob)], None), group=g)  # every rank pads alike
    lengths = _ints(sizes)
    width = max(lengths)
    parts = [_bytes(g, bytes(width), None) for _ in range(g.size)] if mine else None
    api.gather(_bytes(g, blob.ljust(width, b"\0"), None), parts, group_dst=root, group=g)
    if mine:
        assert parts is not None and object_gather_list is not None
        for r in range(g.size):
            object_gather_list[r] = pickle.loads(_raw(parts[r])[: lengths[r]])


def scatter_object_list(scatter_object_output_list: list[Any],
                        scatter_object_input_list: list[Any] | None = None,
                        src: int | None = None, group: Any = None,
                        group_src: int | None = None) -> None:
    """Set rank r's ``scatter_object_output_list[0]`` to the root's
    ``scatter_object_input_list[r]`` (the root gives N objects; every output list holds at
    least one entry, as torch requires)."""
    g = _group(group, "scatter_object_list")
    if g is None:
        return
    out = scatter_object_output_list
    if not isinstance(out, list) or not out:
        raise RingtreeError("Expected argument scatter_object_output_list to be a list of size "
                            "at least 1.")
    root = g.root(*api.root_of(src, group_src), "src")
    mine = g.rank == root
    ins = scatter_object_input_list
    if mine and (ins is None or len(ins) != g.size):
        raise RingtreeError(f"scatter_object_input_list must hold {g.size} objects (one per "
                            "rank) on the source rank")
    blobs = [_dumps(o) for o in ins] if mine and ins is not None else []
    width = _array(g, [max(len(b) for b in blobs) if mine else 0], None)
    api.broadcast(width, group_src=root, group=g)
    w = _ints(width)[0]
    size = _array(g, [0], None)
    api.scatter(size, [_array(g, [len(b)], None) for b in blobs] if mine else None,
                group_src=root, group=g)
    mine_bytes = _bytes(g, bytes(w), None)
    api.scatter(mine_bytes, [_bytes(g, b.ljust(w, b"\0"), None) for b in blobs] if mine
                else None, group_src=root, group=g)
    out[0] = pickle.loads(_raw(mine_bytes)[: _ints(size)[0]])


def _group(group: Any, what: str) -> Group | None:
    g = group_for(group)
    if g is None:
        not_a_member_warning(what)
    return g


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _loads_all(raw: bytes, lengths: list[int]) -> list[Any]:
    out, at = [], 0
    for n in lengths:
        out.append(pickle.loads(raw[at: at + n]))
        at += n
    return out


def _array(g: Group, values: list[int], device: Any) -> Any:
    """int64 values as the group's kind of buffer (a CUDA tensor on NCCL)."""
    a = np.array(values, dtype=np.int64)
    return _on_device(g, a, device)


def _bytes(g: Group, data: bytes, device: Any) -> Any:
    """``data`` as a writable uint8 buffer of the group's kind."""
    a = np.frombuffer(bytearray(data), dtype=np.uint8)
    return _on_device(g, a, device)


def _on_device(g: Group, a: np.ndarray, device: Any) -> Any:
    if g.kind != "nccl":
        return a
    import torch

    return torch.from_numpy(a).to(device if device is not None else torch.device("cuda"))


def _raw(buf: Any) -> bytes:
    return (buf if isinstance(buf, np.ndarray) else buf.cpu().numpy()).tobytes()


def _ints(buf: Any) -> list[int]:
    return [int(v) for v in (buf if isinstance(buf, np.ndarray) else buf.cpu().numpy())]
