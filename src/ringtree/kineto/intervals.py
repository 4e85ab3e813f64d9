"""Sets of time intervals as sorted, disjoint ``(n, 2)`` float arrays: the busy time of a
stream or a thread, merged the way HTA merges kernels (``merge_kernel_intervals``). Every
operation is O(n log n) in the intervals given.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

EMPTY = np.zeros((0, 2))


def merge(starts: Iterable[float] | np.ndarray, ends: Iterable[float] | np.ndarray) -> np.ndarray:
    """The union of intervals ``[starts[i], ends[i])`` as disjoint sorted intervals (empty
    and reversed ones dropped)."""
    s = np.asarray(starts if isinstance(starts, np.ndarray) else list(starts), dtype=float)
    e = np.asarray(ends if isinstance(ends, np.ndarray) else list(ends), dtype=float)
    keep = e > s
    s, e = s[keep], e[keep]
    if not s.size:
        return EMPTY
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return np.column_stack([s[first], reach[last]])


def union(*sets: np.ndarray) -> np.ndarray:
    """The union of interval sets."""
    both = np.concatenate([x for x in sets if x.size] or [EMPTY])
    return merge(both[:, 0], both[:, 1])


def total(iv: np.ndarray) -> float:
    """Their summed length."""
    return float((iv[:, 1] - iv[:, 0]).sum()) if iv.size else 0.0


def clip(iv: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The parts inside ``[lo, hi)``."""
    if not iv.size or hi <= lo:
        return EMPTY
    out = np.column_stack([np.maximum(iv[:, 0], lo), np.minimum(iv[:, 1], hi)])
    return out[out[:, 1] > out[:, 0]]


def subtract(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The parts of ``a`` outside ``b`` (both disjoint and sorted)."""
    if not a.size or not b.size:
        return a
    # boundaries of both; a piece between consecutive boundaries is in a and not in b
    edges = np.unique(np.concatenate([a.ravel(), b.ravel()]))
    mids = (edges[:-1] + edges[1:]) / 2
    keep = _inside(a, mids) & ~_inside(b, mids)
    return merge(edges[:-1][keep], edges[1:][keep])


def _inside(iv: np.ndarray, points: np.ndarray) -> np.ndarray:
    i = np.searchsorted(iv[:, 0], points, side="right") - 1
    ok = i >= 0
    out = np.zeros(points.size, dtype=bool)
    out[ok] = points[ok] < iv[i[ok], 1]
    return out
