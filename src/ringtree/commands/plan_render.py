"""Tables and lines of ``ringtree plan``: one plan, a comparison, a search."""

from __future__ import annotations

from rich.table import Table

from ringtree.output import stdout_console
from ringtree.plan.record import Plan
from ringtree.plan.search import SearchResult
from ringtree.units import format_bytes, format_params, format_percent, format_time, format_usd

VERDICTS_SHOWN = 10  # --compare prints the verdicts of the best ones


def _t(seconds: float | None) -> str:
    return "-" if seconds is None else format_time(seconds, exact=False)


def _usd(usd: float | None) -> str:
    return "-" if usd is None else format_usd(usd, exact=False)


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else format_percent(fraction, exact=False)


def _where(p: Plan) -> str:
    c = p.placement
    if c.cluster is not None:
        hw = c.cluster
        return (f"{c.gpus} x {hw.gpu.name} = {c.nodes} node{'s' * (c.nodes > 1)} of "
                f"{c.gpus_per_node} ({hw.key}: {c.intra.name} inside"
                + (f", {c.inter.name} between)" if c.nodes > 1 else ")"))
    return (
        f"{c.gpus} GPUs = {c.nodes} node{'s' * (c.nodes > 1)} x {c.gpus_per_node}, "
        f"{c.intra.name} inside" + (f", {c.inter.name} between" if c.nodes > 1 else "")
    )


def _degrees(p: Plan) -> str:
    lay = p.layout
    text = f"dp={lay.dp} x tp={lay.tp} x pp={lay.pp}"
    text += f" x cp={lay.cp}" if lay.cp > 1 else ""
    text += f", ep={lay.ep}" if lay.ep > 1 else ""
    text += f", v={lay.v}" if lay.v > 1 else ""
    return text


def _header(p: Plan) -> str:
    mdl = p.model
    return (
        f"{mdl.name} ({format_params(mdl.params)} params) on {_where(p)}; {p.strategy}: "
        f"{_degrees(p)}, {p.micro_batches} micro-batch{'es' * (p.micro_batches > 1)} of "
        f"{p.training.micro_batch} per step"
    )


def render_plan(p: Plan) -> None:
    """One plan: its collectives, then compute, memory, dollars and the verdict."""
    console = stdout_console()
    console.print(_header(p))
    table = Table()
    for col in ("collective", "group", "calls", "algorithm", "bytes/GPU", "time", "exposed"):
        table.add_column(col, justify="left" if col in ("collective", "algorithm") else "right")
    for c in p.collectives:
        group = f"{c.op.group} {c.shape.size}" + (
            f" ({c.shape.nodes} nodes)" if c.shape.nodes > 1 else ""
        )
        table.add_row(
            c.op.op, group, str(c.op.calls), c.call.algorithm,
            format_bytes(c.bytes_per_gpu), _t(c.time_s), _t(c.exposed_s),
        )
    table.add_row(
        "total", "", str(sum(c.op.calls for c in p.collectives)), "",
        format_bytes(p.bytes_per_gpu), _t(p.comm_time_s), _t(p.exposed_s), style="bold",
    )
    console.print(table)
    for c in p.collectives:
        if c.call.hierarchical:
            console.print(
                f"{c.op.op}: hierarchical ({c.shape.nodes} nodes x {c.shape.per_node}), "
                "cheaper than any flat algorithm here"
            )
    fits = "fits" if p.fits_memory else "does NOT fit"
    opt = f", optimizer {_t(p.optimizer_s)}" if p.optimizer_s else ""
    console.print(
        f"compute {_t(p.compute_s)}{_options(p)}, bubble {_t(p.bubble_s)}{opt}, step "
        f"{_t(p.step_time_s)}; "
        f"overhead {_pct(p.overhead)}"
        + (f"; MFU {_pct(p.mfu)}, HFU {_pct(p.hfu)}" if p.mfu is not None else "")
    )
    if p.memory is not None:
        mem = p.memory
        console.print(
            f"memory per GPU {format_bytes(mem.total)} ({fits} in "
            f"{format_bytes(p.placement.gpu_memory_bytes)}): weights {format_bytes(mem.weights)}, "
            f"gradients {format_bytes(mem.gradients)}, optimizer {format_bytes(mem.optimizer)}, "
            f"activations {format_bytes(mem.activations)} ({_recompute(p.training.recompute)}"
            f"{', fp8' if p.training.precision == 'fp8' else ''}), other "
            f"{format_bytes(mem.other)}"
        )
    else:
        console.print(
            f"model states {format_bytes(p.memory_bytes_per_gpu)} per GPU ({fits} in "
            f"{format_bytes(p.placement.gpu_memory_bytes)})"
        )
    if p.placement.price_gpu_hour is not None:
        day = p.placement.usd_per_second * 86400  # type: ignore[operator]
        console.print(
            f"exposed communication costs {_usd(p.usd_per_step)} per step, "
            f"{_usd(p.usd_per_day)} per day (cluster: {_usd(day)} per day"
            + (f"; the whole step {_usd(p.step_usd)})" if p.step_usd is not None else ")")
        )
    console.print(f"verdict: {p.verdict}")


