"""Bruck's all-to-all: ceil(log2 N) steps instead of N-1, for small messages.

Rank s's block for rank d has d - s mod N = j hops to travel; write j in binary. At step k
(k = 0, 1, ..., L-1, L = ceil(log2 N)) every rank sends, to the rank 2^k ahead of it, every
block it holds whose j has bit k set -- so a block climbs by the bits of its j and arrives
after the last of them. Each rank sends one message per step, about half of the blocks, which
it forwards for others: the price of the few steps is bytes, S/2 per step (N a power of two).
Implementations rotate the blocks first so that each step's blocks are a fixed set of positions
(packed into one message, unpacked on arrival); here the schedule names the blocks (block
(s, d) is chunk s N + d) and the engine packs them.

Costs (S: one rank's input, N a power of two): L steps, (S/2) L bytes per rank,
L alpha + (S/2) L beta -- against pairwise exchange's (N-1) alpha + (N-1)/N S beta, so Bruck
wins when alpha dominates: small messages on many ranks (MPICH uses it up to 256 bytes per
block). Any N: step k moves the blocks with bit k of j set, |{j < N: bit k}| of them.
(Bruck, Ho, Kipnis, Upfal & Weathersby 1997, "Efficient algorithms for all-to-all
communications in multiport message-passing systems", IEEE TPDS 8(11); Thakur, Rabenseifner &
Gropp 2005, section 5.)
"""

from __future__ import annotations

from ringtree.algorithms.registry import Algorithm, register
from ringtree.algorithms.tree import ceil_log2
from ringtree.collectives import Collective
from ringtree.schedule import Schedule, Transfer, make_steps


def bruck_all_to_all(n_ranks: int) -> Schedule:
    """Step k: rank h sends rank h + 2^k the blocks (s, d) it holds with bit k of
    j = d - s mod N set; it holds them since they have climbed j's lower bits, from s to
    h = s + (j mod 2^k)."""
    n = n_ranks
    rows = []
    for k in range(ceil_log2(n)):
        hop, low = 1 << k, (1 << k) - 1
        ts = []
        for h in range(n):
            blocks = []
            for j in range(hop, n):
                if j & hop:
                    src = (h - (j & low)) % n
                    blocks.append(src * n + (src + j) % n)
            # in block order: the blocks a message brings its receiver for good then follow
            # each other as in its output (by source), and can land there directly
            ts += [Transfer(h, (h + hop) % n, b) for b in sorted(blocks)]
        rows.append((ts, f"bruck +{hop}"))
    return Schedule(Collective.ALL_TO_ALL, "bruck", n, n * n, make_steps(rows), n_blocks=n * n)


# -- registry entries (sources: the module docstring) --------------------------------------
register(
    Algorithm(Collective.ALL_TO_ALL, "bruck", lambda n, s: bruck_all_to_all(n),
              source="Bruck, Ho, Kipnis, Upfal & Weathersby 1997 (IEEE TPDS 8(11))"),
)
