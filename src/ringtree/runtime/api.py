"""ringtree's collectives in torch.distributed's shape, run by the executor.

Every function works in place like torch's, on torch tensors (CPU over gloo or MPI, CUDA
over NCCL) and numpy arrays, inside any program started by ``torchrun`` (the default process
group) or ``mpirun`` (COMM_WORLD), or on an explicit ``group``: a torch ProcessGroup, an
mpi4py communicator, or a ringtree Transport. ``algorithm`` names a registered algorithm or
"auto". ``async_op=True`` returns a Work handle (``wait()``, ``is_completed()``); calls on
one group run in the order they were made. ``timeout`` (seconds, default 300 or
RINGTREE_TIMEOUT) bounds the whole call: a dead or silent peer raises PeerError naming it and
the step. ``check=True`` (or RINGTREE_CHECK=1) exchanges a fingerprint of the call first and
raises MismatchError naming the ranks that called differently.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from typing import Any

import numpy as np

from ringtree.algorithms import build
from ringtree.collectives import Collective, ReduceOp, block_bounds
from ringtree.errors import RingtreeError
from ringtree.runtime import auto, fingerprint
from ringtree.runtime.executor import Context, execute
from ringtree.runtime.kernels import NUMPY_VIEWABLE, check_dtype, dtype_name, kernels_for
from ringtree.runtime.program import DEFAULT_SLICE_BYTES, Program, compile_program
from ringtree.runtime.transport import Transport

DEFAULT_TIMEOUT_S = 300.0

_transports: dict[int, tuple[Any, Transport]] = {}
_lock = threading.Lock()


# -- groups ------------------------------------------------------------------------------
def transport_for(group: Any = None) -> Transport:
    """The Transport of ``group``: a ringtree Transport as is, a torch ProcessGroup, an
    mpi4py communicator, or None: torch's default group if torch.distributed is initialized,
    else MPI's COMM_WORLD when the process runs under an MPI launcher."""
    if isinstance(group, Transport):
        return group
    if group is None:
        group = _default_group()
    hit = _transports.get(id(group))
    if hit is not None and hit[0] is group:
        return hit[1]
    with _lock:
        if _is_mpi_comm(group):
            from ringtree.runtime.mpi import MpiTransport

            t: Transport = MpiTransport(group)
        else:
            from ringtree.runtime.torch_dist import TorchTransport

            t = TorchTransport(group)
        _transports[id(group)] = (group, t)
        return t


def _default_group() -> Any:
    dist = sys.modules.get("torch.distributed")  # not imported: cannot be initialized
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.group.WORLD
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None and _mpi_launched():
        from mpi4py import MPI as mpi
    if mpi is not None:
        return mpi.COMM_WORLD
    raise RingtreeError(
        "no process group: call torch.distributed.init_process_group (torchrun sets up the "
        "environment), run under mpirun, or pass group="
    )


def _mpi_launched() -> bool:
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def _is_mpi_comm(group: Any) -> bool:
    return type(group).__module__.startswith("mpi4py")


# -- buffers -----------------------------------------------------------------------------
def _flat(buf: Any, what: str, transport: Transport, writable: bool) -> Any:
    """A 1-D view of ``buf`` that the engine works on (never a copy): a numpy array as is, a
    CPU tensor of a dtype numpy has as a numpy view of its memory, any other tensor detached
    from autograd (torch's collectives write outside it too).

    Numpy views keep torch off the hot path: per call, a few numpy operations replace some
    twenty torch calls (slices, ``.numpy()``, ``.device``), each of which costs microseconds
    when torch's code has left the CPU caches -- as it has in a training step, between
    collectives. The transports take numpy views (gloo wraps them with ``torch.from_numpy``)."""
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            raise RingtreeError(f"{what} must be contiguous: got strides {buf.strides}")
        if writable and not buf.flags.writeable:
            raise RingtreeError(f"{what} is read-only: pass a writable array")
        if transport.kind == "nccl":
            raise RingtreeError(
                f"{what} is a numpy array: NCCL carries CUDA tensors (torch.from_numpy(a)"
                ".cuda()), or use a gloo group for host memory"
            )
        return buf if buf.ndim == 1 else buf.reshape(-1)
    if not hasattr(buf, "is_contiguous"):
        raise RingtreeError(
            f"{what} must be a torch tensor or a numpy array, got {type(buf).__name__}"
        )
    if not buf.is_contiguous():
        raise RingtreeError(f"{what} must be contiguous: call .contiguous() first")
    if transport.kind == "nccl" and buf.device.type != "cuda":
        raise RingtreeError(
            f"{what} is on {buf.device}: NCCL carries CUDA tensors (move it with .cuda(), "
            "or use a gloo group for CPU tensors)"
        )
    flat = buf.detach()  # same memory: a parameter that requires grad can be written
    if flat.is_cpu and dtype_name(flat) in NUMPY_VIEWABLE:
        view = flat.numpy()
        return view if view.ndim == 1 else view.reshape(-1)
    return flat if flat.dim() == 1 else flat.view(-1)