def render_compare(plans: list[Plan]) -> None:
    """Plans side by side, best first, and the verdicts of the best."""
    console = stdout_console()
    if not plans:
        console.print("no strategy applies")
        return
    console.print(_header(plans[0]).split(";")[0])
    table = Table()
    cols = ("#", "strategy", "dp x tp x pp", "m", "bytes/GPU", "comm", "exposed", "bubble")
    cols += ("step", "overhead", "memory/GPU", "$/step", "$/day")
    for col in cols:
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for i, p in enumerate(plans, start=1):
        lay = p.layout
        mem = format_bytes(p.memory_bytes_per_gpu) + ("" if p.fits_memory else " (too big)")
        table.add_row(
            str(i), p.strategy, f"{lay.dp} x {lay.tp} x {lay.pp}", str(p.micro_batches),
            format_bytes(p.bytes_per_gpu), _t(p.comm_time_s), _t(p.exposed_s), _t(p.bubble_s),
            _t(p.step_time_s), _pct(p.overhead), mem, _usd(p.usd_per_step), _usd(p.usd_per_day),
        )
    console.print(table)
    shown = plans if len(plans) <= VERDICTS_SHOWN else plans[:VERDICTS_SHOWN]
    for i, p in enumerate(shown, start=1):
        console.print(f"{i}. {p.strategy}: {p.verdict}")
    if len(shown) < len(plans):
        console.print(f"(verdicts of the first {len(shown)}; --json has every one)")


def render_search(found: SearchResult) -> None:
    """The best plans of a search, what limits the best, and their verdicts."""
    console = stdout_console()
    plans = found.plans
    by = "step time" if found.objective == "time" else "cost per token"
    if not plans:
        console.print(f"searched {found.considered:,} configurations: none fits in memory")
        return
    console.print(_header(plans[0]).split(";")[0])
    if len(found.nodes) > 1:
        console.print(f"(by cost per token: {', '.join(map(str, found.nodes))} nodes tried)")
    console.print(f"searched {found.considered:,} configurations, {found.fitting:,} fit; "
                  f"best {len(plans)} by {by}:")
    table = Table()
    cols = ("#", "strategy", "GPUs", "b", "recompute", "m", "step", "MFU", "memory/GPU",
            "tokens/s", "$/step", "$/day", "$/M tokens")
    for col in cols:
        table.add_column(col, justify="left" if col in ("strategy", "recompute") else "right")
    for i, p in enumerate(plans, start=1):
        j = p.to_json()
        rate = p.placement.usd_per_second
        table.add_row(
            str(i), p.strategy, f"{p.placement.gpus:,}", str(p.training.micro_batch),
            p.training.recompute,
            str(p.micro_batches), _t(p.step_time_s), _pct(p.mfu),
            format_bytes(p.memory_bytes_per_gpu),
            f"{j['tokens_per_s']:,.0f}" if j["tokens_per_s"] else "-", _usd(p.step_usd),
            _usd(None if rate is None else rate * 86400), _usd(j["usd_per_million_tokens"]),
        )
    console.print(table)
    console.print(f"what limits the best: {found.limits}")
    for i, p in enumerate(plans, start=1):
        console.print(f"{i}. {p.strategy}: {p.verdict}")


def _recompute(rc: str) -> str:
    """The memory line's words for a recomputation setting."""
    return "no recomputation" if rc == "none" else f"{rc} recomputation"


def _options(p: Plan) -> str:
    """What the compute line says of the precision and compilation, when not the default."""
    said = [f"{p.training.precision.upper()} GEMMs"] if p.training.precision != "bf16" else []
    said += [] if p.training.compile else ["eager"]
    return f" ({', '.join(said)})" if said else ""
