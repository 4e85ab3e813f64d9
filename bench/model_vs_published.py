"""ringtree's NCCL model against published nccl-tests results (bench/published/*.toml).

    .venv/bin/python bench/model_vs_published.py [--json] [--plots DIR] [--system NAME]

For every system: the mean error of the predicted bus bandwidth over its points, by size band
(< 64 KiB, 64 KiB - 64 MiB, >= 64 MiB), whether its constants were fitted on it (fit set,
bench/fit_nccl_model.py) or not (check set), and the same error without the one-constant
floor calibration; pooled over all systems, over the fit and the check set. Runs and points
the data rules set apart (ringtree.measure.published: contradicted by the source, a network the
run could not have used, NCCL older than 2.12, isolated spikes) are listed with their own
error, not pooled. NCCL's own tuner's predicted times are scored the same way, for
comparison. Where a source logs NCCL's choice per size, the script compares ringtree's.

``--plots DIR`` draws one PNG per system: the published busbw, the model's line, NCCL's choice
marked (docs/img/published/ holds them). ``--json`` prints ``{"systems": [{"name", "source",
"points", "mape", ...}], "set_apart_systems": [...], "pooled": {"all", "plateau", "points",
...}}`` (errors as fractions; a system all of whose runs are set apart is listed apart).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from ringtree.cost.nccl import tuner
from ringtree.cost.nccl.topology import topology
from ringtree.measure import nccl_check, published

HERE = Path(__file__).parent


def tuner_only(cluster, run, size):  # noqa: ANN001, ANN201
    """NCCL's own prediction for its own choice, as the scorer wants it (None for the
    collectives NCCL runs as point-to-point calls: its tuner does not price them)."""
    if run.collective not in tuner.NCCL_COLLECTIVES:
        return None
    topo = topology(cluster, run.nodes, run.gpus_per_node)
    version = run.nccl_version[:2] if run.nccl_version else None
    settings = tuner.Settings.for_cluster(cluster, run.env, version)
    entry = tuner.choose(run.collective, size, topo, settings)
    return entry.time_us(run.collective, size, topo), f"{entry.algorithm}/{entry.protocol}"


def choices(points: list[published.Point]) -> tuple[int, int]:
    """(agreeing, compared) over points whose source logs NCCL's algorithm and protocol."""
    agree = total = 0
    for p in points:
        run = p.run
        if not run.nccl_algorithm:
            continue
        i = run.sizes.index(p.size)
        logged = f"{run.nccl_algorithm[i]}/{run.nccl_protocol[i]}".lower()
        total += 1
        agree += p.choice.lower().replace("_", "") == logged.replace("_", "")
    return agree, total


