"""Algorithms: ``(collective, name) -> Algorithm``; every builder returns a Schedule.

One module per family (ring, tree, dbtree, recursive, hierarchical, pairwise, bruck, linear,
dissemination), each registering
its own :class:`~ringtree.algorithms.registry.Algorithm` entries; importing this package
imports them all, in this order (which is the order ``auto`` breaks ties in). Add an algorithm
by writing its builder in a family module, registering one entry there, and writing its closed
form in the matching module of :mod:`ringtree.cost.forms`.
"""

from __future__ import annotations

from importlib import import_module

from ringtree.algorithms.registry import (
    DEFAULT_PIPELINE_CHUNKS,
    Algorithm,
    BuildSpec,
    algorithms_for,
    build,
    check_call,
    default_algorithm,
    get_algorithm,
    registered,
)

#: The family modules, imported in this order: their entries register in it.
FAMILIES = (
    "ring",
    "tree",
    "dbtree",
    "recursive",
    "hierarchical",
    "pairwise",
    "bruck",
    "linear",
    "dissemination",
)
for _family in FAMILIES:
    import_module(f"ringtree.algorithms.{_family}")

__all__ = [
    "DEFAULT_PIPELINE_CHUNKS",
    "Algorithm",
    "BuildSpec",
    "algorithms_for",
    "build",
    "check_call",
    "default_algorithm",
    "get_algorithm",
    "registered",
]
