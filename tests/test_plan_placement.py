"""Where a plan runs: a cluster as built and its size, or two links; cluster files read once
(the cluster's keys by ringtree.cost.clusters, the placement's here), flags winning over a
file's keys, and the command line's cost/plan reading the same files."""

from __future__ import annotations

import json

import pytest

from ringtree.cli import main
from ringtree.cost.clusters import get_cluster
from ringtree.errors import RingtreeError
from ringtree.plan.placement import (
    DEFAULT_GPU_MEMORY_BYTES,
    cluster_of,
    on_cluster,
    place,
    read_cluster_file,
)


def write(tmp_path, name: str, text: str) -> str:
    f = tmp_path / name
    f.write_text(text)
    return str(f)


def test_a_cluster_file_says_where_a_plan_runs_too(tmp_path):
    f = write(tmp_path, "mine.toml", '[cluster]\npreset = "dgx-h100"\nnics_per_node = 4\n'
              'network = "roce"\nnodes = 16\ngpu_memory = "40GB"\nprice_gpu_hour = 3\n')
    cluster, own = read_cluster_file(f)
    base = get_cluster("dgx-h100")
    assert cluster is not None and cluster.key == "mine"
    assert (cluster.nics_per_node, cluster.network, cluster.gpu) == (4, "roce", base.gpu)
    assert own == {"nodes": 16, "gpu_memory": "40GB", "price_gpu_hour": 3}
    assert cluster_of(f) == cluster
    p = place(f)
    assert (p.nodes, p.gpus, p.gpu_memory_bytes, p.price_gpu_hour) == (16, 128, 40 * 10**9, 3.0)
    assert p.cluster == cluster
    # flags win over the file
    p = place(f, nodes=2, price_gpu_hour=9.0, gpu_memory_bytes=10**9)
    assert (p.nodes, p.price_gpu_hour, p.gpu_memory_bytes) == (2, 9.0, 10**9)


def test_a_file_of_links(tmp_path):
    f = write(tmp_path, "links.toml", '[cluster]\nnodes = 4\ngpus_per_node = 8\n'
              'intra = "nvlink4"\ninter = "ib-hdr"\nprice_gpu_hour = 2.5\ngpu_memory = "40GB"\n')
    assert read_cluster_file(f)[0] is None
    p = place(f)
    assert (p.nodes, p.gpus_per_node, p.intra.name, p.inter.name) == (4, 8, "nvlink4", "ib-hdr")
    assert (p.price_gpu_hour, p.gpu_memory_bytes, p.cluster) == (2.5, 40 * 10**9, None)
    p = place(f, gpus=16, intra="pcie4")
    assert (p.nodes, p.intra.name) == (2, "pcie4")
    with pytest.raises(RingtreeError, match="describes links"):
        cluster_of(f)


def test_links_by_default_and_a_cluster_as_built():
    p = place(gpus=16)
    assert (p.nodes, p.gpus_per_node, p.intra.name, p.inter.name) == (2, 8, "nvlink4", "ib-ndr")
    assert p.gpu_memory_bytes == DEFAULT_GPU_MEMORY_BYTES
    h100 = get_cluster("dgx-h100")
    assert place("dgx-h100", nodes=4) == on_cluster(h100, 4)
    assert on_cluster(h100, 4).gpu_memory_bytes == h100.gpu.memory_bytes


@pytest.mark.parametrize(
    ("where", "said"),
    [({"cluster": "dgx-h100"}, "give the cluster size"),
     ({"cluster": "dgx-h100", "nodes": 2, "intra": "pcie4"}, "describe links"),
     ({"cluster": "dgx-h100", "nodes": 2, "gpus_per_node": 4}, "not 4"),
     ({"gpus": 12, "gpus_per_node": 8}, "whole number of nodes"),
     ({"gpus": 2**18}, "plans take up to")],
)
def test_bad_placements_say_why(where, said):
    with pytest.raises(RingtreeError, match=said):
        place(**where)


def test_an_unknown_key_in_a_file_of_links(tmp_path):
    f = write(tmp_path, "x.toml", '[cluster]\nnodes = 2\nnics = 4\n')
    with pytest.raises(RingtreeError, match="unknown key 'nics'"):
        place(f)


def test_cost_and_plan_read_the_same_file(capsys, tmp_path):
    f = write(tmp_path, "mine.toml", '[cluster]\npreset = "dgx-h100"\nnics_per_node = 4\n'
              'nodes = 16\n')
    assert main(["cost", "all-reduce", "--cluster", f, "--nodes", "4", "--size", "8GiB",
                 "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["cluster"] == "mine" and row["busbw_gbps"] <= 4 * 400 / 8
    assert main(["plan", "--model", "7b", "--cluster", f, "--strategy", "zero3", "--json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)["plans"]
    assert plan["collectives"][0]["nodes"] == 16
