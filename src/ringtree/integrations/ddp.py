"""ringtree's all-reduce inside PyTorch's DistributedDataParallel, as a communication hook.

>>> hook = comm_hook("auto")                        # doctest: +SKIP
>>> ddp_model.register_comm_hook(None, hook)        # state: a process group, None = default
>>> ...train...; hook.records[0]                    # one BucketRecord per bucket and step

DDP hands a hook each gradient bucket when its gradients are ready (``bucket.buffer()``: the
bucket's gradients, flattened). Contract, per bucket, like torch's own ``allreduce_hook``:
rank r holds the bucket x_r before; afterwards every rank holds the mean
(x_0 + ... + x_{N-1}) / N, identical on all ranks. Example, N=2: [2, 4] and [6, 8] -> both
[4, 6]. Each x_r is divided by N first, as torch's hook does (headroom for fp16), so on two
ranks the result is bitwise equal to torch's. Cost: the chosen algorithm's (ring:
2(N-1) steps, 2(N-1)/N x S bytes sent per rank for an S-byte bucket; alpha-beta time
2(N-1) alpha + 2(N-1)/N x S / bandwidth).

Each call appends a :class:`BucketRecord`: bytes, the algorithm that ran, the measured time,
the time the cost model predicts on ``link`` (default: the ``loopback`` preset), the bytes
the transport counted. :func:`recording` wraps any other hook (torch's own) to record the same
figures, so the two can be compared step by step.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from ringtree.algorithms import BuildSpec, algorithms_for
from ringtree.collectives import Collective, ReduceOp
from ringtree.cost.model import Link
from ringtree.cost.models import predict
from ringtree.errors import RingtreeError
from ringtree.trace.events import Recorder, TraceEvent

AUTO = "auto"
Hook = Callable[[Any, dist.GradBucket], torch.futures.Future]


@dataclass(frozen=True)
class BucketRecord:
    """One bucket's all-reduce on one rank.

    step: training step from 1 (a step ends with the bucket DDP marks last). index: DDP's
    bucket index. bytes: the bucket's size S. itemsize: bytes per gradient element.
    algorithm, n_chunks: what ran (n_chunks None: the algorithm's default). measured_s: from
    the hook's call to the averaged result being ready. predicted_s: the cost model's time for
    this algorithm, N and S on ``link``.
    bytes_sent / bytes_received: what the transport counted (None where the engine does not
    count: torch's gloo). t_start_s / t_end_s: ``time.perf_counter`` (shared by local ranks).
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


def _group_or_error(state: Any) -> Any:
    """The process group a hook runs on: ``state`` if it is one, else the default group;
    RingtreeError when torch.distributed has no initialised process group."""
    if not (dist.is_available() and dist.is_initialized()):
        raise RingtreeError(
            "the DDP hook needs an initialised process group: call "
            "torch.distributed.init_process_group first (torchrun sets up the environment)"
        )
    return state if isinstance(state, dist.ProcessGroup) else dist.group.WORLD


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


def _check_algorithm(algorithm: str) -> str:
    name = algorithm.strip().lower()
    known = algorithms_for(Collective.ALL_REDUCE)
    if name != AUTO and name not in known:
        raise RingtreeError(
            f"unknown all-reduce algorithm {algorithm!r}: expected auto or one of "
            f"{', '.join(known)}"
        )
    return name


def _default_link(kind: str, n_ranks: int) -> Link:
    """The link the engine's "auto" prices for a transport ``kind`` (gloo: the ``loopback``
    preset, adjusted for more ranks than cores; see :func:`ringtree.runtime.auto.link_for`)."""
    from ringtree.runtime.auto import link_for

    return link_for(kind, n_ranks)


@dataclass(frozen=True)
class _Call:
    """One hook call: the bucket's buffer, the group, and the bucket's place in the step."""

    group: Any
    buf: torch.Tensor
    n: int
    rank: int
    count: int
    itemsize: int
    step: int
    index: int

    @property
    def nbytes(self) -> int:
        """The bucket's size in bytes."""
        return self.count * self.itemsize


@dataclass
class _Ledger:
    """What both hooks share: counting steps, pricing a bucket, keeping the records."""

    link: Link | None
    records: list[BucketRecord] = field(default_factory=list)
    step: int = 1

    def open(self, state: Any, bucket: dist.GradBucket) -> _Call:
        """This call's bucket, group and place in the step; a bucket DDP marks last ends the
        step."""
        group = _group_or_error(state)
        buf = bucket.buffer()
        call = _Call(group, buf, group.size(), group.rank(), buf.numel(), buf.element_size(),
                     self.step, bucket.index())  # fmt: skip
        if bucket.is_last():
            self.step += 1
        return call

    def add(self, call: _Call, start: float, end: float, **rest: Any) -> None:
        """Record ``call``, timed from ``start`` to ``end``; ``rest``: the hook's own fields."""
        self.records.append(BucketRecord(
            rank=call.rank, step=call.step, index=call.index, bytes=call.nbytes,
            itemsize=call.itemsize, measured_s=end - start, t_start_s=start, t_end_s=end, **rest,
        ))  # fmt: skip

    def price(self, algorithm: str, n_ranks: int, nbytes: int, itemsize: int, kind: str,
              n_chunks: int | None = None) -> tuple[float, str]:  # fmt: skip
        """``(predicted seconds, link name)`` of the all-reduce of ``nbytes`` over a ``kind``
        engine (gloo, nccl, mpi)."""
        link = self.link or _default_link(kind, n_ranks)
        if n_ranks == 1:
            return 0.0, link.name
        p = predict(Collective.ALL_REDUCE, algorithm, n_ranks, nbytes, link,
                    itemsize=itemsize, spec=BuildSpec(n_chunks=n_chunks))  # fmt: skip
        return p.time_s, link.name


class RingtreeHook:
    """The hook :func:`comm_hook` returns: ``hook(state, bucket)`` all-reduces the bucket with
    ringtree and returns a completed ``torch.futures.Future`` of the averaged buffer.

    The all-reduce runs before the hook returns, so the rest of the backward pass waits for
    it: unlike torch's asynchronous hook, communication does not overlap computation (on one
    bucket, DDP's default for a model this size, there is nothing left to overlap).

    algorithm: the name asked for (``auto``: the engine's choice per bucket size, the same on
    every rank). records: one BucketRecord per call. events: the engine's send/recv/reduce
    TraceEvents, when created with ``trace=True``.
    """

    def __init__(self, algorithm: str = AUTO, link: Link | None = None, trace: bool = False):
        self.__name__ = self.__qualname__ = "ringtree_allreduce_hook"  # DDP logs these
        self.algorithm = _check_algorithm(algorithm)
        self.trace = trace
        self.events: list[TraceEvent] = []
        self._ledger = _Ledger(link)

    @property
    def records(self) -> list[BucketRecord]:
        """One BucketRecord per bucket and step, in call order."""
        return self._ledger.records

    def __call__(
        self, state: Any, bucket: dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:  # DDP checks these two annotations
        """All-reduce ``bucket.buffer()`` in place to the ranks' mean (see the module doc)."""
        from ringtree.runtime import api

        c = self._ledger.open(state, bucket)
        transport = api.transport_for(c.group)
        algorithm, n_chunks = api.resolve(
            Collective.ALL_REDUCE, self.algorithm, c.n, c.count, c.itemsize,
            algo_env=api.settings(transport).algo, kind=transport.kind,
        )  # fmt: skip
        recorder = Recorder(c.rank) if self.trace else None
        sent0, received0, _ = transport.counters()
        start = time.perf_counter()
        c.buf.div_(c.n)
        api.call(Collective.ALL_REDUCE, c.buf, None, op=ReduceOp.SUM, root=0,
                 algorithm=algorithm, group=c.group, async_op=False, timeout=None, check=None,
                 n_chunks=n_chunks, ranks_per_node=None, slice_bytes=None,
                 recorder=recorder)  # fmt: skip
        end = time.perf_counter()
        sent1, received1, _ = transport.counters()
        if recorder is not None:
            self.events.extend(recorder.events)
        predicted_s, link = self._ledger.price(algorithm, c.n, c.nbytes, c.itemsize,
                                               transport.kind, n_chunks)  # fmt: skip
        self._ledger.add(c, start, end, algorithm=algorithm, n_chunks=n_chunks, link=link,
                         predicted_s=predicted_s, bytes_sent=sent1 - sent0,
                         bytes_received=received1 - received0)  # fmt: skip
        fut: torch.futures.Future = torch.futures.Future()
        fut.set_result(c.buf)
        return fut


def comm_hook(
    algorithm: str = AUTO, *, link: Link | None = None, trace: bool = False
) -> RingtreeHook:
    """A DDP communication hook that averages each gradient bucket with ringtree's
    ``algorithm`` (``auto`` or an all-reduce algorithm name; RingtreeError otherwise).

    Pass it to ``ddp_model.register_comm_hook(state, hook)`` with ``state`` a process group
    or None (the default group), or use :func:`register_comm_hook`, which checks the model
    first. Predictions use ``link`` (default: the ``loopback`` preset, adjusted for more
    ranks than cores). ``trace=True`` keeps
    the engine's per-transfer events in ``hook.events``.
    """
    return RingtreeHook(algorithm, link, trace)


def register_comm_hook(
    model: torch.nn.parallel.DistributedDataParallel,
    algorithm: str = AUTO,
    state: Any = None,
    **options: Any,
) -> RingtreeHook:
    """Check ``model`` (a process group exists; every gradient on one device), register
    :func:`comm_hook` on it and return the hook; RingtreeError names what is wrong."""
    _group_or_error(state)
    check_one_device(getattr(model, "module", model))
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise RingtreeError(
            f"register_comm_hook needs a DistributedDataParallel model, got "
            f"{type(model).__name__}: wrap it in torch.nn.parallel.DistributedDataParallel"
        )
    hook = comm_hook(algorithm, **options)
    model.register_comm_hook(state, hook)
    return hook


class RecordingHook:
    """Wraps another DDP hook (torch's ``allreduce_hook`` by default) and records, per bucket,
    the bytes, the time until its future completes, and the cost model's prediction for
    ``algorithm``: what the wrapped hook runs, ``ring`` for gloo's allreduce (gloo's
    ``allreduce.cc`` runs its ring unless asked for bcube)."""

    def __init__(self, hook: Hook | None = None, algorithm: str = "ring",
                 label: str = "gloo", link: Link | None = None) -> None:  # fmt: skip
        if hook is None:
            from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

            hook = allreduce_hook
        self.__name__ = self.__qualname__ = f"recording_{getattr(hook, '__name__', 'hook')}"
        self.hook = hook
        self.algorithm = _check_algorithm(algorithm)
        self.label = label
        self._ledger = _Ledger(link)

    @property
    def records(self) -> list[BucketRecord]:
        """One BucketRecord per bucket and step, in completion order."""
        return self._ledger.records

    def __call__(
        self, state: Any, bucket: dist.GradBucket
    ) -> torch.futures.Future[torch.Tensor]:  # DDP checks these two annotations
        """Run the wrapped hook; record when its future completes."""
        c = self._ledger.open(state, bucket)
        predicted_s, link = self._ledger.price(self.algorithm, c.n, c.nbytes, c.itemsize,
                                               dist.get_backend(c.group))  # fmt: skip
        start = time.perf_counter()

        def done(fut: torch.futures.Future) -> torch.Tensor:
            self._ledger.add(c, start, time.perf_counter(), algorithm=self.label, n_chunks=None,
                             link=link, predicted_s=predicted_s, bytes_sent=None,
                             bytes_received=None)  # fmt: skip
            return fut.value()

        return self.hook(state, bucket).then(done)


def recording(hook: Hook | None = None, **options: Any) -> RecordingHook:
    """``hook`` (default: torch's ``allreduce_hook``, the same as DDP's built-in
    communication) with per-bucket records; see :class:`RecordingHook`."""
    return RecordingHook(hook, **options)
