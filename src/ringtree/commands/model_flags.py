"""Which model prices a command's question and which flags go with it, declared once.

``cost`` and ``crossover`` price on one of two kinds of hardware: links (``--link``,
``--profile``: the ``textbook`` and ``alpha-beta`` models, :class:`ringtree.cost.link_pricer.
LinkPricer`) or a cluster as built (``--cluster``: the ``nccl`` model,
:class:`ringtree.cost.nccl.pricer.NcclPricer`). Each flag below belongs to one kind; given with
the other it is refused in one line that says what to do instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringtree.errors import RingtreeError

LINKS, CLUSTER = "links", "cluster"
#: Every model and the hardware it prices.
MODEL_ON = {"textbook": LINKS, "alpha-beta": LINKS, "nccl": CLUSTER}


@dataclass(frozen=True)
class Flag:
    """A flag (``dest``: its argparse attribute; ``unset``: its value when not given) that
    belongs to ``on``; ``why``: the line that refuses it on the other hardware (default: it
    goes with the other)."""

    flag: str
    dest: str
    on: str
    unset: Any = None
    why: str = ""

    def given(self, args: argparse.Namespace) -> bool:
        """Whether ``args`` gives this flag."""
        value = getattr(args, self.dest, None)
        if isinstance(value, str) and isinstance(self.unset, str):
            return value.strip().lower() != self.unset
        return value is not None and value != [] and value != self.unset

    def refusal(self) -> str:
        """The one line that refuses it where it does not belong."""
        if self.why:
            return self.why
        if self.on == CLUSTER:
            return f"{self.flag} goes with --cluster (the NCCL model)"
        return f"{self.flag} goes with --link: the --cluster prices NCCL's choice alone"


FLAGS = {f.flag: f for f in (
    Flag("-n", "ranks", LINKS,
         why="on a --cluster the ranks are --nodes x --gpus-per-node: drop -n/--ranks"),
    Flag("--link", "link", LINKS, why="give --cluster or --link/--profile, not both"),
    Flag("--profile", "profile", LINKS, why="give --cluster or --link/--profile, not both"),
    Flag("--algorithm", "algorithm", LINKS, unset="auto",
         why="--algorithm goes with --link: on a --cluster NCCL's tuner picks the algorithm "
         "(NCCL_ALGO=ring or tree in the environment forces one, as in NCCL)"),
    Flag("--root", "root", LINKS, unset=0),
    Flag("--chunks", "chunks", LINKS),
    Flag("--ranks-per-node", "ranks_per_node", LINKS,
         why="on a --cluster give --gpus-per-node, not --ranks-per-node"),
    Flag("--compute", "compute", LINKS),
    Flag("--price-gpu-hour", "price_gpu_hour", LINKS),
    Flag("--price-cluster-hour", "price_cluster_hour", LINKS),
    Flag("--steps-per-second", "steps_per_second", LINKS),
    Flag("--hours", "hours", LINKS),
    Flag("--comm-time", "comm_time", LINKS),
    Flag("--nodes", "nodes", CLUSTER, unset=1),
    Flag("--gpus-per-node", "gpus_per_node", CLUSTER),
    Flag("-b", "minbytes", CLUSTER),
    Flag("-e", "maxbytes", CLUSTER),
    Flag("-f", "stepfactor", CLUSTER, unset=2.0),
    Flag("--plot", "plot", CLUSTER),
)}


def hardware(args: argparse.Namespace, flags: Sequence[str]) -> str:
    """LINKS or CLUSTER, as ``args`` say (``--cluster`` given or not); RingtreeError for a
    ``--model`` of the other kind or the first of ``flags`` that belongs to it."""
    on = CLUSTER if getattr(args, "cluster", None) is not None else LINKS
    model = getattr(args, "model", None)
    if model is not None and MODEL_ON[model] != on:
        if on == LINKS:
            raise RingtreeError("the nccl model prices a cluster: give --cluster NAME --nodes K")
        raise RingtreeError(
            f"--model {model} prices a --link; on a --cluster the model is nccl (NCCL's "
            "choice, timed by ringtree): drop --model or give --link"
        )
    for name in flags:
        flag = FLAGS[name]
        if flag.on != on and flag.given(args):
            raise RingtreeError(flag.refusal())
    return on
