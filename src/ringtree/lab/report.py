"""What ``ringtree lab ddp`` prints, as plain data: a row per training step and a summary.

Communication time of a bucket: the shortest of the ranks' measured times. DDP starts a
bucket's all-reduce on each rank when that rank's gradients are ready, so a rank that arrives
first also waits for the others' backward pass; the rank that arrives last waits only for the
transfer. A step's communication is the sum over its buckets.

Bytes: S is the bucket (gradient) bytes all-reduced per step; ``sent_per_worker`` is what the
busiest rank's transport counted (ringtree's run), beside the ring's exact
2(N-1)/N x S and the seed's textbook ~2S.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ringtree.cost.money import Price, comm_money
from ringtree.lab.ddp import LabResult

# The seed's grammar tutor: 500k parameters, gradients in fp16.
SEED_PARAMS = 500_000
SEED_ITEMSIZE = 2


def _buckets_by_step(result: LabResult, run: str) -> dict[int, dict[int, list[dict[str, Any]]]]:
    """step -> bucket index -> that bucket's record on every rank."""
    out: dict[int, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for rr in result.runs[run]:
        for b in rr.buckets:
            out[b["step"]][b["index"]].append(b)
    return out


def _step_comm(buckets: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """One step's buckets (index -> per-rank records) summed up."""
    sent = [b["bytes_sent"] for recs in buckets.values() for b in recs]
    per_rank_sent: dict[int, int] = defaultdict(int)
    for recs in buckets.values():
        for b in recs:
            per_rank_sent[b["rank"]] += b["bytes_sent"] or 0
    return {
        "buckets": len(buckets),
        "bucket_bytes": [recs[0]["bytes"] for _, recs in sorted(buckets.items())],
        "algorithms": sorted({b["algorithm"] for recs in buckets.values() for b in recs}),
        "allreduced_bytes": sum(recs[0]["bytes"] for recs in buckets.values()),
        "sent_per_worker": max(per_rank_sent.values()) if None not in sent else None,
        "measured_s": sum(min(b["measured_s"] for b in recs) for recs in buckets.values()),
        "predicted_s": sum(recs[0]["predicted_s"] for recs in buckets.values()),
    }


def step_rows(result: LabResult, price: Price | None = None) -> list[dict[str, Any]]:
    """Per step: ``{"step", "<run>": {loss, buckets, bucket_bytes, algorithms,
    allreduced_bytes, sent_per_worker, measured_s, predicted_s[, usd]}}`` for every run."""
    rows = []
    per_run = {run: _buckets_by_step(result, run) for run in result.runs}
    losses = {run: result.mean_losses(run) for run in result.runs}
    for k in range(1, result.config.steps + 1):
        row: dict[str, Any] = {"step": k}
        for run in result.runs:
            cell = {"loss": losses[run][k - 1], **_step_comm(per_run[run].get(k, {}))}
            if price is not None:
                cell["usd"] = comm_money(cell["measured_s"], price).usd_per_step
            row[run] = cell
        rows.append(row)
    return rows


def summary(result: LabResult, price: Price | None = None) -> dict[str, Any]:
    """The end of the lab: agreement of ranks and runs, bytes against the seed, totals."""
    n = result.config.ranks
    rows = step_rows(result, price)
    grad_bytes = result.n_params * 4
    out: dict[str, Any] = {
        "ranks": n,
        "steps": result.config.steps,
        "parameters": result.n_params,
        "gradient_bytes": grad_bytes,
        "dtype": "fp32",
        "textbook_bytes_per_worker": 2 * grad_bytes if n > 1 else 0,
        "ring_bytes_per_worker": 2 * (n - 1) * grad_bytes / n,
        "seed": {
            "parameters": SEED_PARAMS,
            "dtype": "fp16",
            "gradient_bytes": SEED_PARAMS * SEED_ITEMSIZE,
            "bytes_per_worker": 2 * SEED_PARAMS * SEED_ITEMSIZE,
        },
        "wall_s": result.wall_s,
        "runs": {},
    }
    if "torch" in result.runs and "ringtree" in result.runs:
        out["max_difference_between_runs"] = result.run_difference("torch", "ringtree")
    for run, ranks in result.runs.items():
        cells = [r[run] for r in rows]
        measured = sum(c["measured_s"] for c in cells)
        predicted = sum(c["predicted_s"] for c in cells)
        sent = [c["sent_per_worker"] for c in cells]
        train_s = sum(rr.step_end_s[-1] - rr.step_start_s[0] for rr in ranks) / len(ranks)
        info: dict[str, Any] = {
            "first_loss": cells[0]["loss"] if cells else None,
            "final_loss": cells[-1]["loss"] if cells else None,
            "ranks_identical": result.rank_spread(run) == 0.0,
            "max_difference_between_ranks": result.rank_spread(run),
            "algorithms": sorted({a for c in cells for a in c["algorithms"]}),
            "comm_measured_s": measured,
            "comm_predicted_s": predicted,
            "sent_per_worker_per_step": (sum(sent) / len(sent)) if None not in sent else None,
            "train_s": train_s,
            "steps_per_second": len(cells) / train_s if train_s > 0 else None,
        }
        if price is not None and cells:
            per_step = measured / len(cells)
            money = comm_money(per_step, price, steps_per_second=info["steps_per_second"])
            info["usd_comm_per_step"] = money.usd_per_step
            info["usd_comm_per_day"] = money.usd_per_day
            info["usd_comm_run"] = money.usd_per_step * len(cells)
            info["usd_run"] = train_s * price.usd_per_second
        out["runs"][run] = info
    if price is not None:
        out["price_cluster_hour"] = price.usd_per_hour
    return out