@dataclass(frozen=True)
class Settings:
    """Defaults from the environment, read once per group when ringtree first uses it (as
    NCCL reads NCCL_* at initialisation): RINGTREE_TIMEOUT (seconds, default 300),
    RINGTREE_CHECK (1/true: exchange fingerprints), RINGTREE_SLICE_BYTES (message size,
    default 4 MiB), RINGTREE_ALGO (what "auto" may pick, as NCCL_ALGO)."""

    timeout_s: float
    check: bool
    slice_bytes: int
    algo: str

    @classmethod
    def from_environment(cls) -> Settings:
        """The settings the environment asks for now."""
        env = os.environ
        return cls(
            timeout_s=float(env.get("RINGTREE_TIMEOUT", DEFAULT_TIMEOUT_S)),
            check=env.get("RINGTREE_CHECK", "").lower() in ("1", "true", "yes", "on"),
            slice_bytes=int(env.get("RINGTREE_SLICE_BYTES") or DEFAULT_SLICE_BYTES),
            algo=env.get("RINGTREE_ALGO", ""),
        )


def settings(transport: Transport) -> Settings:
    """The group's settings (read from the environment on first use, then kept)."""
    got = transport.__dict__.get("_ringtree_settings")
    if got is None:
        got = transport._ringtree_settings = Settings.from_environment()  # type: ignore[attr-defined]
    return got


def _timeout_s(timeout: float | timedelta | None, default: float) -> float:
    if timeout is None:
        return default
    t = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not t > 0:
        raise RingtreeError(f"timeout must be > 0 seconds, got {timeout!r}")
    return t


def _parse_op(op: Any) -> ReduceOp:
    if isinstance(op, ReduceOp | str):
        return ReduceOp.parse(op)
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    return ReduceOp.parse(name)


# -- schedules and programs ----------------------------------------------------------------
@lru_cache(maxsize=256)
def schedule(
    col: Collective, algorithm: str, n: int, root: int, n_chunks: int | None, rpn: int | None
) -> Any:
    """The (cached) Schedule a call runs; ``rpn``: ranks per node (hierarchical only)."""
    return build(col, algorithm, n, root=root, n_chunks=n_chunks, ranks_per_node=rpn)


@lru_cache(maxsize=1024)
def _program(
    col: Collective,
    algorithm: str,
    n: int,
    root: int,
    n_chunks: int | None,
    rpn: int | None,
    rank: int,
    count: int,
    itemsize: int,
    in_place: bool,
    slice_bytes: int,
    in_place_min_bytes: float | None = None,
) -> Program:
    s = schedule(col, algorithm, n, root, n_chunks, rpn)
    return compile_program(s, rank, count, itemsize, in_place=in_place, slice_bytes=slice_bytes,
                           in_place_min_bytes=in_place_min_bytes)  # fmt: skip


# -- async work ------------------------------------------------------------------------------
class Work:
    """The handle of an ``async_op=True`` call: ``wait()`` blocks until done and re-raises
    the call's error; ``is_completed()`` does not block."""

    def __init__(self, future: Future) -> None:
        self._future = future

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the collective finished (``timeout`` seconds at most); True when done."""
        self._future.result(timeout)
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (successfully or not)."""
        return self._future.done()

    def exception(self) -> BaseException | None:
        """The call's error once finished, else None."""
        return self._future.exception() if self._future.done() else None


