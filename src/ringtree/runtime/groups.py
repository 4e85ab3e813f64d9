"""ringtree's state for one process group, made once per group on each of its members.

A :class:`Group` holds what every call on the group shares: the transport (with its control
channel), the settings read from the environment when the group was first used, the map
from group ranks to global ranks, the one cache of call plans, and the runner that keeps the
group's calls in the order they were made. :func:`group_for` finds or makes it for what the
caller passed as ``group``: a torch ProcessGroup, an mpi4py communicator, a ringtree
Transport, or None (torch's default group, else MPI's COMM_WORLD under an MPI launcher). It
returns None on a rank that is not a member (torch's ``GroupMember.NON_GROUP_MEMBER``, MPI's
``COMM_NULL``): the call then returns at once, as torch's collectives do.

Global ranks are torch's (or, under MPI, COMM_WORLD's); a Transport passed directly is its own
world. Nothing here depends on what other groups exist, and a rank that is not a member never
takes part in making a group.

Coming late: every rank numbers the group's calls alike. A call that raises PeerError sends
the peers a give-up notice (:meth:`Transport.give_up`: the call's number, the rank waited
for); a peer whose own call then fails says that rank gave up instead of "died"; and where a
late peer could finish the abandoned call on the messages sent before the give-up
(``Transport.stale_sends``: MPI) the group reads the notices before a call, at most every
PROBE_S, and fails like its peers. So a rank that comes more than PROBE_S after a peer gave up
fails too (within PROBE_S of it, it may finish the call on the messages already sent).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ringtree import config
from ringtree.errors import RingtreeError, RingtreeRuntimeError, RingtreeTypeError
from ringtree.runtime.errors import PeerError
from ringtree.runtime.transport import Transport

#: torch's marker for "this rank is not in the group" (``GroupMember.NON_GROUP_MEMBER``).
_TORCH_NON_MEMBER = -100
#: The most call plans a group keeps (a program that varies its sizes endlessly clears it).
MAX_PLANS = 4096
#: How often at most a group whose transport has ``stale_sends`` reads its peers' give-up
#: notices before a call (one MPI Iprobe, ~0.5 us: at most 5 us a second).
PROBE_S = 0.1
_clock = time.perf_counter


@dataclass(frozen=True)
class Settings:
    """The ``RINGTREE_*`` variables the engine reads (see :mod:`ringtree.config`), once per
    group, when ringtree first uses the group."""

    timeout_s: float
    check: str
    slice_bytes: int
    algo: str
    duplex: bool

    @classmethod
    def from_environment(cls, timeout_s: float | None = None) -> Settings:
        """The settings the environment asks for now; RingtreeError names a bad variable.
        ``timeout_s``: the group's own timeout (a torch process group's), which stands unless
        RINGTREE_TIMEOUT is set; without either, RINGTREE_TIMEOUT's default."""
        if timeout_s is None or config.is_set("RINGTREE_TIMEOUT"):
            timeout_s = config.read("RINGTREE_TIMEOUT")
        return cls(
            timeout_s=timeout_s,
            check=config.read("RINGTREE_CHECK"),
            slice_bytes=config.read("RINGTREE_SLICE_BYTES"),
            algo=config.read("RINGTREE_ALGO"),
            duplex=config.read("RINGTREE_DUPLEX"),
        )


