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

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Unpack

import numpy as np

from ringtree.collectives import Collective, ReduceOp, block_sizes
from ringtree.errors import RingtreeError, RingtreeRuntimeError, RingtreeTypeError
from ringtree.runtime import buffers, calls
from ringtree.runtime.groups import group_for
from ringtree.runtime.options import CallOptions
from ringtree.runtime.transport import Transport
from ringtree.runtime.work import Work, issue, member, refusing


def transport_for(group: Any = None) -> Transport:
    """The Transport ringtree uses for ``group`` (see :mod:`ringtree.runtime.groups`)."""
    g = group_for(group)
    if g is None:
        raise RingtreeError("this rank is not a member of the group: it has no transport")
    return g.transport


def all_reduce(
    tensor: Any, op: Any = ReduceOp.SUM, group: Any = None, async_op: bool = False,
    **options: Unpack[CallOptions],
) -> Work | None:
    """All-reduce ``tensor`` in place: afterwards every rank holds op(x_0, ..., x_{N-1}).

    Example, N=2, SUM: rank 0 [1, 2], rank 1 [10, 20] -> both [11, 22]. Cost with the ring:
    2(N-1) steps, 2(N-1)/N * S bytes sent per rank.
    """
    return issue(Collective.ALL_REDUCE, tensor, None, op, group, async_op, options)


