"""One call of a collective, from the caller's buffers to the executor, and the one cache.

A call's *shape* (collective, element counts, dtypes, buffer kind, op, root, algorithm and
tuning options) decides everything but the data: the algorithm ``auto`` picks, the schedule,
this rank's compiled program and its tape (the executor's order of operations, built beside
it). So the first call of a shape on a group validates the call, resolves the algorithm,
compiles the program and its tape, logs the decision (RINGTREE_DEBUG=INFO) and keeps the
result as a :class:`CallPlan` in the group; later calls of the shape find it
(~10 us from the call to its first message). With mismatch detection at its default, that
first call is also the one that exchanges the call's fingerprint (:mod:`fingerprint`): every
rank decides it when the call is made, in call order, so they agree.

An all-to-all with split sizes is the exception: its split sizes are data (a mixture of
experts routes other tokens every step, and each rank knows only its own row and column), so
its plan is kept per split sizes but its *shape*, the one whose first call is checked, leaves
them out -- else ranks whose sizes repeat would skip an exchange that the others make. Split
sizes let a rank compile only an algorithm that sends every block straight to its
destination (linear, pairwise): forwarding another rank's block needs its size.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NoReturn

from ringtree.algorithms import build
from ringtree.collectives import Collective, Part, ReduceOp, Splits
from ringtree.errors import RingtreeError, RingtreeRuntimeError
from ringtree.events import CallRecord, Recorder
from ringtree.runtime import auto, buffers, fingerprint, log
from ringtree.runtime.errors import MismatchError, PeerError
from ringtree.runtime.executor import Context, execute
from ringtree.runtime.groups import Group
from ringtree.runtime.kernels import check_dtype, dtype_name, kernels_for
from ringtree.runtime.options import AUTO, Options
from ringtree.runtime.program import Program, compile_program
from ringtree.runtime.tape import Instruction, compile_tape
from ringtree.schedule import Schedule, Size

#: An all-to-all's split sizes as one rank gives them, in elements: (sent, received).
RankSplits = tuple[tuple[int, ...], tuple[int, ...]]
#: The collectives whose output may not overlap their input, nor be it (their layouts').
SEPARATE_OUTPUT = frozenset(c for c in Collective if c.layout.separate)


@dataclass(frozen=True)
class CallPlan:
    """What every call of one shape on one group runs (see the module doc)."""

    collective: Collective
    algorithm: str
    n_chunks: int | None
    count: int
    itemsize: int
    op: ReduceOp | None
    root: int
    schedule: Schedule
    program: Program
    signature: fingerprint.CallSignature
    label: str
    tag: int
    #: where this rank's input goes in its output, when the input is its block of the
    #: output (all-gather: copied there first; the program then runs on the output alone)
    own: tuple[int, int] | None
    #: the program's order of operations (:mod:`ringtree.runtime.tape`; None: a grouped
    #: transport runs step by step)
    tape: tuple[Instruction, ...] | None


def resolve(
    col: Collective, algorithm: str, n: int, count: int, itemsize: int, root: int = 0,
    n_chunks: int | None = None, kind: str = "gloo", algo_env: str | None = None,
) -> tuple[str, int | None]:
    """``(algorithm, n_chunks)`` a call runs: "auto" resolved for a ``kind`` transport by
    :mod:`ringtree.runtime.auto` (every rank gets the same answer for the same call).
    ``algo_env``: the RINGTREE_ALGO value to honour (None: the environment's)."""
    if algorithm != AUTO:
        return algorithm, n_chunks
    name, chunks = auto.choose(col, n, count * itemsize, itemsize, root, algo_env, kind)
    return name, n_chunks or chunks


@lru_cache(maxsize=256)
def schedule(
    col: Collective, algorithm: str, n: int, root: int, n_chunks: int | None, rpn: int | None
) -> Schedule:
    """The Schedule a call runs (shared by every group of the same size)."""
    return build(col, algorithm, n, root=root, n_chunks=n_chunks, ranks_per_node=rpn)


def parse_op(op: Any) -> ReduceOp:
    """A ReduceOp from ringtree's, a name, torch.distributed's ``ReduceOp.SUM``... or mpi4py's
    ``MPI.SUM``, ``MPI.PROD``, ``MPI.MIN``, ``MPI.MAX``, ``MPI.BAND``, ``MPI.BOR``,
    ``MPI.BXOR``; RingtreeTypeError (torch's TypeError) for anything else."""
    if isinstance(op, ReduceOp | str):
        return ReduceOp.parse(op)
    if type(op).__module__.startswith("mpi4py"):
        from ringtree.runtime.mpi import reduce_op

        return reduce_op(op)
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    return ReduceOp.parse(name)


def call(
    group: Group,
    col: Collective,
    inbuf: Any,
    outbuf: Any,
    op: Any,
    root: int,
    opts: Options,
    async_op: bool,
    after: Callable[[], None] | None = None,
    splits: RankSplits | None = None,
    before: Callable[[], None] | None = None,
) -> Future | None:
    """Run ``col`` on ``group`` (``outbuf`` None: in place; ``root``: a group rank);
    ``before()`` runs when the call's turn comes (after the group's earlier calls: it fills
    the input), ``after()`` once the collective is done; ``splits``: an all-to-all's split
    sizes (elements this rank sends each rank, and receives from each). Returns the future
    of an async call."""
    try:
        x = buffers.flat(inbuf, "input", group.kind, writable=outbuf is None)
        y = x if outbuf is None else buffers.flat(outbuf, "output", group.kind, writable=True)
        # checked on every call: the shape's plan says nothing of this call's buffers
        if col in SEPARATE_OUTPUT and buffers.overlap(x, y):
            raise RingtreeError(f"{col.value} output overlaps its input: pass separate buffers")
        # the call's shape: a plain tuple of CALL_KEY's fields (see CALL_KEY)
        key = (col, type(x), x.dtype, y.dtype, buffers.device(x), buffers.device(y), y is x,
               op, root, opts.algorithm, opts.n_chunks, opts.ranks_per_node, opts.slice_bytes,
               buffers.numel(x), buffers.numel(y), splits)
        # the shape whose first call is checked: split sizes are data (module doc)
        shape = key if splits is None else key[:-_SIZES]
        try:
            plan = group.plans.get(key)
        except TypeError:  # an unhashable op object: plan every time
            key, shape, plan = None, None, None
        new = shape is None or shape not in group.checked
        if plan is None:
            plan = make_plan(group, col, x, y, op, root, opts, splits)
            if key is not None:
                group.remember(key, plan)
        own = None  # all-gather: this rank's input, copied into its block of the output
        if plan.own is not None:
            own, x = _own_block(group, plan, x, y), y
        if new and shape is not None:
            group.see(shape)
    except RingtreeError as e:
        refuse(group, col, op, root, opts, e)
    mode = opts.check or group.settings.check
    exchange = mode == "always" or (mode == "first" and new)
    timeout_s = opts.timeout_s or group.settings.timeout_s
    recorder = opts.recorder

    def run() -> None:
        if exchange:
            _exchange(group, plan, key, shape, timeout_s)
        if before is not None:
            before()
        if own is not None:
            kernels_for(y).copy(*own)
        if recorder is not None:
            _recorded(group, plan, x, y, timeout_s, recorder)
        else:
            execute(plan.program, group.transport, kernels_for(x), plan.op or ReduceOp.SUM, x,
                    y, group.size, Context(plan.label, timeout_s, None, None, plan.tag),
                    plan.tape)
        if after is not None:
            after()

    return group.submit(buffers.on_caller_stream(x, run), async_op)


#: The fields of a call's key, in order: its shape, the plan cache's key (:func:`call`). A
#: plain tuple: a NamedTuple of these fields cost ~0.45 us more per call (docs/engine.md).
CALL_KEY = ("collective", "buffer type", "input dtype", "output dtype", "input device",
            "output device", "in place", "op", "root", "algorithm", "n_chunks",
            "ranks_per_node", "slice_bytes", "input elements", "output elements", "splits")
#: The key's last fields, its sizes: what the shape of a call with split sizes leaves out.
_SIZES = 3


def _own_block(group: Group, plan: CallPlan, x: Any, y: Any) -> tuple[Any, Any] | None:
    """``(block, input)``: this rank's block of the output and the input to copy into it
    (None: the input is that block, torch's in-place form). RingtreeError when the input
    overlaps the output elsewhere."""
    mine = y[plan.own[0] : plan.own[1]]
    if buffers.same_memory(mine, x):
        return None
    if buffers.overlap(x, y):
        raise RingtreeError(
            f"all-gather input overlaps the output but is not rank {group.rank}'s block of "
            "it: pass that block (in place) or a separate buffer"
        )
    return mine, x


def _exchange(group: Group, plan: CallPlan, key: tuple | None, shape: tuple | None,
              timeout_s: float) -> None:
    """The fingerprint exchange of the call (:mod:`fingerprint`); if it fails (on every
    rank alike), every rank forgets the shape, so that its next call checks again."""
    try:
        fingerprint.exchange(group.transport, plan.signature, timeout_s)
    except Exception:
        group.plans.pop(key, None)
        group.checked.discard(shape)
        raise


def _recorded(group: Group, plan: CallPlan, x: Any, y: Any, timeout_s: float,
              recorder: Recorder) -> None:
    """Execute the call and note it in ``recorder``: a CallRecord with the bytes and
    messages the transport counted and when each step was done (and, if it records
    messages, a TraceEvent per message)."""
    transport = group.transport
    marks: list[float] = []
    start, counted = recorder.clock(), transport.counters()
    ctx = Context(plan.label, timeout_s, marks, recorder if recorder.messages else None,
                  plan.tag)
    execute(plan.program, transport, kernels_for(x), plan.op or ReduceOp.SUM, x, y,
            group.size, ctx, plan.tape)
    sent, received, messages = (a - b for a, b in zip(transport.counters(), counted,
                                                      strict=True))
    recorder.calls.append(CallRecord(
        group.rank, group.size, plan.collective.value, plan.algorithm, plan.n_chunks,
        plan.count, plan.itemsize, sent, received, messages, start, recorder.clock(),
        tuple(marks),
    ))


def make_plan(
    group: Group, col: Collective, x: Any, y: Any, op: Any, root: int, opts: Options,
    splits: RankSplits | None = None,
) -> CallPlan:
    """Validate the call, resolve the algorithm, compile the rank's program, log it."""
    rop = parse_op(op) if col.reduces else None
    size = validate(col, x, y, rop, root, group.size, group.rank, splits)
    count = size if isinstance(size, int) else buffers.numel(x)
    itemsize = buffers.itemsize(x)
    if isinstance(size, Splits):  # only a direct algorithm: this rank knows its own blocks
        name, chunks = (DIRECT if opts.algorithm == AUTO else opts.algorithm), opts.n_chunks
    else:
        name, chunks = resolve(col, opts.algorithm, group.size, count, itemsize, root,
                               opts.n_chunks, group.kind, group.settings.algo)
    rpn = opts.ranks_per_node
    if rpn is None and name == "hierarchical":
        rpn = group.ranks_per_node
    s = schedule(col, name, group.size, root, chunks, rpn)
    if isinstance(size, Splits) and not direct(col, name, group.size, root, chunks, rpn):
        raise RingtreeError(
            f"{name} all-to-all forwards other ranks' blocks, whose split sizes this rank does "
            f"not know: with split sizes use {DIRECT} or pairwise (or auto), or give no split sizes"
        )
    slice_bytes = opts.slice_bytes or group.settings.slice_bytes
    lay = col.layout
    own = lay.span(count, group.size, group.rank) if lay.own_block_in_output else None
    in_place = y is x or own is not None
    prog = compile_program(s, group.rank, size, itemsize, in_place=in_place,
                           slice_bytes=slice_bytes,
                           in_place_min_bytes=group.transport.in_place_from())
    sig = fingerprint.CallSignature(
        col, count if isinstance(size, int) else -1, dtype_name(x), rop, name,
        root if col.has_root else None, chunks, slice_bytes,
        splits=None if splits is None else (*splits[0], *splits[1]),
    )
    plan = CallPlan(col, name, chunks, count, itemsize, rop, root, s, prog, sig,
                    f"{col.value} ({name})", group.transport.message_tag(sig.digest()), own,
                    None if group.transport.grouped else compile_tape(prog))
    if log.info_enabled():
        log.info(group.global_rank, describe(group, plan, opts, slice_bytes))
    return plan


#: The all-to-all that split sizes run: every block goes straight to its destination.
DIRECT = "linear"


def moves_own_blocks(s: Schedule) -> bool:
    """Whether every transfer of an all-to-all carries a block from its source rank straight
    to its destination (block (s, d) is chunk s N + d)."""
    n = s.n_ranks
    return all(t.src == t.chunk // n and t.dst == t.chunk % n for _, t in s.transfers())


@lru_cache(maxsize=256)
def direct(
    col: Collective, algorithm: str, n: int, root: int, n_chunks: int | None, rpn: int | None
) -> bool:
    """:func:`moves_own_blocks` of :func:`schedule`'s schedule, kept with it (split sizes
    change every step of a mixture of experts, and each new set makes a new plan)."""
    return moves_own_blocks(schedule(col, algorithm, n, root, n_chunks, rpn))


def describe(group: Group, plan: CallPlan, opts: Options, slice_bytes: int) -> str:
    """The decision log's line for a new call shape (see :mod:`ringtree.runtime.log`)."""
    nbytes = plan.count * plan.itemsize
    dtype = plan.signature.dtype
    head = (f"{plan.collective.value} of {plan.count} {dtype} ({nbytes} B) on {group.size} "
            f"ranks ({group.name}, {group.kind}): algorithm {plan.algorithm}")
    if opts.algorithm == AUTO:
        why = auto.explain(plan.collective, group.size, nbytes, plan.itemsize, plan.root,
                           group.settings.algo, group.kind)
    else:
        why = "asked for by the caller"
    biggest = max((p[2] - p[1] for o in plan.program.sends if (p := o.post)), default=0)
    biggest *= plan.itemsize
    return (f"{head} ({why}); {plan.schedule.n_steps} steps, chunks {plan.n_chunks or 'default'}"
            f", largest message {biggest} B (slices of up to {slice_bytes} B)")


def refuse(group: Group, col: Collective, op: Any, root: int, opts: Options,
           error: RingtreeError) -> NoReturn:
    """Raise ``error``, why this rank cannot make the call, of the type torch raises for it:
    as it is when checks are off or the group has one rank, else prefixed with this rank once
    the peers have been told (a "rejected" fingerprint, sent in turn after the group's
    earlier calls), so that they fail now -- with a MismatchError naming this rank -- rather
    than at a timeout or on this rank's next call."""
    if (opts.check or group.settings.check) == "off" or group.size == 1:
        raise error
    timeout_s = opts.timeout_s or group.settings.timeout_s
    group.submit(lambda: _reject(group, col, op, root, opts, timeout_s), async_op=False)
    own = copy.copy(error)  # torch's type (ValueError, TypeError, RuntimeError), as torch
    own.args = (f"rank {group.rank}: {error}",)
    raise own from None


def _reject(group: Group, col: Collective, op: Any, root: int, opts: Options,
            timeout_s: float) -> None:
    """Send a "rejected" fingerprint so that the peers raise MismatchError naming this rank
    (their own MismatchError names it too; this rank's own error is the one it raises)."""
    try:
        rop = parse_op(op) if col.reduces else None
    except RingtreeError:
        rop = None
    bad = fingerprint.CallSignature(col, 0, "", rop, opts.algorithm, root, opts.n_chunks, 0,
                                    False)
    with contextlib.suppress(MismatchError, PeerError):
        fingerprint.exchange(group.transport, bad, timeout_s)


def validate(
    col: Collective, x: Any, y: Any, op: ReduceOp | None, root: int, n: int, rank: int,
    splits: RankSplits | None = None,
) -> Size:
    """Check the call's buffers against the collective's :class:`Layout`; return the
    payload: the layout's element count S, or an all-to-all's Splits as this rank knows
    them."""
    check_dtype(dtype_name(x), op)
    if y is not x and dtype_name(y) != dtype_name(x):  # torch: ValueError for all-to-all
        error = RingtreeError if col is Collective.ALL_TO_ALL else RingtreeRuntimeError
        raise error(
            f"output dtype {dtype_name(y)} differs from input dtype {dtype_name(x)}: "
            "they must match"
        )
    if y is not x and buffers.device(x) != buffers.device(y):
        raise RingtreeError(f"output is on {y.device}, input on {x.device}: they must match")
    if col.has_root and not 0 <= root < n:
        raise RingtreeRuntimeError(f"root rank {root} is not a rank of this group (0..{n - 1})")
    if splits is not None:
        return _all_to_all_splits(x, y, n, rank, splits)
    lay = col.layout
    n_in, n_out = buffers.numel(x), buffers.numel(y)
    count = lay.count_of(n_in, n_out, n)
    out_want = lay.output_elems(count, n, rank, root)
    if out_want is None and y is not x and lay.output is Part.SAME:
        out_want = n_in  # an output of its own (all-reduce, broadcast, reduce out of place)
    for side, got, want in (("input", n_in, lay.input_elems(count, n, rank, root)),
                            ("output", n_out, out_want)):
        if want is not None and got != want:
            raise RingtreeRuntimeError(_wrong_size(col, side, got, want, count, n, rank))
    return count


def _wrong_size(col: Collective, side: str, got: int, want: int, count: int, n: int,
                rank: int) -> str:
    """Why a buffer of ``got`` elements is not the ``want`` that the layout of ``count``
    asks for on ``rank``."""
    part = col.layout.input if side == "input" else col.layout.output
    if part is Part.SAME:  # an output of its own, out of place
        return (f"{col.value} output has {got} elements; its input has {want}: an output of "
                "its own holds as many")
    if part is Part.COLUMN:
        return (f"{col.value} {side} has {got} elements: an input of {count} cut in {n} blocks "
                f"(np.array_split) brings rank {rank} {n} x {want // n} = {want} (give "
                "output_split_sizes and input_split_sizes for other blocks)")
    if part is Part.WHOLE:  # the root's list (gather_list, scatter_list)
        return (f"{col.value}_list holds {got} elements: expected {n} tensors of {want // n} "
                "elements (one per rank, each the size of this rank's tensor)")
    whole = "output" if side == "input" else "input"
    return (f"{col.value} {side} has {got} elements; rank {rank}'s block of the {count}-element "
            f"{whole} over {n} ranks has {want} (np.array_split blocks)")


def _all_to_all_splits(x: Any, y: Any, n: int, rank: int, splits: RankSplits) -> Splits:
    """An all-to-all's Splits as this rank knows them (its row and column), checked."""
    count, got = buffers.numel(x), buffers.numel(y)
    sent, received = splits
    for what, sizes, total, side in (("input", sent, count, "sends"),
                                     ("output", received, got, "receives")):
        if len(sizes) != n or any(v < 0 for v in sizes):
            raise RingtreeRuntimeError(
                f"{what}_split_sizes {list(sizes)} must hold {n} sizes >= 0 (what this rank "
                f"{side}, per rank)"
            )
        if sum(sizes) != total:
            raise RingtreeRuntimeError(
                f"{what}_split_sizes add up to {sum(sizes)} elements; the {what} holds {total}"
            )
    return Splits.seen_by(rank, sent, received)
