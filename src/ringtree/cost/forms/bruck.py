"""Closed form of Bruck's all-to-all (:mod:`ringtree.algorithms.bruck`; Bruck et al. 1997).

With N a power of two and S/N per block: L = log2 N steps of N/2 blocks, L alpha + (S/2) L
beta. Any N and any S: step k moves the blocks whose hop count j = d - s mod N has bit k set;
rank h sends the blocks for the ranks h + (j with its k low bits cleared), so its bytes are
``base * |J_k|`` plus one element for each of those ranks among the first ``S mod N`` (the
blocks that are one element larger). Those ranks are a fixed pattern shifted by h, so the
busiest rank of a step is the densest window of the pattern: prefix sums, O(N log N) for the
whole schedule, any N.
"""

from __future__ import annotations

import numpy as np

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.tree import ceil_log2
from ringtree.collectives import Collective
from ringtree.cost.forms.base import NOTHING, Estimate, closed_form, flat


@closed_form(Collective.ALL_TO_ALL, "bruck")
def bruck_all_to_all(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """ceil(log2 N) steps; about (S/2) log2 N bytes per rank: L alpha + (S/2) L beta."""
    if n == 1:
        return NOTHING
    base, extra = divmod(count, n)
    j = np.arange(n)
    wire, per_rank = 0, np.zeros(n, dtype=np.int64)
    for k in range(ceil_log2(n)):
        moved = j[(j >> k) & 1 == 1]
        # how many of the moved blocks go to offset v (from the sender), v = j & ~(2^k - 1)
        w = np.bincount(moved & ~((1 << k) - 1), minlength=n)
        # sender h's large blocks: offsets v with (h + v) mod N < extra, a window of the
        # pattern starting at (-h) mod N: its sum from cyclic prefix sums
        prefix = np.concatenate(([0], np.cumsum(np.concatenate((w, w)))))
        window = prefix[np.arange(n) + extra] - prefix[np.arange(n)]
        sent = base * moved.size + window  # per window start t = (-h) mod N
        wire += int(sent.max())
        per_rank += sent
    return flat(ceil_log2(n), wire * itemsize, 0, int(per_rank.max()) * itemsize)
