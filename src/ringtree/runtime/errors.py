"""Errors the engine raises while a collective runs.

``PeerError``: a peer died or stopped answering; raised on every surviving rank within the
call's timeout, naming the peer and the step. ``MismatchError``: ranks called with different
arguments (collective, size, dtype, algorithm, op, root), found by the fingerprint exchange;
it names the ranks that disagree. Bad local input is a :class:`ringtree.RingtreeError` of the
type torch raises for it (ValueError, TypeError or RuntimeError).
"""

from __future__ import annotations

from ringtree.errors import RingtreeError


class PeerError(RuntimeError):
    """A collective could not finish because ``peer`` died or did not answer in time.

    rank: the rank that raises; peer: the rank it was waiting on; step: 1-based step of the
    schedule (0: before the first step). The process group should not be used afterwards.
    """

    def __init__(self, message: str, *, rank: int, peer: int, step: int) -> None:
        super().__init__(message)
        self.rank, self.peer, self.step = rank, peer, step


class MismatchError(RingtreeError, RuntimeError):
    """Ranks called a collective with different arguments; ``ranks`` are those that disagree
    with the majority (or with rank 0 when there is no majority). A RuntimeError too, as
    torch's backends raise for calls that do not match (gloo's size checks,
    TORCH_DISTRIBUTED_DEBUG=DETAIL's "Detected mismatch between collectives")."""

    def __init__(self, message: str, *, ranks: list[int]) -> None:
        super().__init__(message)
        self.ranks = ranks
