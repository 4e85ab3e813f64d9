"""Closed form of the double binary tree all-reduce (:mod:`ringtree.algorithms.dbtree`): two
pipelined trees, one per half; terms from their streams (:mod:`ringtree.cost.forms.pipeline`).
About (3D + C) alpha + 2 S (1 + O(D/C)) beta, D the depth of the binary trees (Sanders, Speck &
Traeff 2009; NCCL's tree model).
"""

from __future__ import annotations

from ringtree.algorithms import BuildSpec
from ringtree.algorithms.dbtree import dbtree_streams
from ringtree.collectives import Collective
from ringtree.cost.forms.base import Estimate, closed_form
from ringtree.cost.forms.pipeline import rank_kinds


@closed_form(Collective.ALL_REDUCE, "dbtree")
def dbtree_all_reduce(n: int, count: int, itemsize: int, spec: BuildSpec) -> Estimate:
    """Double binary tree, C chunks per half: about (3D + C) alpha + 2S (1 + O(D/C)) beta with
    D ~ log2 N; every rank sends at most 2S (Sanders, Speck & Traeff 2009; NCCL 2.4)."""
    return rank_kinds(dbtree_streams, n).terms(count, itemsize, spec.chunks, 2)