class Group:
    """One group as this rank sees it (see the module doc)."""

    def __init__(
        self,
        transport: Transport,
        settings: Settings,
        global_ranks: tuple[int, ...],
        name: str,
        ranks_per_node: int | None = None,
    ) -> None:
        self.transport = transport
        self.settings = settings
        self.global_ranks = global_ranks
        self.name = name
        self.ranks_per_node = ranks_per_node
        self.rank, self.size, self.kind = transport.rank, transport.size, transport.kind
        self.plans: dict[tuple, Any] = {}
        #: call shapes whose first call has been made (:mod:`ringtree.runtime.calls`)
        self.checked: set[tuple] = set()
        self._index = {g: r for r, g in enumerate(global_ranks)}
        self._runner: ThreadPoolExecutor | None = None
        self._pending: list[Future] = []
        #: calls submitted so far (every rank numbers them alike); when notices were read
        self.calls, self._probed, self._stale = 0, -math.inf, transport.stale_sends

    @property
    def global_rank(self) -> int:
        """This rank's global rank."""
        return self.global_ranks[self.rank]

    def group_rank(self, global_rank: int, what: str) -> int:
        """The group rank of ``global_rank``; RingtreeError when it is not a member, of
        torch's type: RuntimeError on a group of every rank (gloo's "invalid root rank"),
        ValueError on a subgroup (torch's get_group_rank)."""
        r = self._index.get(global_rank)
        if r is None:
            whole = self.global_ranks == tuple(range(self.size))
            raise (RingtreeRuntimeError if whole else RingtreeError)(
                f"{what}={global_rank} is not a rank of this group: its global ranks are "
                f"{_ranks_text(self.global_ranks)} (use group_{what}= for a rank within the group)"
            )
        return r

    def root(self, global_root: int | None, group_root: int | None, what: str) -> int:
        """The group rank of a root given as a global rank (``src``/``dst``) or as a group
        rank (``group_src``/``group_dst``), exactly one of them, as torch.distributed takes
        them; RingtreeError otherwise."""
        if global_root is not None and group_root is not None:
            raise RingtreeError(f"give {what}= or group_{what}=, not both")
        if global_root is None and group_root is None:
            raise RingtreeError(f"give the root: {what}= (a global rank) or group_{what}=")
        if group_root is not None:
            if not isinstance(group_root, int) or isinstance(group_root, bool):
                raise RingtreeTypeError(f"group_{what} must be a rank (an int), got "
                                        f"{group_root!r}")
            if not 0 <= group_root < self.size:
                raise RingtreeRuntimeError(
                    f"group_{what}={group_root!r} is not a rank of this group (0..{self.size - 1})"
                )
            return group_root
        if not isinstance(global_root, int) or isinstance(global_root, bool):
            raise RingtreeTypeError(f"{what} must be a rank (an int), got {global_root!r}")
        return self.group_rank(global_root, what)

    def submit(self, fn: Any, async_op: bool) -> Future | None:
        """Run ``fn`` after the group's earlier calls: now on this thread when nothing is
        pending and the call is synchronous, else on the group's runner thread. Returns the
        future of an asynchronous call; a synchronous one re-raises its error."""
        pending = self._pending
        if pending:
            pending[:] = [f for f in pending if not f.done()]
        if not async_op and not pending:
            self._guarded(fn)
            return None
        if self._runner is None:
            self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ringtree")
        fut = self._runner.submit(self._guarded, fn)
        pending.append(fut)
        if async_op:
            return fut
        fut.result()
        return None

    def _guarded(self, fn: Any) -> None:
        """Run call ``fn`` with the give-up notices of the module doc (~0.2 us a call)."""
        self.calls += 1
        try:
            if self._stale and _clock() - self._probed > PROBE_S:
                self._probed = _clock()
                if self.transport.given_up():
                    raise self._gave_up_error(None)
            fn()
        except PeerError as e:
            self.transport.give_up(self.calls, e.peer)
            raise self._gave_up_error(e) from None

    def _gave_up_error(self, error: PeerError | None) -> PeerError:
        """``error`` told as it happened when peers gave up: which peer gave up on which call,
        waiting for whom -- when one gave up waiting for this rank, or is the one this rank
        waited for (else ``error`` as it is). None: a call found the notices before it ran."""
        notes = {p: n for p, n in self.transport.given_up().items()
                 if n[1] == self.rank or error is None or p == error.peer}
        if not notes:
            assert error is not None
            return error
        told = []
        for peer, (call, waited) in sorted(notes.items()):
            whom = "this rank" if waited == self.rank else f"rank {waited}"
            when = "this call" if call == self.calls else f"call {call} on this group"
            told.append(f"rank {peer} gave up on {when} while it waited for {whom} (its "
                        "timeout ran out)")
        where = ""
        if error is not None:  # "rank R: <label step s of n>: <what happened>"
            parts = str(error).split(": ", 2)
            where = f"{parts[1]}: " if len(parts) == 3 else ""
        return PeerError(
            f"rank {self.rank}: {where}{'; '.join(told)}; the group cannot be used again",
            rank=self.rank, peer=min(notes) if error is None else error.peer,
            step=0 if error is None else error.step,
        )

    def remember(self, key: tuple, plan: Any) -> None:
        """Keep ``plan`` for calls of shape ``key`` (the cache is cleared when full)."""
        if len(self.plans) >= MAX_PLANS:
            self.plans.clear()
        self.plans[key] = plan

    def see(self, shape: tuple) -> None:
        """Note that a call of ``shape`` was made (cleared when full, on every rank alike:
        every rank makes the same calls, so it sees the same shapes)."""
        if shape not in self.checked and len(self.checked) >= MAX_PLANS:
            self.checked.clear()
        self.checked.add(shape)


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if len(ranks) > 1 and list(ranks) == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}..{ranks[-1]}"
    return ", ".join(map(str, ranks))


# Groups by handle: a Transport passed as ``group`` owns its Group (they go away together);
# process groups and communicators, which live as long as the program, are kept here by
# identity (mpi4py communicators are unhashable).
_by_id: dict[int, tuple[Any, Group]] = {}
_lock = threading.Lock()


def _known(handle: Any) -> Group | None:
    if isinstance(handle, Transport):
        return handle.engine_group
    hit = _by_id.get(id(handle))
    return hit[1] if hit is not None and hit[0] is handle else None


def _keep(handle: Any, group: Group) -> None:
    if isinstance(handle, Transport):
        handle.engine_group = group
    else:
        _by_id[id(handle)] = (handle, group)


