"""What ``ringtree profile`` reports, as plain data (:func:`analyse`): a row per collective
kind and size, each step's split, the collectives slowest against their prediction, and the
ranks that start their collectives late.

A row's ``count`` is its calls over every rank read; its measured times are over its
collectives (each the shortest of its ranks' spans, :mod:`ringtree.kineto.instances`):
median and 90th percentile. busbw is nccl-tests' (size x bus factor / time).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import numpy as np

from ringtree.collectives import Collective, bus_factor
from ringtree.kineto.calls import Run
from ringtree.kineto.instances import Instance, instances, lateness
from ringtree.kineto.pricing import Priced, Target, price
from ringtree.kineto.split import step_splits, whole_splits

SLOWEST = 10


def priced(found: list[Instance], backend: str, target: Target | None) -> dict[int, Priced]:
    """``id(instance) -> prediction`` for every instance the target prices (one model call
    per distinct kind, size and group size)."""
    if target is None:
        return {}
    cache: dict[tuple[object, ...], Priced | None] = {}
    out = {}
    for inst in found:
        c = inst.first
        key = (c.key(), c.itemsize)
        if key not in cache:
            cache[key] = price(c.collective, c.size_bytes, c.group_size, c.itemsize or 1,
                               backend, target)
        if cache[key] is not None:
            out[id(inst)] = cache[key]
    return out


def _busbw(collective: str, size: int | None, n: int | None, seconds: float) -> float | None:
    if size is None or not n or seconds <= 0 or collective not in {c.value for c in Collective}:
        return None
    return size * bus_factor(Collective.parse(collective), n) / seconds


def _gbps(bps: float | None) -> float | None:
    return bps / 1e9 if bps else None


def collective_rows(found: list[Instance], prices: dict[int, Priced]) -> list[dict[str, Any]]:
    """A row per (collective, size, group size, label), largest total time first."""
    groups: dict[tuple[object, ...], list[Instance]] = defaultdict(list)
    for inst in found:
        groups[inst.first.key()].append(inst)
    rows = []
    for (kind, size, n, label), insts in groups.items():
        times = np.array([i.time_us for i in insts]) * 1e-6
        p = prices.get(id(insts[0]))
        med = float(np.median(times))
        kernels = [i.first.kernel_algorithm for i in insts if i.first.kernel_algorithm]
        protos = [i.first.kernel_protocol for i in insts if i.first.kernel_protocol]
        rows.append({
            "collective": kind, "label": label, "size_bytes": size, "group_size": n,
            "dtype": insts[0].first.dtype, "count": sum(len(i.calls) for i in insts),
            "collectives": len(insts), "ranks": len({c.rank for i in insts for c in i.calls}),
            "measured_s": med, "measured_p90_s": float(np.percentile(times, 90)),
            "total_s": float(times.sum()),
            "predicted_s": p.time_s if p else None,
            "predicted_algorithm": p.algorithm if p else None,
            "ratio": med / p.time_s if p and p.time_s > 0 else None,
            "busbw_gbps": _gbps(_busbw(kind, size, n, med)),
            "kernel": f"{statistics.mode(kernels)}_{statistics.mode(protos)}" if kernels and protos
            else None,
        })
    return sorted(rows, key=lambda r: -r["total_s"])


def step_of(run: Run, rank: int, t: float) -> int | None:
    """The step whose window holds time ``t`` on ``rank`` (None: outside every step)."""
    r = next(x for x in run.ranks if x.rank == rank)
    return next((s.number for s in r.steps if s.start <= t < s.end), None)


def slowest(run: Run, found: list[Instance], prices: dict[int, Priced]) -> list[dict[str, Any]]:
    """The SLOWEST collectives with the largest measured/predicted ratio."""
    scored = [(i.time_us * 1e-6 / prices[id(i)].time_s, i) for i in found
              if id(i) in prices and prices[id(i)].time_s > 0]
    scored.sort(key=lambda x: -x[0])
    out = []
    for ratio, inst in scored[:SLOWEST]:
        c = min(inst.calls, key=lambda x: x.duration_us)
        out.append({"collective": c.collective, "size_bytes": c.size_bytes,
                    "group_size": c.group_size, "ranks": sorted(x.rank for x in inst.calls),
                    "step": step_of(run, c.rank, c.span[0]), "measured_s": inst.time_us * 1e-6,
                    "predicted_s": prices[id(inst)].time_s, "ratio": ratio})
    return out


def analyse(run: Run, target: Target | None) -> dict[str, Any]:
    """Everything ``ringtree profile --json`` prints but the what-if (module doc)."""
    found, mismatched = instances(run)
    prices = priced(found, run.backend, target)
    offsets = found[0].offsets if found else {}
    warnings = list(run.warnings)
    if mismatched:
        warnings.append(f"{mismatched} positions in a group's order of calls disagree across "
                        "ranks (kind or size): those calls are counted but not matched")
    return {
        "ranks": [r.rank for r in run.ranks], "backend": run.backend, "device": run.device,
        "target": target.name if target else None,
        "collectives": collective_rows(found, prices),
        "steps": [s.record() for s in step_splits(run)],
        "overall": [s.record() for s in whole_splits(run)],
        "slowest": slowest(run, found, prices),
        "stragglers": [vars(x) | {"median_s": x.median_us * 1e-6, "max_s": x.max_us * 1e-6}
                       for x in lateness(found, offsets)],
        "clock_offsets_s": {str(k): v * 1e-6 for k, v in offsets.items() if v},
        "warnings": warnings,
    }
