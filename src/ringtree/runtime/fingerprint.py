"""Mismatch detection: before a collective, ranks exchange a small fingerprint of the call.

A fingerprint is 10 integers (collective, element count, dtype, op, algorithm, root, chunks,
slice size, whether split sizes were given, input status), sent by every rank to every other
(one step of N-1 small messages)
over the group's control channel -- a connection of its own (a private gloo group under
torch, a tag of its own under MPI), so a rank that checks while a peer already
sends data never mixes the two. If any rank differs, every rank raises the same MismatchError
naming the ranks that disagree with the majority and what they called, so a wrong size
becomes an immediate error instead of a hang, a crash or garbage.

An all-to-all with split sizes cannot be checked by comparing: each rank knows only its own
row and column of the N x N sizes, so a digest of them differs from rank to rank by design.
When the fingerprints agree and carry split sizes, a second round sends every rank's row and
column to every other; every rank then holds the whole matrix twice (as sent, as expected)
and raises the same MismatchError where rank s's size for d differs from d's for s.

By default the exchange runs on the first call of each call shape on a group (the shapes a
program uses are few, so its cost is paid once; later calls of a known shape skip it);
``check="always"`` (RINGTREE_CHECK=always) exchanges on every call, like
TORCH_DISTRIBUTED_DEBUG=DETAIL; ``check=False`` never. A mismatch on a shape some ranks have
already used (their call skips the exchange while another's makes it, or none makes it) is
caught by the timeout instead, a PeerError on every rank: a call's data messages carry a tag
of its shape (:meth:`CallSignature.digest`), so they never meet another shape's receives
(except on NCCL, whose point-to-point has no tags).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from ringtree.algorithms import algorithms_for
from ringtree.collectives import Collective, ReduceOp
from ringtree.runtime.errors import MismatchError, PeerError
from ringtree.runtime.kernels import DTYPES
from ringtree.runtime.transport import Transport, TransportClosed, TransportTimeout

_COLLECTIVES = list(Collective)
_OPS = list(ReduceOp)
_FIELDS = (
    "collective",
    "count",
    "dtype",
    "op",
    "algorithm",
    "root",
    "chunks",
    "slice",
    "splits",
    "input",
)


@dataclass(frozen=True)
class CallSignature:
    """What one rank asked for. ``valid`` False: the rank rejected its own input.
    ``splits``: an all-to-all's split sizes, the elements this rank sends each rank then
    those it receives from each (count is -1 then: the sizes are checked pair by pair)."""

    collective: Collective
    count: int
    dtype: str
    op: ReduceOp | None
    algorithm: str
    root: int | None
    n_chunks: int | None
    slice_bytes: int
    valid: bool = True
    splits: tuple[int, ...] | None = None

    def encode(self) -> list[int]:
        """The 10 integers exchanged."""
        return [
            _COLLECTIVES.index(self.collective),
            self.count,
            DTYPES.index(self.dtype) if self.dtype in DTYPES else _crc(self.dtype),
            _OPS.index(self.op) if self.op is not None else -1,
            _crc(self.algorithm),
            -1 if self.root is None else self.root,
            -1 if self.n_chunks is None else self.n_chunks,
            self.slice_bytes,
            0 if self.splits is None else 1,
            1 if self.valid else 0,
        ]

    def digest(self) -> int:
        """A 32-bit digest of the call's shape, the same on every rank that makes the same
        call (the fields of :meth:`encode` but the last; split sizes are data): the tag of
        its data messages, :meth:`Transport.message_tag
        <ringtree.runtime.transport.Transport.message_tag>`."""
        return zlib.crc32(np.array(self.encode()[:-1], dtype=np.int64).tobytes())


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def _describe(field: str, value: int, collective: Collective) -> str:
    if field == "collective":
        return _COLLECTIVES[value].value if 0 <= value < len(_COLLECTIVES) else f"#{value}"
    if field == "dtype":
        return DTYPES[value] if 0 <= value < len(DTYPES) else f"#{value}"
    if field == "op":
        return _OPS[value].value if 0 <= value < len(_OPS) else "none"
    if field == "algorithm":  # the odd rank's may be another collective's algorithm
        names = (a for c in (collective, *Collective) for a in algorithms_for(c))
        return next((a for a in names if _crc(a) == value), f"#{value:08x}")
    if field == "input":
        return "valid" if value else "rejected"
    if field == "splits":
        return "given" if value else "none"
    return "none" if value == -1 else str(value)


def exchange(transport: Transport, sig: CallSignature, timeout_s: float) -> None:
    """Send every rank's signature to every other over ``transport``'s control channel;
    raise MismatchError (on every rank) if they differ, PeerError naming the ranks whose
    signature did not come within ``timeout_s``."""
    control = transport.control()
    n, rank = control.size, control.rank
    if n == 1:
        return
    what = f"fingerprint exchange before {sig.collective.value}"
    why = " (died, hangs, or is running a call it made before without this check)"
    table = _share(control, np.array(sig.encode(), dtype=np.int64), timeout_s, what, why)
    _compare([tuple(r) for r in table.tolist()], sig.collective, rank)
    if sig.splits is not None:
        _check_splits(control, sig, timeout_s)


def _check_splits(control: Transport, sig: CallSignature, timeout_s: float) -> None:
    """The second round for split sizes (module doc): every rank's row and column to every
    other; MismatchError on every rank where a pair disagrees."""
    n, rank = control.size, control.rank
    mine = np.array(sig.splits, dtype=np.int64)  # 2 N sizes: validate refused other lengths
    table = _share(control, mine, timeout_s, "split sizes before all-to-all")
    bad = [(s, d, int(table[s][d]), int(table[d][n + s]))
           for s in range(n) for d in range(n) if table[s][d] != table[d][n + s]]
    if not bad:
        return
    involved = Counter(r for s, d, _, _ in bad for r in {s, d})
    top = max(involved.values())
    odd = sorted(r for r, k in involved.items() if k == top)
    pairs = "; ".join(f"rank {s} sends rank {d} {a} elements (input_split_sizes), rank {d} "
                      f"expects {b} (output_split_sizes)" for s, d, a, b in bad[:4])
    more = f" and {len(bad) - 4} more pairs" if len(bad) > 4 else ""
    raise MismatchError(
        f"rank {rank}: ranks disagree on the all-to-all's split sizes: {pairs}{more}",
        ranks=odd,
    )


def _share(
    control: Transport, mine: np.ndarray, timeout_s: float, what: str, why: str = ""
) -> np.ndarray:
    """Every rank's row ``mine`` sent to every other: the table of rows, row r from rank r.
    PeerError naming the peers whose row did not come, or that did not take this one, within
    ``timeout_s`` (``what`` names the exchange, ``why`` adds a reason)."""
    n, rank = control.size, control.rank
    table = np.zeros((n, mine.size), dtype=np.int64)
    table[rank] = mine
    peers = [p for p in range(n) if p != rank]
    recvs = [control.recv(table[p], p) for p in peers]
    sends = [control.send(mine, p) for p in peers]
    deadline = time.perf_counter() + timeout_s
    missing: list[int] = []
    for p, req in [*zip(peers, recvs, strict=True), *zip(peers, sends, strict=True)]:
        if p in missing:
            continue
        try:
            control.wait(req, max(deadline - time.perf_counter(), 0.001))
        except (TransportTimeout, TransportClosed):
            missing.append(p)
    if missing:
        raise PeerError(
            f"rank {rank}: {what}: nothing came from {_ranks(missing)} within the "
            f"{timeout_s:g} s timeout{why}", rank=rank, peer=missing[0], step=0,
        )
    return table


def _ranks(ranks: list[int]) -> str:
    """ "rank 3" or "ranks 1, 2"."""
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def _compare(table: list[tuple[int, ...]], collective: Collective, rank: int) -> None:
    counts = Counter(table)
    top = max(counts.values())
    majority = table[0] if counts[table[0]] == top else counts.most_common(1)[0][0]
    if all(row == majority for row in table) and majority[-1] == 1:
        return
    rejected = [r for r, row in enumerate(table) if row[-1] == 0]
    if rejected:
        raise MismatchError(
            f"rank {rank}: {_ranks(rejected)} rejected "
            f"{'their' if len(rejected) > 1 else 'its'} input to {collective.value} "
            "(see that rank's error)",
            ranks=rejected,
        )
    odd = [r for r, row in enumerate(table) if row != majority]
    agree = [r for r, row in enumerate(table) if row == majority]
    parts = []
    for r in odd:
        diffs = [
            f"{f}={_describe(f, table[r][i], collective)}"
            for i, f in enumerate(_FIELDS)
            if table[r][i] != majority[i]
        ]
        parts.append(f"rank {r} called with {', '.join(diffs)}")
    want = ", ".join(
        f"{f}={_describe(f, majority[i], collective)}"
        for i, f in enumerate(_FIELDS)
        if any(table[r][i] != majority[i] for r in odd)
    )
    raise MismatchError(
        f"rank {rank}: ranks disagree on the {collective.value} call: {'; '.join(parts)}; "
        f"{_ranks(agree)} called with {want}",
        ranks=odd,
    )
