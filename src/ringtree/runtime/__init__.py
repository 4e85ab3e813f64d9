"""The engine: run any Schedule on real processes.

* :mod:`~ringtree.runtime.transport`: the narrow interface (post send, post receive, wait);
  implementations in :mod:`~ringtree.runtime.local` (threads), :mod:`~ringtree.runtime.torch_dist`
  (torch.distributed: gloo, NCCL) and :mod:`~ringtree.runtime.mpi` (mpi4py).
* :mod:`~ringtree.runtime.program`: one rank's part of a schedule, compiled for a size;
  :mod:`~ringtree.runtime.executor` runs it, pipelined, with a deadline.
* :mod:`~ringtree.runtime.groups` (per-group state), :mod:`~ringtree.runtime.calls` (one
  call, the one cache), :mod:`~ringtree.runtime.buffers`, :mod:`~ringtree.runtime.options`;
  :mod:`~ringtree.runtime.api`: ``all_reduce``, ``reduce_scatter``, ``all_gather``,
  ``broadcast``, ``reduce`` in torch.distributed's shape (also exported by ``ringtree``),
  over :mod:`~ringtree.runtime.work` (a call's Group and Options, its ``Work`` handle).

torch and mpi4py are imported only when a transport that needs them is used.
"""

from ringtree.runtime.errors import MismatchError, PeerError
from ringtree.runtime.executor import Context, execute
from ringtree.runtime.local import LocalTransport, LocalWorld, run_local, run_ranks
from ringtree.runtime.program import Program, compile_program
from ringtree.runtime.transport import Transport, TransportClosed, TransportTimeout

__all__ = [
    "Context",
    "LocalTransport",
    "LocalWorld",
    "MismatchError",
    "PeerError",
    "Program",
    "Transport",
    "TransportClosed",
    "TransportTimeout",
    "compile_program",
    "execute",
    "run_local",
    "run_ranks",
]
