"""Communication in dollars, the seed's way.

comm cost per step = comm time x price per worker per second x workers
                   (= comm time x the cluster's price per second);
per day = per step x steps per second x 86400; for a job of H hours, the whole compute cost is
H x the cluster's hourly price and communication's share is per step x steps/s x 3600 H.

Seed: 31 ms x $30/3600 per GPU-second x 8 GPUs = $2.1e-3 per step, ~$180 per day at 1 step/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringtree.errors import RingtreeError

SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600


@dataclass(frozen=True)
class Price:
    """What the whole cluster costs per hour."""

    usd_per_hour: float

    @classmethod
    def per_worker(cls, usd_per_worker_hour: float, workers: int) -> Price:
        """A per-GPU (per-worker) hourly price times the number of workers."""
        return cls.cluster(usd_per_worker_hour * workers)

    @classmethod
    def cluster(cls, usd_per_hour: float) -> Price:
        """The cluster's hourly price; RingtreeError if negative."""
        if usd_per_hour < 0:
            raise RingtreeError(f"price must be >= $0 per hour, got {usd_per_hour}")
        return cls(usd_per_hour)

    @property
    def usd_per_second(self) -> float:
        """The cluster's price per second."""
        return self.usd_per_hour / SECONDS_PER_HOUR


@dataclass(frozen=True)
class Money:
    """Communication cost per step and per day; with a job length, the job's whole compute
    cost and the part of it spent communicating (None when no job length was given)."""

    usd_per_step: float
    usd_per_day: float
    usd_per_job: float | None = None
    usd_comm_per_job: float | None = None


def comm_money(
    comm_time_s: float, price: Price, steps_per_second: float = 1.0, hours: float | None = None
) -> Money:
    """Dollars for ``comm_time_s`` of communication per training step (see module doc)."""
    if steps_per_second <= 0:
        raise RingtreeError(f"steps per second must be > 0, got {steps_per_second}")
    if hours is not None and hours < 0:
        raise RingtreeError(f"job length must be >= 0 hours, got {hours}")
    per_step = comm_time_s * price.usd_per_second
    per_day = per_step * steps_per_second * SECONDS_PER_DAY
    if hours is None:
        return Money(per_step, per_day)
    return Money(
        per_step,
        per_day,
        usd_per_job=hours * price.usd_per_hour,
        usd_comm_per_job=per_step * steps_per_second * hours * SECONDS_PER_HOUR,
    )