def _runner(transport: Transport) -> ThreadPoolExecutor:
    r = getattr(transport, "_ringtree_runner", None)
    if r is None:
        r = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ringtree")
        transport._ringtree_runner = r  # type: ignore[attr-defined]
        transport._ringtree_pending = []  # type: ignore[attr-defined]
    return r


def _submit(transport: Transport, fn: Any, async_op: bool) -> Work | None:
    pending: list[Future] = getattr(transport, "_ringtree_pending", [])
    pending[:] = [f for f in pending if not f.done()]
    if not async_op and not pending:
        fn()
        return None
    fut = _runner(transport).submit(fn)
    transport._ringtree_pending.append(fut)  # type: ignore[attr-defined]
    if async_op:
        return Work(fut)
    fut.result()
    return None


# -- the one entry point behind the five collectives -------------------------------------
def resolve(
    col: Collective,
    algorithm: str,
    n: int,
    count: int,
    itemsize: int,
    root: int = 0,
    n_chunks: int | None = None,
    algo_env: str | None = None,
    kind: str = "gloo",
) -> tuple[str, int | None]:
    """``(algorithm, n_chunks)`` a call runs: "auto" resolved by :mod:`ringtree.runtime.auto`
    for a ``kind`` transport (every rank gets the same answer for the same call), names
    normalised. ``algo_env``: the RINGTREE_ALGO value to honour (None: the environment's)."""
    name = algorithm.strip().lower()
    if name == "auto":
        name, auto_chunks = auto.choose(col, n, count * itemsize, itemsize, root, algo_env,
                                        kind)  # fmt: skip
        n_chunks = n_chunks or auto_chunks
    return name, n_chunks


@dataclass(frozen=True)
class _Plan:
    """What a call needs beyond its buffers, kept per call shape (validated once)."""

    prog: Program
    rop: ReduceOp | None
    algorithm: str
    n_chunks: int | None
    count: int
    slice_bytes: int
    label: str


_plans: dict[tuple, _Plan] = {}
_MAX_PLANS = 4096


def call(
    col: Collective,
    inbuf: Any,
    outbuf: Any,
    *,
    op: Any,
    root: int,
    algorithm: str,
    group: Any,
    async_op: bool,
    timeout: Any,
    check: bool | None,
    n_chunks: int | None,
    ranks_per_node: int | None,
    slice_bytes: int | None,
    step_done_s: list[float] | None = None,
    after: Any = None,
    recorder: Any = None,
) -> Work | None:
    """The one entry point behind the five collectives (``outbuf`` None: in place);
    ``after()``, if given, runs once the collective is done (before an async Work completes).

    ``step_done_s``, when a list, receives the time (``time.perf_counter``) at which this
    rank finished each step of the schedule (for traces and ``ringtree demo``); ``recorder``,
    a :class:`ringtree.trace.events.Recorder`, receives a TraceEvent per send, receive and
    reduce of every message (see :mod:`ringtree.runtime.executor`). A call of a
    shape seen before (same sizes, dtypes, op, root, algorithm, group size and rank) skips
    validation and planning: ~10 us from the call to its first message.
    """
    transport = transport_for(group)
    n, rank = transport.size, transport.rank
    env = settings(transport)
    timeout_s = _timeout_s(timeout, env.timeout_s)
    checking = env.check if check is None else bool(check)
    plan = None
    try:
        x = _flat(inbuf, "input", transport, writable=outbuf is None)
        y = x if outbuf is None else _flat(outbuf, "output", transport, writable=True)
        sb = int(slice_bytes or env.slice_bytes)
        key = (col, n, rank, type(x), x.dtype, y.dtype, getattr(x, "device", None),
               getattr(y, "device", None), _numel(x), _numel(y), y is x, op, root, algorithm,
               n_chunks, ranks_per_node, sb, env.algo, transport.in_place_from())  # fmt: skip
        try:
            plan = _plans.get(key)
        except TypeError:  # an unhashable op object: plan every time
            key = None
        if plan is None:
            plan = _make_plan(col, x, y, op, root, algorithm, n, rank, n_chunks,
                              ranks_per_node, sb, env.algo, transport)  # fmt: skip
            if key is not None:
                if len(_plans) >= _MAX_PLANS:
                    _plans.clear()
                _plans[key] = plan
    except RingtreeError:
        if checking:  # let the other ranks fail now rather than time out
            rop = _parse_op(op) if col.reduces else None
            bad = fingerprint.CallSignature(
                col, 0, "", rop, str(algorithm), root, n_chunks, 0, False
            )
            with contextlib.suppress(fingerprint.MismatchError):
                fingerprint.exchange(transport, _like(transport), bad, timeout_s)
        raise
    if col is Collective.ALL_GATHER:
        b = block_bounds(plan.count, n)
        mine = y[b[rank] : b[rank + 1]]
        if not _same_memory(mine, x):
            kernels_for(y).copy(mine, x)
        x = y

    def run() -> None:
        if checking:
            sig = fingerprint.CallSignature(
                col, plan.count, dtype_name(x), plan.rop, plan.algorithm,
                root if col.has_root else None, plan.n_chunks, plan.slice_bytes,
            )  # fmt: skip
            fingerprint.exchange(transport, x, sig, timeout_s)
        ctx = Context(label=plan.label, timeout_s=timeout_s, step_done_s=step_done_s,
                      recorder=recorder)  # fmt: skip
        execute(plan.prog, transport, kernels_for(x), plan.rop or ReduceOp.SUM, x, y, n, ctx)
        if after is not None:
            after()

    stream = _caller_stream(x)
    if stream is not None:  # an async call runs on another thread: take the stream along
        run = _on_stream(stream, run)
    return _submit(transport, run, async_op)


