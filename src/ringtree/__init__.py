"""ringtree: collective communication you can run, see and predict.

The core (schedules, algorithms, simulator, cost model) needs only numpy; the engine
(``ringtree.runtime``) imports torch.distributed or mpi4py only when used.
"""

from ringtree.collectives import Collective, ReduceOp
from ringtree.errors import RingtreeError
from ringtree.schedule import Action, Schedule, Step, Transfer

__all__ = ["Action", "Collective", "ReduceOp", "RingtreeError", "Schedule", "Step", "Transfer"]
__version__ = "0.1.0"
