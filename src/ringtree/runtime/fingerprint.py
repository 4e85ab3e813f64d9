"""Mismatch detection: before a collective, ranks exchange a small fingerprint of the call.

A fingerprint is 9 integers (collective, element count, dtype, op, algorithm, root, chunks,
slice size, input status), all-gathered with a ring (N-1 steps of a few bytes: one latency
per step) over the group's control channel -- a connection of its own (a private gloo group
under torch, a duplicate communicator under MPI), so a rank that checks while a peer already
sends data never mixes the two. If any rank differs, every rank raises the same MismatchError
naming the ranks that disagree with the majority and what they called, so a wrong size
becomes an immediate error instead of a hang, a crash or garbage.

By default the exchange runs on the first call of each call shape on a group (the shapes a
program uses are few, so its cost is paid once; later calls of a known shape skip it);
``check="always"`` (RINGTREE_CHECK=always) exchanges on every call, like
TORCH_DISTRIBUTED_DEBUG=DETAIL; ``check=False`` never. A mismatch on a shape some ranks have
already used (their call skips the exchange while another's makes it) is caught by the
timeout instead: a PeerError on every rank.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ringtree.algorithms import algorithms_for, build
from ringtree.collectives import Collective, ReduceOp
from ringtree.runtime.errors import MismatchError
from ringtree.runtime.executor import Context, execute
from ringtree.runtime.kernels import DTYPES, NumpyKernels
from ringtree.runtime.program import compile_program
from ringtree.runtime.transport import Transport
from ringtree.schedule import Schedule

_COLLECTIVES = list(Collective)
_OPS = list(ReduceOp)
_FIELDS = ("collective", "count", "dtype", "op", "algorithm", "root", "chunks", "slice", "input")


@dataclass(frozen=True)
class CallSignature:
    """What one rank asked for. ``valid`` False: the rank rejected its own input."""

    collective: Collective
    count: int
    dtype: str
    op: ReduceOp | None
    algorithm: str
    root: int | None
    n_chunks: int | None
    slice_bytes: int
    valid: bool = True

    def encode(self) -> list[int]:
        """The 9 integers exchanged."""
        return [
            _COLLECTIVES.index(self.collective),
            self.count,
            DTYPES.index(self.dtype) if self.dtype in DTYPES else _crc(self.dtype),
            _OPS.index(self.op) if self.op is not None else -1,
            _crc(self.algorithm),
            -1 if self.root is None else self.root,
            -1 if self.n_chunks is None else self.n_chunks,
            self.slice_bytes,
            1 if self.valid else 0,
        ]


def _crc(text: str) -> int:
    return zlib.crc32(text.encode())


def _describe(field: str, value: int, collective: Collective) -> str:
    if field == "collective":
        return _COLLECTIVES[value].value if 0 <= value < len(_COLLECTIVES) else f"#{value}"
    if field == "dtype":
        return DTYPES[value] if 0 <= value < len(DTYPES) else f"#{value}"
    if field == "op":
        return _OPS[value].value if 0 <= value < len(_OPS) else "none"
    if field == "algorithm":
        names = [a for a in algorithms_for(collective) if _crc(a) == value]
        return names[0] if names else f"#{value:08x}"
    if field == "input":
        return "valid" if value else "rejected"
    return "none" if value == -1 else str(value)


def exchange(transport: Transport, sig: CallSignature, timeout_s: float) -> None:
    """All-gather every rank's signature over ``transport``'s control channel; raise
    MismatchError (on every rank) if they differ; PeerError if a peer does not take part."""
    control = transport.control()
    n = control.size
    if n == 1:
        return
    mine = sig.encode()
    width = len(mine)
    buf = np.zeros(n * width, dtype=np.int64)
    buf[control.rank * width : (control.rank + 1) * width] = mine
    prog = compile_program(_ring_gather(n), control.rank, n * width, 8, in_place=True,
                           in_place_min_bytes=control.in_place_from())  # fmt: skip
    ctx = Context(label="fingerprint exchange", timeout_s=timeout_s)
    execute(prog, control, NumpyKernels(), ReduceOp.SUM, buf, buf, n, ctx)
    table = [tuple(r) for r in buf.reshape(n, width).tolist()]
    _compare(table, sig.collective, control.rank)


@lru_cache(maxsize=64)
def _ring_gather(n: int) -> Schedule:
    return build(Collective.ALL_GATHER, "ring", n)


def _compare(table: list[tuple[int, ...]], collective: Collective, rank: int) -> None:
    counts = Counter(table)
    top = max(counts.values())
    majority = table[0] if counts[table[0]] == top else counts.most_common(1)[0][0]
    if all(row == majority for row in table) and majority[-1] == 1:
        return
    rejected = [r for r, row in enumerate(table) if row[-1] == 0]
    if rejected:
        who = ", ".join(map(str, rejected))
        raise MismatchError(
            f"rank {rank}: rank{'s' if len(rejected) > 1 else ''} {who} rejected "
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
        f"rank{'s' if len(agree) > 1 else ''} {', '.join(map(str, agree))} called with {want}",
        ranks=odd,
    )
