"""ringtree's collectives in torch.distributed's shape, run by the executor.

Every function works in place like torch's, on torch tensors (CPU over gloo or MPI, CUDA over
NCCL) and numpy arrays, inside any program started by ``torchrun`` (the default process group)
or ``mpirun`` (COMM_WORLD), or on an explicit ``group``: a torch ProcessGroup (any subgroup,
``new_group`` or split), an mpi4py communicator (``Split`` included), or a ringtree Transport.
Ranks are torch's: ``src``/``dst`` are global ranks (COMM_WORLD ranks under MPI),
``group_src``/``group_dst`` ranks within the group; on a rank that is not a member of
``group`` a call warns and returns None, as torch's do.

Beyond torch's arguments every function takes the keyword options of
:mod:`ringtree.runtime.options` (``algorithm="auto"``, ``timeout``, ``check``, ``n_chunks``,
``ranks_per_node``, ``slice_bytes``, ``recorder``). ``async_op=True`` returns a :class:`Work`
(``wait()``, ``is_completed()``, ``get_future()``); calls on one group run in the order they
were made. A dead or silent peer raises PeerError naming it and the step within ``timeout``
(the first call on a group included); ranks that call differently raise MismatchError naming
the odd ranks (checked on the first call of each call shape by default).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Unpack

from ringtree.collectives import Collective, ReduceOp
from ringtree.runtime import buffers, calls
from ringtree.runtime.groups import group_for, not_a_member_warning
from ringtree.runtime.options import CallOptions, Options
from ringtree.runtime.transport import Transport


class Work:
    """The handle of an ``async_op=True`` call: ``wait()`` blocks until done and re-raises
    the call's error; ``is_completed()`` does not block; ``get_future()`` is a
    ``torch.futures.Future`` of the output tensors, as torch's Work gives."""

    def __init__(self, future: Future, outputs: list[Any]) -> None:
        self._future = future
        self._outputs = outputs

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

    def get_future(self) -> Any:
        """A ``torch.futures.Future`` completed with the list of output buffers when the
        collective is done (or with its error): what a DDP communication hook returns."""
        import torch

        fut: torch.futures.Future = torch.futures.Future()

        def done(f: Future) -> None:
            error = f.exception()
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(self._outputs)

        self._future.add_done_callback(done)
        return fut


def transport_for(group: Any = None) -> Transport:
    """The Transport ringtree uses for ``group`` (see :mod:`ringtree.runtime.groups`)."""
    g = group_for(group)
    if g is None:
        from ringtree.errors import RingtreeError

        raise RingtreeError("this rank is not a member of the group: it has no transport")
    return g.transport


def _call(
    col: Collective, inbuf: Any, outbuf: Any, op: Any, group: Any, async_op: bool,
    options: CallOptions, roots: tuple[int | None, int | None, str] | None = None,
    outputs: list[Any] | None = None, after: Any = None,
) -> Work | None:  # fmt: skip
    opts = Options.make(options)
    g = group_for(group, opts.timeout_s)
    if g is None:
        not_a_member_warning(col.value)
        return None
    root = g.root(*roots) if roots is not None else 0
    fut = calls.call(g, col, inbuf, outbuf, op, root, opts, async_op, after)
    if fut is None:
        return None
    return Work(fut, outputs if outputs is not None else [inbuf if outbuf is None else outbuf])