def _make_plan(
    col: Collective,
    x: Any,
    y: Any,
    op: Any,
    root: int,
    algorithm: str,
    n: int,
    rank: int,
    n_chunks: int | None,
    ranks_per_node: int | None,
    slice_bytes: int,
    algo_env: str,
    transport: Transport,
) -> _Plan:
    """Validate the call, resolve the algorithm, compile the rank's program (for posting
    one by one, or a step at a time on a grouped transport)."""
    rop = _parse_op(op) if col.reduces else None
    count = _validate(col, x, y, rop, root, n, rank)
    itemsize = x.element_size() if hasattr(x, "element_size") else x.itemsize
    name, chunks = resolve(col, algorithm, n, count, itemsize, root, n_chunks, algo_env,
                           transport.kind)  # fmt: skip
    in_place = y is x or col is Collective.ALL_GATHER
    prog = _program(col, name, n, root, chunks, ranks_per_node, rank, count, itemsize,
                    in_place, slice_bytes, transport.in_place_from())  # fmt: skip
    return _Plan(prog, rop, name, chunks, count, slice_bytes, f"{col.value} ({name})")


def _caller_stream(x: Any) -> Any:
    """The caller's current CUDA stream for a CUDA tensor, else None: an async call runs on
    another thread, whose current device and stream are not the caller's."""
    if isinstance(x, np.ndarray) or x.device.type != "cuda":
        return None
    import torch

    return torch.cuda.current_stream(x.device)


def _on_stream(stream: Any, fn: Any) -> Any:
    """``fn`` run on ``stream`` (and its device)."""
    import torch

    def run() -> None:
        with torch.cuda.stream(stream):
            fn()

    return run


def _like(transport: Transport) -> Any:
    """An empty buffer of the kind ``transport`` carries (host memory as numpy)."""
    if transport.kind == "nccl":
        import torch

        return torch.empty(0, device="cuda")
    return np.empty(0)


def _span(a: Any) -> tuple[int, int]:
    start = a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else a.data_ptr()
    return start, start + int(a.nbytes)


