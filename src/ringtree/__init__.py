"""ringtree: collective communication you can run, see and predict.

The core (schedules, algorithms, simulator, cost model) needs only numpy; the engine
(``ringtree.runtime``) imports torch.distributed or mpi4py only when used. The collectives
``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``, ``reduce``,
``all_to_all_single``, ``all_to_all``, ``gather``, ``scatter`` and ``barrier`` (in
torch.distributed's shape) are loaded on first use.
"""

from typing import Any

from ringtree.collectives import Collective, ReduceOp
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Step, Transfer

_ENGINE = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all_single",
    "all_to_all", "gather", "scatter", "barrier", "Work", "transport_for",
}
_RECORDS = {"Recorder", "CallRecord", "TraceEvent"}
_ERRORS = {"PeerError", "MismatchError"}

__all__ = [
    "Action",
    "CallRecord",
    "Collective",
    "MismatchError",
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
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "broadcast",
    "gather",
    "reduce",
    "reduce_scatter",
    "scatter",
    "transport_for",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load the engine's functions on first use (``ringtree.all_reduce`` ...)."""
    if name in _ENGINE:
        from ringtree.runtime import api as module
    elif name in _ERRORS:
        from ringtree.runtime import errors as module
    elif name in _RECORDS:
        from ringtree import events as module
    else:
        raise AttributeError(f"module 'ringtree' has no attribute {name!r}")
    value = globals()[name] = getattr(module, name)  # later uses skip this function
    return value
