"""ringtree's all-reduce inside PyTorch's DistributedDataParallel, as torch writes its hooks.

>>> state = HookState(algorithm="auto")                      # doctest: +SKIP
>>> ddp_model.register_comm_hook(state, allreduce_hook)      # doctest: +SKIP

:func:`allreduce_hook` is a plain function ``(state, bucket) -> Future``, like torch's own
``default_hooks.allreduce_hook``: DDP hands it each gradient bucket as soon as backward has
produced it, and it starts ringtree's all-reduce asynchronously (``async_op=True``) and
returns the call's future, so the bucket travels while backward computes the next one.
Contract, per bucket: rank r holds x_r before; once the future completes every rank holds
the mean (x_0 + ... + x_{N-1}) / N, identical on all ranks (each x_r is divided by N first,
as torch's hook does, for fp16 headroom; on two ranks the result is bitwise torch's). Cost:
the chosen algorithm's (ring: 2(N-1) steps, 2(N-1)/N x S bytes sent per rank for an S-byte
bucket). Settings live in a :class:`HookState`.

:func:`recording` wraps any hook (torch's own by default) and keeps a :class:`BucketRecord`
per bucket: bytes, what ran, the time from the hook's call to its future's completion, the
cost model's prediction and the bytes the transport counted. :func:`comm_hook` is ringtree's
hook wrapped that way.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from ringtree.algorithms import BuildSpec, algorithms_for
from ringtree.collectives import Collective
from ringtree.cost.models import predict
from ringtree.cost.terms import Link
from ringtree.errors import RingtreeError
from ringtree.events import CallRecord, Recorder, TraceEvent

AUTO = "auto"
Hook = Callable[[Any, dist.GradBucket], torch.futures.Future]


@dataclass
class HookState:
    """Settings of :func:`allreduce_hook`.

    group: the process group (None: the default group). algorithm: ``auto`` or an all-reduce
    algorithm. recorder: receives a CallRecord per bucket (and the engine's TraceEvents when
    its ``messages`` is True); None: nothing is recorded. timeout_s: per bucket (None:
    RINGTREE_TIMEOUT).
    """

    group: Any = None
    algorithm: str = AUTO
    recorder: Recorder | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        self.algorithm = _check_algorithm(self.algorithm)


def allreduce_hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average ``bucket.buffer()`` over the ranks with ringtree's all-reduce, asynchronously
    (see the module doc). ``state``: a HookState, or a process group / None as for torch's
    own hooks."""
    st = state if isinstance(state, HookState) else HookState(group=state)
    group = _group_or_error(st.group)
    buf = bucket.buffer()
    buf.div_(group.size())
    from ringtree.runtime.api import all_reduce

    work = all_reduce(buf, group=group, async_op=True, algorithm=st.algorithm,
                      recorder=st.recorder, timeout=st.timeout_s)
    assert work is not None  # a member of the group, asynchronous
    return work.get_future().then(lambda fut: fut.value()[0])


@dataclass(frozen=True)
class BucketRecord:
    """One bucket's all-reduce on one rank.

    step: training step from 1 (a step ends with the bucket DDP marks last). index: DDP's
    bucket index. bytes: the bucket's size S. itemsize: bytes per gradient element.
    algorithm, n_chunks: what ran (n_chunks None: the algorithm's default). measured_s: from
    the hook's call to its future's completion. predicted_s: the cost model's time for this
    algorithm, N and S on ``link``. bytes_sent / bytes_received: what the transport counted
    (None where the engine does not count: torch's gloo). t_start_s / t_end_s:
    ``time.perf_counter`` (shared by local ranks).
    """

    rank: int
    step: int
    index: int
    bytes: int
    itemsize: int
    algorithm: str
    n_chunks: int | None
    link: str
    measured_s: float
    predicted_s: float
    bytes_sent: int | None
    bytes_received: int | None
    t_start_s: float
    t_end_s: float

    def record(self) -> dict[str, Any]:
        """Plain data (``ringtree lab ddp --json``)."""
        return asdict(self)