def _concat(parts: list[Any], n: int, what: str, fill: bool = True) -> Any:
    """One flat buffer for a list of N per-rank blocks (their contents copied if ``fill``);
    RingtreeError unless there are N blocks of the np.array_split sizes of their total."""
    if len(parts) != n:
        raise RingtreeError(
            f"{what} is a list of {len(parts)} tensors: expected one per rank ({n})"
        )
    sizes = [_numel(p) for p in parts]
    b = block_bounds(sum(sizes), n)
    want = [b[r + 1] - b[r] for r in range(n)]
    if sizes != want:
        raise RingtreeError(f"{what} blocks have {sizes} elements: expected {want}")
    if isinstance(parts[0], np.ndarray):
        if fill:
            return np.concatenate([np.asarray(p).reshape(-1) for p in parts])
        return np.empty(sum(sizes), dtype=parts[0].dtype)
    import torch

    if fill:
        return torch.cat([p.reshape(-1) for p in parts])
    return parts[0].new_empty(sum(sizes))


def _split_into(flat: Any, parts: list[Any]) -> None:
    """Copy consecutive slices of ``flat`` into ``parts`` (each keeps its shape)."""
    start = 0
    for p in parts:
        k = _numel(p)
        src = flat[start : start + k].reshape(p.shape)
        if isinstance(p, np.ndarray):
            np.copyto(p, src)
        else:
            p.copy_(src)
        start += k