def reduce_scatter(
    output: Any, input_list: Any, op: Any = ReduceOp.SUM, group: Any = None,
    async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:
    """Reduce, then scatter: rank r's ``output`` receives block r of op(x_0, ..., x_{N-1}).
    ``input_list``: N tensors, block r being element r (torch's ``reduce_scatter``; costs one
    copy), or one tensor of S elements (as :func:`reduce_scatter_single`). Inputs untouched.

    Example, N=2, SUM: [[1], [2]] and [[10], [20]] -> rank 0 [11], rank 1 [22]. Ring: N-1
    steps, (N-1)/N * S bytes sent per rank -- half of an all-reduce.
    """
    if isinstance(input_list, list | tuple):
        g, opts = member(group, options, "reduce-scatter")
        if g is None:
            return None
        parts = list(input_list)
        with refusing(g, Collective.REDUCE_SCATTER, opts, op):
            whole = buffers.concat(parts, g.size, "reduce-scatter input")
        return issue(Collective.REDUCE_SCATTER, whole, output, op, g, async_op, opts,
                     before=lambda: buffers.fill_from(whole, parts))
    return issue(Collective.REDUCE_SCATTER, input_list, output, op, group, async_op, options)


def reduce_scatter_single(
    output: Any, input: Any, op: Any = ReduceOp.SUM, group: Any = None,  # noqa: A002
    async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:
    """Reduce ``input`` (S elements, every rank) and leave block r of the result in rank r's
    ``output`` (blocks as np.array_split; S/N each when N divides S, which torch requires).
    ``input`` is untouched. Example, N=2, SUM: [1, 2] and [10, 20] -> rank 0 [11], rank 1
    [22]. torch 2.13's name; ``reduce_scatter_tensor`` is the same function."""
    return issue(Collective.REDUCE_SCATTER, input, output, op, group, async_op, options)


#: torch's older name of :func:`reduce_scatter_single` (deprecated in torch 2.13).
reduce_scatter_tensor = reduce_scatter_single


def all_gather(
    tensor_list: Any, tensor: Any, group: Any = None, async_op: bool = False,
    **options: Unpack[CallOptions],
) -> Work | None:
    """Gather every rank's ``tensor`` into every rank's ``tensor_list`` (element r from rank
    r; torch's ``all_gather``, costs one copy), or into one tensor whose block r is rank r's
    (as :func:`all_gather_single`). Example, N=2: [1] and [2] -> both [[1], [2]]. Ring: N-1
    steps, (N-1)/N * S bytes sent per rank."""
    if not isinstance(tensor_list, list | tuple):
        return issue(Collective.ALL_GATHER, tensor, tensor_list, None, group, async_op, options)
    g, opts = member(group, options, "all-gather")
    if g is None:
        return None
    parts = list(tensor_list)
    with refusing(g, Collective.ALL_GATHER, opts):
        whole = buffers.concat(parts, g.size, "all-gather output")
    return issue(Collective.ALL_GATHER, tensor, whole, None, g, async_op, opts,
                 outputs=parts, after=lambda: buffers.split_into(whole, parts))


def all_gather_single(
    output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False,
    **options: Unpack[CallOptions],
) -> Work | None:
    """Concatenate every rank's ``input_tensor`` (block r of ``output_tensor``) into every
    ``output_tensor``. Example, N=2: [1] and [2] -> both [1, 2]. Ring: N-1 steps, (N-1)/N * S
    bytes sent per rank. torch 2.13's name; ``all_gather_into_tensor`` is the same
    function. ``input_tensor`` may be this rank's block of ``output_tensor`` (in place)."""
    return issue(Collective.ALL_GATHER, input_tensor, output_tensor, None, group, async_op,
                 options)


#: torch's older name of :func:`all_gather_single` (deprecated in torch 2.13).
all_gather_into_tensor = all_gather_single


def broadcast(
    tensor: Any, src: int | None = None, group: Any = None, async_op: bool = False,
    group_src: int | None = None, **options: Unpack[CallOptions],
) -> Work | None:
    """Copy the root's ``tensor`` into every rank's ``tensor``; the root is ``src`` (a global
    rank) or ``group_src`` (a rank of the group), as in torch.distributed. Chain: N-1 steps
    pipelined over chunks; S bytes sent by every rank but one."""
    return issue(Collective.BROADCAST, tensor, None, None, group, async_op, options,
                 roots=(src, group_src, "src"))


def reduce(
    tensor: Any, dst: int | None = None, op: Any = ReduceOp.SUM, group: Any = None,
    async_op: bool = False, group_dst: int | None = None, **options: Unpack[CallOptions],
) -> Work | None:
    """Reduce every rank's ``tensor`` into the root's ``tensor``; the root is ``dst`` (a
    global rank) or ``group_dst`` (a rank of the group). The other ranks' tensors are left
    unchanged. Chain: S bytes sent by every rank but the root."""
    return issue(Collective.REDUCE, tensor, None, op, group, async_op, options,
                 roots=(dst, group_dst, "dst"))


def collective(
    col: Collective | str, input: Any, output: Any = None, op: Any = ReduceOp.SUM,  # noqa: A002
    root: int = 0, group: Any = None, async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:
    """Any of the collectives by name, for drivers that loop over them (the bench, tests):
    ``input``/``output`` as the named function takes them (``output`` None for the in-place
    ones -- given, all-reduce, broadcast and reduce run out of place, from ``input`` into
    ``output``, as nccl-tests' do and torch's API cannot; ``input`` is left as it was;
    all-to-all as ``all_to_all_single``'s, even blocks; gather's ``output`` the root's
    whole buffer, None elsewhere; scatter's ``input`` the root's whole buffer, ignored
    elsewhere; the barrier takes neither), ``root`` a global rank (broadcast's ``src``,
    reduce's, gather's ``dst``, scatter's ``src``); ``op`` is ignored where the collective
    does not reduce."""
    c = Collective.parse(col)
    if c is Collective.ALL_TO_ALL:
        return all_to_all_single(output, input, group=group, async_op=async_op, **options)
    if c is Collective.GATHER:
        return _gather(input, output, (root, None), group, async_op, options)
    if c is Collective.SCATTER:
        return _scatter(output, input, (root, None), group, async_op, options)
    if c is Collective.BARRIER:
        return barrier(group, async_op, **options)
    if output is not None and c in (Collective.ALL_REDUCE, Collective.BROADCAST,
                                    Collective.REDUCE):
        roots = None if c is Collective.ALL_REDUCE else (root, None, "src" if c is
                                                          Collective.BROADCAST else "dst")
        return issue(c, input, output, op if c.reduces else None, group, async_op,
                     options, roots=roots)
    if c is Collective.ALL_REDUCE:
        return all_reduce(input, op, group, async_op, **options)
    if c is Collective.REDUCE_SCATTER:
        return reduce_scatter(output, input, op, group, async_op, **options)
    if c is Collective.ALL_GATHER:
        return all_gather(output, input, group, async_op, **options)
    if c is Collective.BROADCAST:
        return broadcast(input, root, group, async_op, **options)
    return reduce(input, root, op, group, async_op, **options)


def all_to_all_single(
    output: Any, input: Any, output_split_sizes: Sequence[int] | None = None,  # noqa: A002
    input_split_sizes: Sequence[int] | None = None, group: Any = None, async_op: bool = False,
    **options: Unpack[CallOptions],
) -> Work | None:
    """Send block d of ``input`` to rank d; ``output`` receives block s from every rank s, in
    rank order. Blocks are rows of dim 0: ``input_split_sizes[d]`` rows for rank d,
    ``output_split_sizes[s]`` from rank s (rank s's input split for this rank); without
    them every rank's input is cut into N equal blocks (as torch, dim 0 must divide by N for
    tensors of more than one dimension; a 1-D one is cut like np.array_split). ``input``
    is untouched.

    Example, N=2: [1, 2] and [10, 20] -> rank 0 [1, 10], rank 1 [2, 20]. Linear (every
    message at once, as NCCL and gloo do): one step, (N-1)/N S bytes per rank (S: one rank's
    input); pairwise exchange, Bruck (ceil(log2 N) steps of ~S/2) and hierarchical by name.
    With split sizes only linear and pairwise run (each rank knows only its own blocks'
    sizes), and the first such call on a group checks every rank's sizes against its
    peers'.
    """
    g, opts = member(group, options, "all-to-all")
    if g is None:
        return None
    splits = None
    try:  # as in issue
        if input_split_sizes or output_split_sizes:
            sent = _split_elems(input, input_split_sizes, g.size, "input")
            received = _split_elems(output, output_split_sizes, g.size, "output")
            splits = (sent, received)
        else:
            _check_rows(input.shape, g.size, "input")
            _check_rows(output.shape, g.size, "output")
    except RingtreeError as e:
        calls.refuse(g, Collective.ALL_TO_ALL, None, 0, opts, e)
    return issue(Collective.ALL_TO_ALL, input, output, None, g, async_op, opts,
                 splits=splits)


def all_to_all(
    output_tensor_list: Sequence[Any], input_tensor_list: Sequence[Any], group: Any = None,
    async_op: bool = False, **options: Unpack[CallOptions],
) -> Work | None:
    """Send ``input_tensor_list[d]`` to rank d, receive rank s's into ``output_tensor_list[s]``
    (any sizes, as long as each rank's tensor for d matches d's for it). Costs one copy in
    and one out: the tensors travel as one all-to-all with split sizes (linear).
    Example, N=2: [[1], [2, 2]] and [[3], [4]] -> rank 0 [[1], [3]], rank 1 [[2, 2], [4]]."""
    g, opts = member(group, options, "all-to-all")
    if g is None:
        return None
    ins, outs = list(input_tensor_list), list(output_tensor_list)
    with refusing(g, Collective.ALL_TO_ALL, opts):
        for what, parts in (("input_tensor_list", ins), ("output_tensor_list", outs)):
            if len(parts) != g.size:
                raise RingtreeRuntimeError(f"{what} holds {len(parts)} tensors: expected one "
                                           f"per rank ({g.size})")
        whole_in = buffers.join(ins, "input_tensor_list")
        whole_out = buffers.join(outs, "output_tensor_list")
    splits = (tuple(buffers.numel(t) for t in ins), tuple(buffers.numel(t) for t in outs))
    return issue(Collective.ALL_TO_ALL, whole_in, whole_out, None, g, async_op, opts,
                 outputs=outs, after=lambda: buffers.split_into(whole_out, outs),
                 splits=splits, before=lambda: buffers.fill_from(whole_in, ins))


def gather(
    tensor: Any, gather_list: Sequence[Any] | None = None, dst: int | None = None,
    group: Any = None, async_op: bool = False, group_dst: int | None = None,
    **options: Unpack[CallOptions],
) -> Work | None:
    """Collect every rank's ``tensor`` into the root's ``gather_list`` (element r from rank
    r); the root is ``dst`` (a global rank) or ``group_dst`` (default: global rank 0, as in
    torch), and only it gives ``gather_list``, N tensors of ``tensor``'s size. Example, N=2:
    [1] and [2] -> root [[1], [2]]. Binomial tree: ceil(log2 N) steps, the root receives
    (N-1)/N S (S: all N tensors); linear: N-1 steps of one tensor."""
    return _gather(tensor, gather_list, root_of(dst, group_dst), group, async_op, options)


def scatter(
    tensor: Any, scatter_list: Sequence[Any] | None = None, src: int | None = None,
    group: Any = None, async_op: bool = False, group_src: int | None = None,
    **options: Unpack[CallOptions],
) -> Work | None:
    """Give rank r ``scatter_list[r]`` of the root, in its ``tensor``; the root is ``src`` (a
    global rank) or ``group_src`` (default: global rank 0), and only it gives
    ``scatter_list``, N tensors of ``tensor``'s size. Example, N=2: root [[1], [2]] -> [1]
    and [2]. Binomial tree: ceil(log2 N) steps, the root sends (N-1)/N S; linear: N-1 steps."""
    return _scatter(tensor, scatter_list, root_of(src, group_src), group, async_op, options)


def barrier(
    group: Any = None, async_op: bool = False, device_ids: Sequence[int] | None = None,
    timeout: timedelta | float | None = None, **options: Unpack[CallOptions],
) -> Work | None:
    """Return once every rank of the group has called it. Dissemination: ceil(log2 N) rounds
    of one message per rank, each sent once its sender has heard the rounds before, so no
    rank leaves before all have entered; the messages are empty (one byte over NCCL, whose
    device is ``device_ids[0]``, else the current one). ``timeout``: as torch's (default:
    the group's)."""
    if timeout is not None:
        options = {**options, "timeout": timeout}
    g, opts = member(group, options, "barrier")
    if g is None:
        return None
    if g.kind == "nccl":
        import torch

        dev = torch.device("cuda", device_ids[0]) if device_ids else torch.device("cuda")
        token: Any = torch.empty(1, dtype=torch.uint8, device=dev)
    else:
        token = np.empty(0, dtype=np.uint8)
    return issue(Collective.BARRIER, token, None, None, g, async_op, opts, outputs=[])


def root_of(given: int | None, in_group: int | None) -> tuple[int | None, int | None]:
    """``(src, group_src)`` with torch's default root: global rank 0 when neither is given."""
    return (0, None) if given is None and in_group is None else (given, in_group)


def _gather(tensor: Any, parts: Any, root: tuple[int | None, int | None], group: Any,
            async_op: bool, options: CallOptions) -> Work | None:
    """Gather with ``parts`` the root's list of tensors or one whole buffer (None elsewhere)."""
    g, opts = member(group, options, "gather")
    if g is None:
        return None
    roots = (*root, "dst")
    with refusing(g, Collective.GATHER, opts):
        mine = g.rank == g.root(*roots)
        if mine:
            _require_parts(parts, "gather_list", "destination")
        elif parts:
            raise RingtreeError(
                "gather_list is given on a rank that is not the destination: only the "
                "destination gives it (as in torch.distributed)"
            )
        outs = list(parts) if mine and isinstance(parts, list | tuple) else None
        whole = buffers.concat(outs, g.size, "gather_list") if outs else None
    if not mine:
        return issue(Collective.GATHER, tensor, buffers.empty_view(tensor), None, g,
                     async_op, opts, roots=roots)
    if outs is None:  # one whole buffer (api.collective)
        return issue(Collective.GATHER, tensor, parts, None, g, async_op, opts,
                     roots=roots)
    return issue(Collective.GATHER, tensor, whole, None, g, async_op, opts, roots=roots,
                 outputs=outs, after=lambda: buffers.split_into(whole, outs))


def _scatter(tensor: Any, parts: Any, root: tuple[int | None, int | None], group: Any,
             async_op: bool, options: CallOptions) -> Work | None:
    """Scatter with ``parts`` the root's list of tensors or one whole buffer."""
    g, opts = member(group, options, "scatter")
    if g is None:
        return None
    roots = (*root, "src")
    with refusing(g, Collective.SCATTER, opts):
        mine = g.rank == g.root(*roots)
        if mine:
            _require_parts(parts, "scatter_list", "source")
        ins = list(parts) if mine and isinstance(parts, list | tuple) else None
        whole = buffers.concat(ins, g.size, "scatter_list") if ins else None
    if not mine:
        return issue(Collective.SCATTER, buffers.empty_view(tensor), tensor, None, g,
                     async_op, opts, roots=roots)
    if ins is None:  # one whole buffer (api.collective)
        return issue(Collective.SCATTER, parts, tensor, None, g, async_op, opts, roots=roots)
    return issue(Collective.SCATTER, whole, tensor, None, g, async_op, opts, roots=roots,
                 before=lambda: buffers.fill_from(whole, ins))


def _require_parts(parts: Any, what: str, role: str) -> None:
    """RingtreeError unless the root gave its list (or whole buffer) of per-rank tensors."""
    if parts is None or (isinstance(parts, list | tuple) and not parts):
        raise RingtreeError(f"{what} must be given on the {role} rank, one tensor per rank "
                            "(as in torch.distributed)")


def _check_rows(shape: tuple[int, ...], n: int, what: str) -> None:
    """RingtreeError when a tensor of 2+ dims has rows (dim 0) not a multiple of N."""
    if len(shape) > 1 and shape[0] % n:
        raise RingtreeError(f"{what} has {shape[0]} rows (dim 0), not a multiple of the group "
                            f"size {n}: give {what}_split_sizes")


def _split_elems(x: Any, sizes: Sequence[int] | None, n: int, what: str) -> tuple[int, ...]:
    """Split sizes in rows of dim 0 as elements (even rows when none are given)."""
    shape = tuple(x.shape)
    row = int(np.prod(shape[1:], dtype=np.int64)) if shape else 1
    if not sizes:
        _check_rows(shape, n, what)
        return tuple(v * row for v in block_sizes(shape[0] if shape else 1, n))
    if any(not isinstance(v, int | np.integer) or isinstance(v, bool) for v in sizes):
        raise RingtreeTypeError(f"{what}_split_sizes must be whole numbers, got {list(sizes)}")
    return tuple(int(v) * row for v in sizes)
