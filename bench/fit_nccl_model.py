"""Fit the NCCL model's global constants on the fit set of published nccl-tests results.

    .venv/bin/python bench/fit_nccl_model.py [--sweeps 3] [--only NAME ...] [--json]

The fit set is ``ringtree.measure.nccl_check.FIT_SYSTEMS``; every other system in
bench/published/ is the check set, which the fit never sees (bench/model_vs_published.py
reports both). Each system is calibrated first (its smallest measured size sets its launch
floor, or its network's hop latency), as the check does; then the constants below are fitted
one at a time (golden-section search within bounds, a few sweeps) to the lowest mean busbw
error over the fit set. Prints the constants to put in ``ringtree.cost.nccl.timing.Params``
with the fit set's error before and after, and the check set's error with the new constants.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

from ringtree.cost.nccl import timing
from ringtree.measure import nccl_check, published
from ringtree.measure.nccl_fit import golden

HERE = Path(__file__).parent
#: (field, low, high): scalar constants fitted; per-network efficiencies below
SCALARS = (
    ("kernel_us", 0.0, 20.0),
    ("intra_latency_scale", 0.3, 3.0),
    ("ll128_latency_scale", 0.3, 3.0),
    ("simple_latency_scale", 0.3, 3.0),
    ("nvlink_efficiency", 0.8, 1.05),
    ("mnnvl_nvlink_efficiency", 0.7, 1.0),
    ("nvls_chunk_overhead_bytes", 0.0, 96 * 1024.0),
    ("nvls_latency_scale", 0.5, 4.0),
    ("p2p_peer_us", 0.0, 30.0),
)
NETWORKS = ("ib", "efa", "tcpxo")


def _with(params: timing.Params, name: str, value: float) -> timing.Params:
    if name.startswith("simple:"):
        net = name[7:]
        table = tuple((k, value if k == net else v) for k, v in params.net_simple_step_us)
        return replace(params, net_simple_step_us=table)

    if name.startswith("eff:"):
        net = name[4:]
        table = tuple((k, value if k == net else v) for k, v in params.net_efficiency)
        return replace(params, net_efficiency=table)
    return replace(params, **{name: value})


def _get(params: timing.Params, name: str) -> float:
    if name.startswith("simple:"):
        return params.simple_step_us(name[7:])

    if name.startswith("eff:"):
        return params.efficiency(name[4:])
    return float(getattr(params, name))


def fit_error(systems: list[published.System], params: timing.Params) -> float:
    """Mean busbw error over the fit set, each system calibrated."""
    _, fit, _, _ = nccl_check.score(systems, params)
    return fit.pooled


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="fit only these constants (the others stay as they are)")
    a = p.parse_args()
    systems = published.load(HERE / "published")
    fitted = [s for s in systems if s.name in nccl_check.FIT_SYSTEMS]
    params = timing.DEFAULT
    before = fit_error(fitted, params)
    names = [n for n, _, _ in SCALARS] + [f"eff:{n}" for n in NETWORKS] + ["simple:tcpxo"]
    bounds = {n: (lo, hi) for n, lo, hi in SCALARS} | {f"eff:{n}": (0.4, 1.0) for n in NETWORKS}
    bounds["simple:tcpxo"] = (14.0, 2000.0)
    if a.only:
        unknown = sorted(set(a.only) - set(names))
        if unknown:
            p.error(f"unknown constant {unknown[0]!r}: expected some of {', '.join(names)}")
        names = a.only
    for sweep in range(a.sweeps):
        for name in names:
            lo, hi = bounds[name]
            start = params
            best = golden(lambda v, n=name, p0=start: fit_error(fitted, _with(p0, n, v)), lo, hi)
            if fit_error(fitted, _with(params, name, best)) < fit_error(fitted, params):
                params = _with(params, name, best)
        print(f"# sweep {sweep + 1}: fit-set error {fit_error(fitted, params):.2%}")
    every, fit, check, _ = nccl_check.score(systems, params)
    out = {
        "fit_systems": sorted(nccl_check.FIT_SYSTEMS),
        "fit_error_before": before, "fit_error_after": fit.pooled, "check_error": check.pooled,
        "constants": {n: _get(params, n) for n in names},
    }
    if a.json:
        print(json.dumps(out, indent=1))
        return
    print(f"fit set ({len(fitted)} systems): mean busbw error {before:.1%} -> {fit.pooled:.1%}")
    print(f"check set: {check.pooled:.1%}; all: {every.pooled:.1%}")
    for n in names:
        print(f"  {n:28s} {_get(params, n):.4g}")
    print("# Params:", {k: v for k, v in asdict(params).items()})


if __name__ == "__main__":
    main()
