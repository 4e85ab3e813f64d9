"""ringtree: collective communication you can run, see and predict.

The core (schedules, algorithms, simulator, cost model) needs only numpy; the engine
(``ringtree.runtime``) imports torch.distributed or mpi4py only when used. The collectives
``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``, ``reduce``,
``all_to_all_single``, ``all_to_all``, ``gather``, ``scatter`` and ``barrier`` (in
torch.distributed's shape, with its names and keywords: ``all_gather_single``,
``reduce_scatter_single`` and their older ``*_tensor`` names), point-to-point (``send``,
``recv``, ``isend``, ``irecv``, ``batch_isend_irecv``) and the ``*_object`` collectives are
loaded on first use.
"""

from typing import Any

from ringtree.collectives import Collective, ReduceOp
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Step, Transfer

_ENGINE = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all_single",
    "all_to_all", "gather", "scatter", "barrier", "Work", "transport_for",
    "all_gather_single", "all_gather_into_tensor", "reduce_scatter_single",
    "reduce_scatter_tensor",
}
_P2P = {"send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp", "P2PWork"}
_OBJECTS = {"broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"}
_RECORDS = {"Recorder", "CallRecord", "TraceEvent"}
_ERRORS = {"PeerError", "MismatchError"}

__all__ = [
    "Action",
    "CallRecord",
    "Collective",
    "MismatchError",
    "P2POp",
    "P2PWork",
    "PeerError",
    "Recorder",
    "ReduceOp",
    "RingtreeError",
    "Schedule",
    "Step",
    "TraceEvent",
    "Transfer",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_single",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_single",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "send",
    "transport_for",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load the engine's functions on first use (``ringtree.all_reduce`` ...)."""
    if name in _ENGINE:
        from ringtree.runtime import api as module
    elif name in _P2P:
        from ringtree.runtime import p2p as module
    elif name in _OBJECTS:
        from ringtree.runtime import objects as module
    elif name in _ERRORS:
        from ringtree.runtime import errors as module
    elif name in _RECORDS:
        from ringtree import events as module
    else:
        raise AttributeError(f"module 'ringtree' has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)  # later uses skip this function
    return value
