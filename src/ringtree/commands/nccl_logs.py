"""What ``calibrate --nccl-tests`` and ``validate --nccl-tests`` share: their flags, the
check that no measuring flag came with them, reading the logs and the cluster."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

from ringtree.cost.clusters import Cluster, get_cluster
from ringtree.errors import RingtreeError
from ringtree.measure.nccl_tests import Test, parse_file


def add_arguments(p: argparse.ArgumentParser, what: str, logs: str = "+") -> None:
    """``--nccl-tests LOG...`` and ``--cluster PRESET|FILE`` (``what`` the mode does)."""
    g = p.add_argument_group("from nccl-tests logs (the NCCL model of a cluster)")
    g.add_argument("--nccl-tests", nargs=logs, metavar="LOG", default=None,
                   help=f"{what}: the text all_reduce_perf, all_gather_perf ... printed "
                        "(several tests a file, NCCL_DEBUG=INFO and mpirun/srun tags are fine)")
    g.add_argument("--cluster", metavar="PRESET|FILE.toml", default=None,
                   help="the cluster the logs were measured on: a preset of 'ringtree "
                        "clusters' or a cluster file (with --nccl-tests)")


def optional_ranks(p: argparse.ArgumentParser) -> None:
    """``-n`` stays required for measuring, not with ``--nccl-tests`` (:func:`check_mode`
    asks for it)."""
    for a in p._actions:
        if a.dest == "ranks":
            a.required = False


def foreign(p: argparse.ArgumentParser, allowed: Sequence[str]) -> Callable[..., list[str]]:
    """A function of the parsed arguments naming the flags given that ``--nccl-tests`` does
    not take (those not in ``allowed`` whose value is not their default)."""
    flags = [(a.dest, "/".join(a.option_strings), a.default) for a in p._actions
             if a.option_strings and a.dest not in (*allowed, "help")]

    def given(args: argparse.Namespace) -> list[str]:
        """The flags given away from their defaults."""
        return [opt for dest, opt, default in flags if getattr(args, dest, default) != default]

    return given


def check_mode(args: argparse.Namespace, command: str) -> None:
    """RingtreeError when a measuring flag comes with --nccl-tests or --cluster without it."""
    if args.nccl_tests is None:
        if args.cluster is not None:
            raise RingtreeError(f"--cluster goes with --nccl-tests LOG ({command} from a "
                                "cluster's nccl-tests output); measuring local processes "
                                "takes no cluster")
        if args.ranks is None:
            raise RingtreeError("the following arguments are required: -n/--ranks (or "
                                "--nccl-tests LOG --cluster X, which measures nothing)")
        return
    extra = args.nccl_foreign(args)
    if extra:
        raise RingtreeError(f"{', '.join(extra)} {'does' if len(extra) == 1 else 'do'} not go "
                            f"with --nccl-tests: {command} reads the logs and measures nothing")
    if args.cluster is None:
        raise RingtreeError("--nccl-tests needs --cluster PRESET|FILE.toml: the cluster the "
                            "logs were measured on ('ringtree clusters' lists the presets)")


def read(args: argparse.Namespace) -> tuple[list[Test], Cluster, dict[str, str]]:
    """The logs' tests, the cluster and the NCCL_* settings of the environment."""
    cluster = get_cluster(args.cluster)
    tests = [t for path in args.nccl_tests for t in parse_file(path)]
    env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    return tests, cluster, env


def shapes(tests: Sequence[Test]) -> str:
    """``all_reduce_perf on 2 x 8 NVIDIA H100 80GB HBM3 (32 sizes)``, one per test."""
    out = []
    for t in tests:
        where = f"{t.nodes} x {t.gpus_per_node}" if t.gpus_per_node else f"{t.n_ranks} ranks"
        out.append(f"{t.test}_perf on {where} {t.gpu or 'GPUs'} ({len(t.rows)} sizes)")
    return "; ".join(out)