class RecordingHook:
    """``hook`` with a BucketRecord per bucket (:func:`recording`). With ``state`` (a
    HookState for ringtree's hook), the hook gets that state, its group replaced by the
    process group DDP passes, and what ran is read from its recorder's CallRecords."""

    def __init__(
        self, hook: Hook, state: HookState | None = None, algorithm: str = "ring",
        label: str = "gloo", link: Link | None = None, trace: bool = False,
    ) -> None:
        self.__name__ = self.__qualname__ = f"recording_{getattr(hook, '__name__', 'hook')}"
        self.hook, self.state, self.label, self.link, self.trace = hook, state, label, link, trace
        self.algorithm = _check_algorithm(algorithm)
        self.records: list[BucketRecord] = []
        self._step, self._calls = 1, 0

    @property
    def events(self) -> list[TraceEvent]:
        """The engine's TraceEvents (ringtree's hook with ``trace``), else none."""
        rec = self.state.recorder if self.state is not None else None
        return rec.events if rec is not None else []

    def __call__(
        self, state: Any, bucket: dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:  # DDP checks these two annotations
        """Run the wrapped hook; record the bucket when its future completes."""
        group = _group_or_error(state.group if isinstance(state, HookState) else state)
        buf = bucket.buffer()
        step, index, rank, n = self._step, bucket.index(), group.rank(), group.size()
        if bucket.is_last():
            self._step += 1
        passed = state
        if self.state is not None:
            if self.state.recorder is None:
                self.state.recorder = Recorder(rank, messages=self.trace)
            passed = replace(self.state, group=group)
        call_no = self._calls
        self._calls += 1
        start = time.perf_counter()

        def done(fut: torch.futures.Future) -> torch.Tensor:
            end = time.perf_counter()
            ran: CallRecord | None = None
            if self.state is not None and self.state.recorder is not None:
                ran = self.state.recorder.calls[call_no]
            algorithm = ran.algorithm if ran else self.algorithm
            chunks = ran.n_chunks if ran else None
            kind = str(dist.get_backend(group))
            predicted_s, link = _price(self.link, algorithm, n, buf.numel() * buf.element_size(),
                                       buf.element_size(), kind, chunks)
            self.records.append(BucketRecord(
                rank=rank, step=step, index=index, bytes=buf.numel() * buf.element_size(),
                itemsize=buf.element_size(), algorithm=algorithm if ran else self.label,
                n_chunks=chunks, link=link, measured_s=end - start, predicted_s=predicted_s,
                bytes_sent=ran.bytes_sent if ran else None,
                bytes_received=ran.bytes_received if ran else None, t_start_s=start, t_end_s=end,
            ))
            return fut.value()

        return self.hook(passed, bucket).then(done)


def recording(hook: Hook | None = None, **options: Any) -> RecordingHook:
    """``hook`` (default: torch's ``allreduce_hook``, the same as DDP's built-in
    communication) with per-bucket records; ``algorithm`` (default ``ring``, what gloo's
    allreduce runs) prices torch's hook, ``label`` names it in the records, ``link`` is where
    predictions are priced (default: the link the engine assumes for the group's backend)."""
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        hook = allreduce_hook
    return RecordingHook(hook, **options)


def comm_hook(
    algorithm: str = AUTO, *, link: Link | None = None, trace: bool = False
) -> RecordingHook:
    """ringtree's :func:`allreduce_hook` with ``algorithm``, recorded (:func:`recording`):
    ``ddp_model.register_comm_hook(None, comm_hook())``; ``hook.records`` then holds a
    BucketRecord per bucket and step, ``hook.events`` the engine's TraceEvents with
    ``trace=True``. RingtreeError on an unknown algorithm."""
    return RecordingHook(allreduce_hook, HookState(algorithm=algorithm), link=link, trace=trace)


def register_comm_hook(
    model: torch.nn.parallel.DistributedDataParallel,
    algorithm: str = AUTO,
    state: Any = None,
    **options: Any,
) -> RecordingHook:
    """Check ``model`` (a process group exists; every gradient on one device), register
    :func:`comm_hook` on it and return the hook; RingtreeError names what is wrong. The
    hook averages over ``state`` (a process group), by default the model's own
    (``DistributedDataParallel(..., process_group=dp)``: over ``dp``)."""
    _group_or_error(state)
    check_one_device(getattr(model, "module", model))
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise RingtreeError(
            f"register_comm_hook needs a DistributedDataParallel model, got "
            f"{type(model).__name__}: wrap it in torch.nn.parallel.DistributedDataParallel"
        )
    if state is None:  # DDP hands the hook the state given here, not its own group
        state = model.process_group
    hook = comm_hook(algorithm, **options)
    model.register_comm_hook(state, hook)
    return hook


def check_one_device(model: torch.nn.Module) -> torch.device:
    """The device every trainable parameter (so every gradient) of ``model`` is on;
    RingtreeError naming the devices when they differ, or when there are none."""
    devices: dict[torch.device, str] = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            devices.setdefault(p.device, name)
    if not devices:
        raise RingtreeError("the model has no trainable parameters: nothing to all-reduce")
    if len(devices) > 1:
        where = ", ".join(f"{d} ({name!r})" for d, name in devices.items())
        raise RingtreeError(
            f"the model's gradients are on several devices: {where}; ringtree's hook "
            "all-reduces one buffer per bucket: move the model to one device"
        )
    return next(iter(devices))


def _group_or_error(group: Any) -> Any:
    """``group`` if it is a process group, else the default group; RingtreeError when
    torch.distributed has no initialised process group."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RingtreeError(
            "the DDP hook needs an initialised process group: call "
            "torch.distributed.init_process_group first (torchrun sets up the environment)"
        )
    return group if isinstance(group, dist.ProcessGroup) else dist.group.WORLD


def _check_algorithm(algorithm: str) -> str:
    name = algorithm.strip().lower()
    known = algorithms_for(Collective.ALL_REDUCE)
    if name != AUTO and name not in known:
        raise RingtreeError(
            f"unknown all-reduce algorithm {algorithm!r}: expected auto or one of "
            f"{', '.join(known)}"
        )
    return name


def _price(link: Link | None, algorithm: str, n: int, nbytes: int, itemsize: int, kind: str,
           n_chunks: int | None) -> tuple[float, str]:
    """``(predicted seconds, link name)`` of the all-reduce of ``nbytes`` over a ``kind``
    engine (default link: the one the engine's ``auto`` assumes)."""
    if link is None:
        from ringtree.runtime.auto import link_for

        link = link_for(kind)
    if n == 1 or algorithm not in algorithms_for(Collective.ALL_REDUCE):
        return 0.0, link.name
    p = predict(Collective.ALL_REDUCE, algorithm, n, nbytes, link, itemsize=itemsize,
                spec=BuildSpec(n_chunks=n_chunks))
    return p.time_s, link.name
