"""What a cost model predicts for one collective on one link: a :class:`Prediction`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ringtree.collectives import Collective
from ringtree.cost.model import Cost

# The seed's "bytes sent per worker" in units of the buffer size S: ~2S for all-reduce (a
# reduce-scatter then an all-gather), ~S for the others.
TEXTBOOK_FACTOR = {
    Collective.ALL_REDUCE: 2,
    Collective.REDUCE_SCATTER: 1,
    Collective.ALL_GATHER: 1,
    Collective.BROADCAST: 1,
    Collective.REDUCE: 1,
}


def textbook_bytes(collective: Collective, n_ranks: int, size_bytes: int) -> int:
    """The seed's rounded bytes per worker: 2S for all-reduce, S otherwise (0 on one rank)."""
    return 0 if n_ranks == 1 else TEXTBOOK_FACTOR[collective] * size_bytes


@dataclass(frozen=True)
class Prediction:
    """One collective's predicted cost.

    bytes_sent_per_worker: the most bytes one rank sends (exact under alpha-beta; the seed's
        ~2S or ~S under textbook). textbook_bytes: the seed's figure, for comparison.
    steps: steps on the critical path. latency_s = sum of steps x alpha; bandwidth_s = sum of
        the busiest rank's bytes per step / bandwidth; reduce_s = reduced bytes x gamma.
    cost: the link-independent Terms per level ("flat", or "intra"/"inter").
    """

    collective: Collective
    algorithm: str
    model: str
    link: str
    n_ranks: int
    size_bytes: int
    bytes_sent_per_worker: float
    textbook_bytes: float
    steps: int
    latency_s: float
    bandwidth_s: float
    reduce_s: float
    cost: Cost

    @property
    def time_s(self) -> float:
        """latency + bandwidth + reduction terms."""
        return self.latency_s + self.bandwidth_s + self.reduce_s

    def record(self) -> dict[str, Any]:
        """Plain data, with the keys ``ringtree cost --json`` prints."""
        return {
            "link": self.link,
            "algorithm": self.algorithm,
            "model": self.model,
            "collective": self.collective.value,
            "workers": self.n_ranks,
            "size_bytes": self.size_bytes,
            "bytes_sent_per_worker": self.bytes_sent_per_worker,
            "textbook_bytes": self.textbook_bytes,
            "steps": self.steps,
            "latency_s": self.latency_s,
            "bandwidth_s": self.bandwidth_s,
            "reduce_s": self.reduce_s,
            "time_s": self.time_s,
        }