def plot(system: published.System, points: list[published.Point], folder: Path) -> Path:
    """Published busbw (dots, one colour per run) and the model's (lines), choice marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    by_run: dict[int, list[published.Point]] = defaultdict(list)
    for p in points:
        by_run[id(p.run)].append(p)
    for i, pts in enumerate(by_run.values()):
        run = pts[0].run
        label = f"{run.collective.value} {run.nodes}x{run.gpus_per_node}"
        if run.env:
            label += " " + " ".join(f"{k.removeprefix('NCCL_')}={v}" for k, v in run.env.items())
        if run.anomaly:
            label += " (set apart)"
        colour = f"C{i % 10}"
        x = [p.size for p in pts]
        ax.scatter(x, [p.measured_busbw for p in pts], s=14, color=colour, label=label)
        ax.plot(x, [p.predicted_busbw for p in pts], color=colour, lw=1)
        last = None
        for p in pts:
            if p.choice != last:
                ax.annotate(p.choice, (p.size, p.predicted_busbw), fontsize=6, color=colour,
                            xytext=(2, 4), textcoords="offset points")
                last = p.choice
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{system.name}: published (dots) and ringtree's NCCL model (lines)", fontsize=9)
    ax.legend(fontsize=6)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{system.name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--plots", type=Path, default=None, metavar="DIR", help="one PNG per system")
    p.add_argument("--system", default=None, help="only systems whose name starts with this")
    a = p.parse_args()
    systems = published.load(HERE / "published")
    if a.system:
        systems = [s for s in systems if s.name.startswith(a.system)]
    every, fit, check, points = nccl_check.score(systems)
    raw, _, _, _ = nccl_check.score(systems, calibrated=False)
    nccl = published.Score()
    for pt in published.points(systems, tuner_only):
        nccl.add(pt)
    agree, compared = choices(points)
    rows = []
    for s in systems:
        pts = [x for x in points if x.run.system == s.name]
        kept = [x for x in pts if not (x.run.anomaly or x.glitch)]
        apart = [x for x in pts if x.run.anomaly or x.glitch]
        bands = {name: statistics.fmean(e) if (e := [x.error for x in kept if x.band == name])
                 else None for name, _, _ in published.BANDS}
        rows.append({
            "name": s.name, "source": s.source, "cluster": s.cluster.key,
            "role": "fit" if s.name in nccl_check.FIT_SYSTEMS else "check",
            "points": len(kept), "mape": every.system(s.name) if kept else None,
            "bands": bands,
            "uncalibrated": raw.system(s.name) if s.name in raw.per_system else None,
            "nccl_tuner": nccl.system(s.name) if s.name in nccl.per_system else None,
            "set_apart": {"points": len(apart),
                          "mape": statistics.fmean(x.error for x in apart) if apart else None,
                          "why": sorted({x.run.anomaly or "isolated spike" for x in apart})},
        })
        if a.plots:
            plot(s, pts, a.plots)
    pooled = {
        "all": every.pooled, "plateau": every.band(">= 64 MiB"), "points": every.n_points,
        "bands": every.record()["bands"], "fit": fit.pooled, "check": check.pooled,
        "check_plateau": check.band(">= 64 MiB"), "uncalibrated": raw.pooled,
        "uncalibrated_plateau": raw.band(">= 64 MiB"), "nccl_tuner": nccl.pooled,
        "set_apart": every.record()["anomalous"],
        "choices": {"agree": agree, "compared": compared},
    }
    if a.json:  # a system whose every run is set apart is listed apart too
        scored = [r for r in rows if r["points"]]
        apart = [r for r in rows if not r["points"]]
        print(json.dumps({"systems": scored, "set_apart_systems": apart, "pooled": pooled},
                         indent=1))
        return
    print("# ringtree's NCCL model vs published nccl-tests busbw: mean |predicted/measured - 1|")
    print("# role: fit = its constants were fitted here (bench/fit_nccl_model.py); check = not")
    print(f"{'system':45} {'role':5} {'pts':>4} {'all':>6} {'<64K':>6} {'mid':>6} {'>=64M':>6} "
          f"{'uncal':>6} {'tuner':>6}  set apart")

    def pct(v: float | None) -> str:
        return f"{v:6.1%}" if v is not None else "     -"

    for r in rows:
        b = list(r["bands"].values())
        apart = r["set_apart"]
        note = f"{apart['points']} pts {pct(apart['mape'])}" if apart["points"] else ""
        cells = " ".join(pct(v) for v in (r["mape"], *b, r["uncalibrated"], r["nccl_tuner"]))
        print(f"{r['name'][:45]:45} {r['role']:5} {r['points']:4d} {cells}  {note}")
    print(
        f"pooled over {pooled['points']} points of {len(rows)} systems: {pooled['all']:.1%} "
        f"(< 64 KiB {pooled['bands']['< 64 KiB']:.1%}, 64 KiB - 64 MiB "
        f"{pooled['bands']['64 KiB - 64 MiB']:.1%}, >= 64 MiB {pooled['plateau']:.1%})"
    )
    print(
        f"fit set {pooled['fit']:.1%}, check set {pooled['check']:.1%} (>= 64 MiB "
        f"{pooled['check_plateau']:.1%}); without floor calibration {pooled['uncalibrated']:.1%}"
        f" (>= 64 MiB {pooled['uncalibrated_plateau']:.1%}); NCCL's own tuner's times "
        f"{pooled['nccl_tuner']:.1%}"
    )
    sa = pooled["set_apart"]
    print(
        f"set apart: {sa['points']} points, mean error {pct(sa['mean']).strip()}; "
        f"NCCL's logged choice matched at {agree} of {compared} sizes"
    )


if __name__ == "__main__":
    main()