def group_for(handle: Any, timeout_s: float | None = None) -> Group | None:
    """The Group of ``handle`` (see the module doc), made on first use; None when this rank
    is not a member. Making it waits for the other members (the first call's ``timeout_s``,
    default RINGTREE_TIMEOUT): PeerError names any that do not come. A Group is its own."""
    global _last_default
    if type(handle) is Group:
        return handle
    if handle is None:
        last, world = _last_default, _torch_world()
        if last is not None and world is last[0]:  # a few attribute reads
            return last[1]
        handle = _default_handle()
        group = group_for(handle, timeout_s)
        if group is not None and world is not _UNREADABLE:
            _last_default = (world, group)
        return group
    group = _known(handle)
    if group is not None:
        return group
    if _not_member(handle):
        return None
    with _lock:
        group = _known(handle)
        if group is None:
            settings = Settings.from_environment(_own_timeout(handle))
            wait_s = settings.timeout_s if timeout_s is None else timeout_s
            group = _make(handle, settings, wait_s)
            _keep(handle, group)
        return group


#: (torch's default process group or None, the default Group) as last resolved: while torch's
#: default group stays the same object (None: torch.distributed not initialized, MPI's
#: COMM_WORLD is the default), a call on the default group, the common case, costs a few
#: attribute reads instead of torch's is_initialized and group.WORLD (10-25 us each first call
#: after a pause, with torch's code out of the caches) or the MPI lookup.
_last_default: tuple[Any, Group] | None = None
#: _torch_world's answer when this torch keeps its default group elsewhere (nothing cached).
_UNREADABLE = object()


def _torch_world() -> Any:
    """torch's default process group read straight from its registry: None when
    torch.distributed is not loaded or not initialized, _UNREADABLE when this version of torch
    keeps it elsewhere."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        return dist.distributed_c10d._world._default_pg
    except AttributeError:
        return _UNREADABLE


def forget_groups() -> None:
    """Drop the Groups of process groups and communicators (tests: a fresh start, as in a
    new process; a Transport's Group goes with the Transport)."""
    global _last_default
    with _lock:
        _by_id.clear()
        _last_default = None


def not_a_member_warning(what: str) -> None:
    """torch's behaviour for a call on a group this rank is not in: a warning, no work (it
    points at the caller's line, the first frame outside ringtree)."""
    here = os.path.dirname(os.path.dirname(__file__))  # the ringtree package
    level, frame = 2, sys._getframe(1)  # stacklevel 2: the frame that called this
    while frame is not None and frame.f_code.co_filename.startswith(here):
        level, frame = level + 1, frame.f_back
    warnings.warn(
        f"ringtree: {what} on a group this rank does not belong to: nothing to do",
        RuntimeWarning,
        stacklevel=level,
    )


def _not_member(handle: Any) -> bool:
    if isinstance(handle, int) and handle == _TORCH_NON_MEMBER:
        return True
    if _is_mpi_comm(handle):
        from mpi4py import MPI

        return handle == MPI.COMM_NULL
    return False


def _default_handle() -> Any:
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


def _is_mpi_comm(handle: Any) -> bool:
    return type(handle).__module__.startswith("mpi4py")


def _own_timeout(handle: Any) -> float | None:
    """A torch process group's own timeout (None for communicators and transports)."""
    if isinstance(handle, Transport) or _is_mpi_comm(handle):
        return None
    from ringtree.runtime.torch_dist import group_timeout_s

    return group_timeout_s(handle)


def _make(handle: Any, settings: Settings, timeout_s: float) -> Group:
    if isinstance(handle, Transport):
        ranks = tuple(getattr(handle, "global_ranks", range(handle.size)))
        return Group(handle, settings, ranks, f"transport {handle.kind}")
    if _is_mpi_comm(handle):
        from mpi4py import MPI

        from ringtree.runtime.mpi import MpiTransport

        world = MPI.COMM_WORLD.Get_group()
        ranks = tuple(handle.Get_group().Translate_ranks(list(range(handle.Get_size())), world))
        local = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") or os.environ.get("MPI_LOCALNRANKS")
        name = "COMM_WORLD" if handle == MPI.COMM_WORLD else f"communicator of {len(ranks)}"
        return Group(MpiTransport.open(handle), settings, ranks, name,
                     nodes_of(ranks, _int(local)))
    import torch.distributed as dist

    from ringtree.runtime.torch_dist import open_torch

    transport = open_torch(handle, timeout_s, duplex=settings.duplex)
    ranks = tuple(dist.get_process_group_ranks(handle))
    local = _int(os.environ.get("LOCAL_WORLD_SIZE"))
    name = "world" if handle is dist.group.WORLD else f"group {handle.group_name}"
    return Group(transport, settings, ranks, name, nodes_of(ranks, local))


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


def nodes_of(global_ranks: tuple[int, ...], local_size: int | None) -> int | None:
    """Ranks per node of a group whose members sit on nodes of ``local_size`` consecutive
    global ranks (torchrun's and Open MPI's default layout): the number of members on each
    node when every node holds the same number of consecutive members, else None."""
    if not local_size or local_size < 1:
        return None
    runs: list[int] = []
    seen: set[int] = set()
    last = None
    for g in global_ranks:
        node = g // local_size
        if node == last:
            runs[-1] += 1
        elif node in seen:
            return None  # a node's members are not consecutive in the group
        else:
            runs.append(1)
            seen.add(node)
            last = node
    return runs[0] if len(set(runs)) == 1 else None