def _same_memory(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return bool(a.__array_interface__["data"][0] == b.__array_interface__["data"][0])
    return bool(a.data_ptr() == b.data_ptr())


def _numel(x: Any) -> int:
    return int(x.numel()) if hasattr(x, "numel") else int(x.size)


def _validate(
    col: Collective, x: Any, y: Any, op: ReduceOp | None, root: int, n: int, rank: int
) -> int:
    """Check the call's buffers; return the element count of the full layout."""
    check_dtype(dtype_name(x), op)
    if y is not x and dtype_name(y) != dtype_name(x):
        raise RingtreeError(
            f"output dtype {dtype_name(y)} differs from input dtype {dtype_name(x)}: "
            "they must match"
        )
    if y is not x and getattr(x, "device", None) != getattr(y, "device", None):
        raise RingtreeError(f"output is on {y.device}, input on {x.device}: they must match")
    if y is not x and col is Collective.REDUCE_SCATTER:
        (a0, a1), (b0, b1) = _span(x), _span(y)
        if a0 < b1 and b0 < a1:
            raise RingtreeError("reduce-scatter output overlaps its input: pass separate buffers")
    if col.has_root and not 0 <= root < n:
        raise RingtreeError(f"root rank {root} is not a rank of this group (0..{n - 1})")
    if col is Collective.REDUCE_SCATTER:
        count = _numel(x)
        b = block_bounds(count, n)
        want = b[rank + 1] - b[rank]
        if _numel(y) != want:
            raise RingtreeError(
                f"reduce-scatter output has {_numel(y)} elements; rank {rank}'s block of "
                f"{count} over {n} ranks has {want} (np.array_split blocks)"
            )
        return count
    if col is Collective.ALL_GATHER:
        count = _numel(y)
        b = block_bounds(count, n)
        want = b[rank + 1] - b[rank]
        if _numel(x) != want:
            raise RingtreeError(
                f"all-gather input has {_numel(x)} elements; rank {rank}'s block of the "
                f"{count}-element output over {n} ranks has {want} (np.array_split blocks)"
            )
        return count
    return _numel(x)


# -- public functions ----------------------------------------------------------------------
def all_reduce(
    tensor: Any,
    op: Any = ReduceOp.SUM,
    algorithm: str = "auto",
    group: Any = None,
    async_op: bool = False,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    *,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    slice_bytes: int | None = None,
) -> Work | None:
    """All-reduce ``tensor`` in place: afterwards every rank holds op(x_0, ..., x_{N-1}).

    Example, N=2, SUM: rank 0 [1, 2], rank 1 [10, 20] -> both [11, 22]. Cost with the ring:
    2(N-1) steps, 2(N-1)/N * S bytes sent per rank. ``n_chunks``/``slice_bytes`` tune the
    schedule's pipeline depth and the executor's message size (same on every rank).
    """
    return call(
        Collective.ALL_REDUCE, tensor, None, op=op, root=0, algorithm=algorithm, group=group,
        async_op=async_op, timeout=timeout, check=check, n_chunks=n_chunks,
        ranks_per_node=ranks_per_node, slice_bytes=slice_bytes,
    )  # fmt: skip


def reduce_scatter(
    output: Any,
    input: Any,  # noqa: A002 - torch.distributed's name
    op: Any = ReduceOp.SUM,
    algorithm: str = "auto",
    group: Any = None,
    async_op: bool = False,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    *,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    slice_bytes: int | None = None,
) -> Work | None:
    """Reduce ``input`` (S elements, every rank) and leave block r of the result in rank r's
    ``output`` (blocks as np.array_split; S/N each when N divides S). ``input`` is untouched.

    Example, N=2, SUM: [1, 2] and [10, 20] -> rank 0 [11], rank 1 [22]. Ring: N-1 steps,
    (N-1)/N * S bytes sent per rank -- half of an all-reduce. ``input`` may also be a list of
    N tensors, block r being element r (torch's ``reduce_scatter``; costs one copy).
    """
    if isinstance(input, list | tuple):
        input = _concat(input, transport_for(group).size, "reduce-scatter input")  # noqa: A001
    return call(
        Collective.REDUCE_SCATTER, input, output, op=op, root=0, algorithm=algorithm,
        group=group, async_op=async_op, timeout=timeout, check=check, n_chunks=n_chunks,
        ranks_per_node=ranks_per_node, slice_bytes=slice_bytes,
    )  # fmt: skip


def all_gather(
    output: Any,
    input: Any,  # noqa: A002 - torch.distributed's name
    algorithm: str = "auto",
    group: Any = None,
    async_op: bool = False,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    *,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    slice_bytes: int | None = None,
) -> Work | None:
    """Concatenate every rank's ``input`` (block r of ``output``) into every ``output``, like
    ``all_gather_into_tensor``. Example, N=2: [1] and [2] -> both [1, 2]. Ring: N-1 steps,
    (N-1)/N * S bytes sent per rank. ``output`` may also be a list of N tensors that receive
    the blocks (torch's ``all_gather``; costs one copy)."""
    after = None
    if isinstance(output, list | tuple):
        parts = list(output)
        output = _concat(parts, transport_for(group).size, "all-gather output", fill=False)

        def after() -> None:
            _split_into(output, parts)

    return call(
        Collective.ALL_GATHER, input, output, op=None, root=0, algorithm=algorithm,
        group=group, async_op=async_op, timeout=timeout, check=check, n_chunks=n_chunks,
        ranks_per_node=ranks_per_node, slice_bytes=slice_bytes, after=after,
    )  # fmt: skip


def broadcast(
    tensor: Any,
    src: int,
    algorithm: str = "auto",
    group: Any = None,
    async_op: bool = False,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    *,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    slice_bytes: int | None = None,
) -> Work | None:
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor`` (``src`` is a rank of
    the group). Chain: N-1 steps pipelined over slices; S bytes sent by every rank but one."""
    return call(
        Collective.BROADCAST, tensor, None, op=None, root=src, algorithm=algorithm,
        group=group, async_op=async_op, timeout=timeout, check=check, n_chunks=n_chunks,
        ranks_per_node=ranks_per_node, slice_bytes=slice_bytes,
    )  # fmt: skip


def reduce(
    tensor: Any,
    dst: int,
    op: Any = ReduceOp.SUM,
    algorithm: str = "auto",
    group: Any = None,
    async_op: bool = False,
    timeout: float | timedelta | None = None,
    check: bool | None = None,
    *,
    n_chunks: int | None = None,
    ranks_per_node: int | None = None,
    slice_bytes: int | None = None,
) -> Work | None:
    """Reduce every rank's ``tensor`` into rank ``dst``'s ``tensor``; the other ranks'
    tensors are left unchanged. Chain: S bytes sent by every rank but the root."""
    return call(
        Collective.REDUCE, tensor, None, op=op, root=dst, algorithm=algorithm, group=group,
        async_op=async_op, timeout=timeout, check=check, n_chunks=n_chunks,
        ranks_per_node=ranks_per_node, slice_bytes=slice_bytes,
    )  # fmt: skip
