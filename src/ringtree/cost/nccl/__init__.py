"""A model of NCCL on real clusters: what it runs (its tuner's choice) and how long it takes.

:mod:`~ringtree.cost.nccl.constants` (NCCL's figures), :mod:`~ringtree.cost.nccl.topology`
(what NCCL's search finds on a cluster), :mod:`~ringtree.cost.nccl.tuner` (NCCL's prices and
choice, NCCL_ALGO/NCCL_PROTO), :mod:`~ringtree.cost.nccl.timing` (ringtree's time for the
choice: :func:`predict`), :mod:`~ringtree.cost.nccl.pricer` (the model behind the pricing
seam, :class:`ringtree.cost.pricer.Pricer`).
"""

from ringtree.cost.nccl.timing import DEFAULT, NcclCall, Params, predict

__all__ = ["DEFAULT", "NcclCall", "Params", "predict"]
