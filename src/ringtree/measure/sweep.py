"""What a sweep measures: the :class:`Sweep` (sizes x collectives x algorithms, nccl-tests'
settings), checked before any process starts, and the cells and lines the worker measures.

``sizes(min, max, factor)`` are nccl-tests' ``-b -e -f``. Each algorithm runs at the chunk
count that the automatic choice would give it on ``link`` (default: the engine's own link
for the transport, :func:`ringtree.runtime.auto.link_for`), so a pipelined tree is measured
as auto would run it. :mod:`ringtree.measure.sweep_run` runs a sweep and gathers its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringtree import dtypes
from ringtree.algorithms import BuildSpec, algorithms_for, get_algorithm
from ringtree.collectives import Collective, ReduceOp
from ringtree.cost.select import tuned
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.measure.specs import spec_for
from ringtree.measure.worker import NATIVE
from ringtree.runtime.auto import link_for
from ringtree.units import format_bytes

#: The engines a sweep runs on (its worker times CPU collectives).
SWEEP_BACKENDS = ("gloo", "mpi")

#: dtypes a sweep offers (checked exactly: numpy holds them, bfloat16 as its bit patterns)
BENCH_DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
DEFAULT_BUDGET_S = 1.0
DEFAULT_MIN_ITERS, DEFAULT_MAX_ITERS = 5, 200


def sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """``min, min*f, min*f^2, ...`` up to ``max`` (nccl-tests' -b -e -f); RingtreeError when
    min > max, min < 1 or f <= 1."""
    if min_bytes < 1:
        raise RingtreeError(f"minimum size -b must be >= 1 byte, got {min_bytes}")
    if min_bytes > max_bytes:
        raise RingtreeError(
            f"minimum size -b {format_bytes(min_bytes)} is larger than maximum size -e "
            f"{format_bytes(max_bytes)}: give -b <= -e"
        )
    if not factor > 1:
        raise RingtreeError(f"size factor -f must be > 1, got {factor:g}")
    out, s = [], float(min_bytes)
    while round(s) <= max_bytes:
        if not out or round(s) > out[-1]:
            out.append(round(s))
        s *= factor
    return out


def canonical_dtype(name: str) -> str:
    """``float`` -> ``float32`` (:mod:`ringtree.dtypes`' aliases, nccl-tests' names among
    them); RingtreeError unless the sweep offers it."""
    return dtypes.canonical(name, BENCH_DTYPES, "bench")


@dataclass(frozen=True)
class Sweep:
    """What to measure.

    algorithms: names (ringtree's, or ``native``: the engine's own call); None: every
    algorithm of each collective that runs on N ranks, then native if ``native``. iters:
    timed calls per line; None: as many as fill ``budget_s`` per size at the warm-up's pace
    (each algorithm of a size gets the same number), within min_iters..max_iters. link:
    prices the chunk count of pipelined algorithms (None: the engine's link for the backend);
    chunks: that count, fixed instead. lines: nccl-tests' order -- one collective and
    algorithm after another, size by size, each line (a size, both placements) measured on
    its own and reported as soon as it is done -- instead of every call of the sweep
    interleaved. pairs: measure out of place and in place where the collective has both
    (nccl-tests' two column groups). average: nccl-tests' -a, what a call's time is of the
    ranks' times: rank 0's (0), their mean (1), min (2) or max (3, the default: a collective
    is done when its last rank is). check: count the wrong elements (nccl-tests' -c).
    """

    n_ranks: int
    sizes: tuple[int, ...]
    collectives: tuple[Collective, ...] = (Collective.ALL_REDUCE,)
    algorithms: tuple[str, ...] | None = None
    backend: str = "gloo"
    dtype: str = "float32"
    op: ReduceOp = ReduceOp.SUM
    root: int = 0
    warmup: int = 2
    iters: int | None = None
    budget_s: float = DEFAULT_BUDGET_S
    min_iters: int = DEFAULT_MIN_ITERS
    max_iters: int = DEFAULT_MAX_ITERS
    in_place: bool = False
    timeout_s: float = 60.0
    link: Link | None = None
    native: bool = True
    chunks: int | None = None
    lines: bool = False
    pairs: bool = False
    average: int = 3
    check: bool = True
    step: str = ""  # how the sizes step, for the header ("4(factor)", nccl-tests' words)


#: The collectives measured both out of place and in place (nccl-tests' two groups): those
#: whose in-place form torch's API has, and whose out-of-place one ringtree's engine has.
PAIRED = (Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE, Collective.ALL_GATHER)
#: nccl-tests' -a: how a call's time is made of the ranks' times.
AVERAGES = {0: "rank 0's", 1: "the ranks' mean", 2: "the fastest rank's", 3: "the slowest rank's"}


def plan_algorithms(sweep: Sweep, col: Collective) -> list[str]:
    """The algorithms measured for ``col``: those asked for that it has (all that run on N
    when none were asked for), then native if asked for (or by default)."""
    mine = algorithms_for(col)
    if sweep.algorithms is None:
        names = [a for a in mine if runs_on(col, a, sweep.n_ranks)]
        names += [NATIVE] if sweep.native else []
    else:
        names = [a for a in sweep.algorithms if a in mine or a == NATIVE]
    return names


def runs_on(col: Collective, algorithm: str, n_ranks: int) -> bool:
    """Whether ``algorithm`` builds for ``col`` on ``n_ranks`` ranks without more settings
    (hierarchical needs ranks per node)."""
    try:
        tuned(col, algorithm, n_ranks, n_ranks * 4, link_for("gloo"), itemsize=4)
    except RingtreeError:
        return False
    return True


def validate_sweep(sweep: Sweep) -> None:
    """RingtreeError on anything the ranks would trip over, before starting them."""
    if sweep.backend not in SWEEP_BACKENDS:
        raise RingtreeError(
            f"backend {sweep.backend!r} is not swept: expected one of "
            f"{', '.join(SWEEP_BACKENDS)} (NCCL: ringtree run --backend nccl, or "
            "bench/engine_vs_native.py --backends nccl)"
        )
    if sweep.n_ranks < 1:
        raise RingtreeError(f"number of ranks must be >= 1, got {sweep.n_ranks}")
    if not sweep.sizes:
        raise RingtreeError("no sizes to measure")
    if canonical_dtype(sweep.dtype) == "bfloat16" and sweep.backend != "gloo":
        raise RingtreeError("bfloat16 is swept over gloo only: MPI has no bfloat16 to reduce "
                            "with (use --backend gloo, or another -d)")
    if sweep.average not in AVERAGES:
        raise RingtreeError(f"-a {sweep.average} is not one of nccl-tests' 0 (rank 0), 1 "
                            "(mean), 2 (min), 3 (max)")
    if sweep.in_place and Collective.REDUCE_SCATTER in sweep.collectives:
        raise RingtreeError(
            "reduce-scatter has no in-place form in torch.distributed's API "
            "(its output must not overlap its input): drop --in-place"
        )
    if any(c.has_root for c in sweep.collectives) and not 0 <= sweep.root < sweep.n_ranks:
        raise RingtreeError(f"root {sweep.root} is not a rank of 0..{sweep.n_ranks - 1}")
    if any(c.reduces for c in sweep.collectives):
        from ringtree.runtime.kernels import check_dtype

        check_dtype(canonical_dtype(sweep.dtype), sweep.op)
    if sweep.algorithms is not None:
        known = {a for c in sweep.collectives for a in algorithms_for(c)} | {NATIVE}
        for a in sweep.algorithms:
            if a not in known:
                raise RingtreeError(
                    f"unknown algorithm {a!r} for {', '.join(c.value for c in sweep.collectives)}"
                    f": expected some of {', '.join(sorted(known))}"
                )
    for col in sweep.collectives:
        names = plan_algorithms(sweep, col)
        if not names:
            raise RingtreeError(
                f"none of the algorithms asked for runs {col.value}: it has "
                f"{', '.join(algorithms_for(col))}, and native"
            )
        for a in names:
            if a != NATIVE and not runs_on(col, a, sweep.n_ranks):
                raise RingtreeError(
                    f"{a} {col.value} does not run on {sweep.n_ranks} ranks without ranks per node"
                )


def cells(sweep: Sweep) -> list[dict[str, Any]]:
    """The worker's cells: per collective and size (in ``lines`` mode per algorithm too, each
    of its placements with ``pairs``), the algorithms with their chunk counts."""
    itemsize = dtypes.itemsize(canonical_dtype(sweep.dtype))
    link = sweep.link or link_for(sweep.backend)
    out = []
    for col in sweep.collectives:
        names = plan_algorithms(sweep, col)
        spec = spec_for(col)
        placements = ["out", "in"] if sweep.pairs and col in PAIRED else [None]
        groups = [[a] for a in names] if sweep.lines else [names]
        share = sweep.budget_s / (len(names) * len(placements)) if sweep.lines else None
        for group in groups:
            for size in sweep.sizes:
                count = spec.count(size, itemsize, sweep.n_ranks)
                algs = [[a, _chunks(sweep, col, a, count, itemsize, link)] for a in group]
                for placement in placements:
                    cell = {"collective": col.value, "size_bytes": size, "algorithms": algs,
                            "placement": placement}
                    out.append(cell if share is None else {**cell, "budget_s": share})
    return out


def _chunks(sweep: Sweep, col: Collective, name: str, count: int, itemsize: int,
            link: Link) -> int | None:
    """The chunk count ``name`` runs with (None: not pipelined, native, or no elements)."""
    if name == NATIVE or not get_algorithm(col, name).pipelined or not count:
        return None
    spec = BuildSpec(root=sweep.root)
    return sweep.chunks or tuned(col, name, sweep.n_ranks, count * itemsize, link,
                                 itemsize=itemsize, spec=spec).n_chunks


def line_groups(sweep: Sweep, todo: Sequence[dict[str, Any]]) -> list[list[int]]:
    """The worker's lines: each a size's cells (its placements) in ``lines`` mode, else one
    line of every cell."""
    if not sweep.lines:
        return [list(range(len(todo)))]
    groups: dict[tuple, list[int]] = {}
    for i, c in enumerate(todo):
        key = (c["collective"], c["algorithms"][0][0], c["size_bytes"])
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def in_place_of(sweep: Sweep, cell: dict[str, Any]) -> bool:
    """Whether a cell ran in place: its placement, else the collective's one form (torch's
    API: all-reduce, broadcast and reduce in place, all-gather as ``in_place`` says)."""
    if cell.get("placement") is not None:
        return cell["placement"] == "in"
    col = Collective.parse(cell["collective"])
    return col in (Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE) or (
        col is Collective.ALL_GATHER and sweep.in_place)