def all_reduce(
    tensor: Any, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False,
    **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """All-reduce ``tensor`` in place: afterwards every rank holds op(x_0, ..., x_{N-1}).

    Example, N=2, SUM: rank 0 [1, 2], rank 1 [10, 20] -> both [11, 22]. Cost with the ring:
    2(N-1) steps, 2(N-1)/N * S bytes sent per rank.
    """
    return _call(Collective.ALL_REDUCE, tensor, None, op, group, async_op, options)


def reduce_scatter(
    output: Any, input: Any, op: Any = ReduceOp.SUM, group: Any = None,  # noqa: A002
    async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """Reduce ``input`` (S elements, every rank) and leave block r of the result in rank r's
    ``output`` (blocks as np.array_split; S/N each when N divides S). ``input`` is untouched.

    Example, N=2, SUM: [1, 2] and [10, 20] -> rank 0 [11], rank 1 [22]. Ring: N-1 steps,
    (N-1)/N * S bytes sent per rank -- half of an all-reduce. ``input`` may also be a list of
    N tensors, block r being element r (torch's ``reduce_scatter``; costs one copy).
    """
    if isinstance(input, list | tuple):
        g = group_for(group, Options.make(options).timeout_s)
        if g is None:
            not_a_member_warning("reduce-scatter")
            return None
        input = buffers.concat(input, g.size, "reduce-scatter input")  # noqa: A001
    return _call(Collective.REDUCE_SCATTER, input, output, op, group, async_op, options)


def all_gather(
    output: Any, input: Any, group: Any = None, async_op: bool = False,  # noqa: A002
    **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """Concatenate every rank's ``input`` (block r of ``output``) into every ``output``, like
    ``all_gather_into_tensor``. Example, N=2: [1] and [2] -> both [1, 2]. Ring: N-1 steps,
    (N-1)/N * S bytes sent per rank. ``output`` may also be a list of N tensors that receive
    the blocks (torch's ``all_gather``; costs one copy)."""
    if not isinstance(output, list | tuple):
        return _call(Collective.ALL_GATHER, input, output, None, group, async_op, options)
    g = group_for(group, Options.make(options).timeout_s)
    if g is None:
        not_a_member_warning("all-gather")
        return None
    parts = list(output)
    whole = buffers.concat(parts, g.size, "all-gather output", fill=False)
    return _call(Collective.ALL_GATHER, input, whole, None, group, async_op, options,
                 outputs=parts, after=lambda: buffers.split_into(whole, parts))  # fmt: skip


def broadcast(
    tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
    group_src: int | None = None, **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """Copy the root's ``tensor`` into every rank's ``tensor``; the root is ``src`` (a global
    rank) or ``group_src`` (a rank of the group), as in torch.distributed. Chain: N-1 steps
    pipelined over chunks; S bytes sent by every rank but one."""
    return _call(Collective.BROADCAST, tensor, None, None, group, async_op, options,
                 roots=(src, group_src, "src"))  # fmt: skip


def reduce(
    tensor: Any, dst: int | None = None, op: Any = ReduceOp.SUM, group: Any = None,
    async_op: bool = False, group_dst: int | None = None, **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """Reduce every rank's ``tensor`` into the root's ``tensor``; the root is ``dst`` (a
    global rank) or ``group_dst`` (a rank of the group). The other ranks' tensors are left
    unchanged. Chain: S bytes sent by every rank but the root."""
    return _call(Collective.REDUCE, tensor, None, op, group, async_op, options,
                 roots=(dst, group_dst, "dst"))  # fmt: skip


def collective(
    col: Collective | str, input: Any, output: Any = None, op: Any = ReduceOp.SUM,  # noqa: A002
    root: int = 0, group: Any = None, async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:  # fmt: skip
    """Any of the collectives by name, for drivers that loop over them (the bench, tests):
    ``input``/``output`` as the named function takes them (``output`` None for the in-place
    ones), ``root`` a global rank (broadcast's ``src``, reduce's ``dst``); ``op`` is ignored
    where the collective does not reduce."""
    c = Collective.parse(col)
    if c is Collective.ALL_REDUCE:
        return all_reduce(input, op, group, async_op, **options)
    if c is Collective.REDUCE_SCATTER:
        return reduce_scatter(output, input, op, group, async_op, **options)
    if c is Collective.ALL_GATHER:
        return all_gather(output, input, group, async_op, **options)
    if c is Collective.BROADCAST:
        return broadcast(input, root, group, async_op, **options)
    return reduce(input, root, op, group, async_op, **options)
