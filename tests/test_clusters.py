"""Cluster and GPU presets (ringtree.cost.clusters, ringtree/data/*.toml): every preset loads
with a source, NCCL's own NVLink/PCIe/NIC figures (src/graph/topo.h, topo.cc at v2.27.7), the
vendors' published node designs, aliases, and cluster files (a preset plus overrides, errors
that name the problem)."""

from __future__ import annotations

import pytest

from ringtree.cost.clusters import (
    ALIASES,
    FABRICS,
    NETWORKS,
    cluster_from_table,
    get_cluster,
    gpus,
    load_cluster,
    presets,
)
from ringtree.errors import RingtreeError

NAMED = ("dgx-a100", "dgx-h100", "hgx-b200", "aws-p4de", "aws-p5", "gcp-a3", "azure-nd-h100-v5")


def test_every_preset_loads_with_a_source_and_known_parts():
    every = presets()
    assert set(NAMED) <= set(every)
    for key, c in every.items():
        assert c.key == key
        assert c.source.strip(), key
        assert c.gpu.key in gpus() and c.fabric in FABRICS and c.network in NETWORKS
        assert c.gpus_per_node >= 1
        assert (c.nics_per_node > 0) == (c.nic_gbps > 0), key


def test_every_gpu_has_a_source():
    for key, g in gpus().items():
        assert g.source.strip(), key
        assert g.sm >= 70 and g.memory_bytes > 0


def test_nvls_only_on_hopper_or_later_behind_a_third_generation_nvswitch():
    # NVLink SHARP arrives with NVSwitch gen 3 and SM 90 (NCCL's NVLS graph: search.cc)
    for key, c in presets().items():
        if c.nvls:
            assert c.fabric == "nvswitch" and c.gpu.sm >= 90 and c.nvswitch_gen >= 3, key


@pytest.mark.parametrize(
    ("gpu", "links", "per_link", "pcie"),
    # topo.h: SM80_NVLINK_BW 20.0, SM90 20.6, SM100 40.1 per link; PCIe x16 width x speed / 80:
    # Gen4 16 x 120 / 80 = 24, Gen5 16 x 240 / 80 = 48 GB/s
    [("a100-sxm-80gb", 12, 20.0, 24.0), ("a100-sxm-40gb", 12, 20.0, 24.0),
     ("h100-sxm", 18, 20.6, 48.0), ("h200-sxm", 18, 20.6, 48.0), ("b200", 18, 40.1, 48.0),
     ("v100-sxm2", 6, 20.0, 12.0), ("l40s", 0, 0.0, 24.0)],
)
def test_nccls_nvlink_and_pcie_figures(gpu, links, per_link, pcie):
    g = gpus()[gpu]
    assert (g.nvlink_links, g.nccl_nvlink_bw) == (links, per_link)
    assert g.nvlink_GBps == pytest.approx(links * per_link)  # A100 240, H100 370.8
    assert g.pcie_GBps == pytest.approx(pcie)


def test_a_nics_rate_is_its_gbps_over_8():
    # topo.cc: net bw = Mb/s / 8000 -> HDR 25.0, NDR 50.0 GB/s
    assert get_cluster("dgx-a100").nic_GBps == 25.0
    assert get_cluster("dgx-h100").nic_GBps == 50.0
    assert get_cluster("dgx-h100").node_network_GBps == 8 * 50.0


@pytest.mark.parametrize(
    ("key", "gpu", "per_node", "nics", "gbps", "network"),
    [
        ("dgx-a100", "a100-sxm-80gb", 8, 8, 200, "ib"),  # DGX A100: 8 x 200 Gb/s HDR
        ("dgx-h100", "h100-sxm", 8, 8, 400, "ib"),  # DGX H100: 8 x ConnectX-7 400 Gb/s
        ("hgx-b200", "b200", 8, 8, 400, "ib"),  # as DGX B200: 8 x ConnectX-7
        ("aws-p4de", "a100-sxm-80gb", 8, 4, 100, "efa"),  # p4de.24xlarge: 400 Gbps EFA
        ("aws-p5", "h100-sxm", 8, 32, 100, "efa"),  # p5.48xlarge: 3200 Gbps EFA
        ("azure-nd-h100-v5", "h100-sxm", 8, 8, 400, "ib"),  # 8 x 400 Gb/s NDR per VM
        ("gcp-a3", "h100-sxm", 8, 4, 200, "tcpx"),  # a3-highgpu-8g: GPUDirect-TCPX
    ],
)
def test_vendors_node_designs(key, gpu, per_node, nics, gbps, network):
    c = get_cluster(key)
    assert (c.gpu.key, c.gpus_per_node, c.nics_per_node, c.nic_gbps, c.network) == (
        gpu,
        per_node,
        nics,
        gbps,
        network,
    )
    assert c.fabric == "nvswitch"
    assert c.nvls == (c.gpu.arch in ("hopper", "blackwell"))


def test_aliases_are_built_as_their_target():
    for alias, target in ALIASES.items():
        a, t = get_cluster(alias), get_cluster(target)
        assert a.key == alias and target in a.notes
        assert (a.gpu, a.gpus_per_node, a.fabric, a.nvls, a.nics_per_node, a.nic_gbps,
                a.network, a.cpu) == (t.gpu, t.gpus_per_node, t.fabric, t.nvls,
                                      t.nics_per_node, t.nic_gbps, t.network, t.cpu)


def test_preset_names_are_case_and_space_insensitive():
    assert get_cluster("  DGX-H100 ") is get_cluster("dgx-h100")


def test_an_unknown_preset_names_the_choices():
    with pytest.raises(RingtreeError) as e:
        get_cluster("dgx-h1000")
    assert "dgx-h1000" in str(e.value) and "dgx-h100" in str(e.value)
    assert "FILE.toml" in str(e.value)


def test_record_has_what_clusters_json_promises():
    r = get_cluster("dgx-h100").record()
    assert r["name"] == "dgx-h100" and r["gpu"] == "h100-sxm"
    assert r["nvlink_GBps_per_gpu"] == pytest.approx(18 * 20.6)
    assert r["source"] and isinstance(r["assumed"], list)


# ------------------------------------------------------------------ cluster files


def test_a_preset_with_overrides(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[cluster]\npreset = "dgx-h100"\nnics_per_node = 4\nnetwork = "roce"\n')
    c = load_cluster(f)
    base = get_cluster("dgx-h100")
    assert c.key == "mine"
    assert (c.nics_per_node, c.network) == (4, "roce")
    assert (c.gpu, c.gpus_per_node, c.nic_gbps, c.nvls, c.cpu) == (
        base.gpu,
        base.gpus_per_node,
        base.nic_gbps,
        base.nvls,
        base.cpu,
    )
    assert get_cluster(str(f)) == c  # a path ending in .toml is a file


def test_the_cluster_reader_knows_no_planner_key(tmp_path):
    """Where a plan runs (nodes, gpus, gpu_memory) is the planner's to read
    (ringtree.plan.placement, tests/test_plan_placement.py), not the cluster's."""
    f = tmp_path / "mine.toml"
    f.write_text('[cluster]\npreset = "dgx-h100"\nnodes = 16\n')
    with pytest.raises(RingtreeError, match="unknown key 'nodes'"):
        load_cluster(f)


def test_a_cluster_of_its_own(tmp_path):
    f = tmp_path / "rack.toml"
    f.write_text('[cluster]\ngpu = "l40s"\ngpus_per_node = 4\nfabric = "pcie"\n'
                 'nics_per_node = 2\nnic_gbps = 100\nnetwork = "roce"\ncpu = "amd"\n')
    c = load_cluster(f)
    assert (c.gpu.key, c.gpus_per_node, c.fabric, c.nic_GBps, c.cpu) == ("l40s", 4, "pcie",
                                                                          12.5, "amd")
    assert c.nvls is False and c.sharp is False


@pytest.mark.parametrize(
    ("table", "named"),
    [({"preset": "dgx-h100", "nics": 4}, "'nics'"),
     ({"gpu": "h200", "gpus_per_node": 8, "fabric": "nvswitch"}, "'h200'"),
     ({"gpu": "h100-sxm", "gpus_per_node": 8, "fabric": "infinity"}, "'infinity'"),
     ({"preset": "dgx-h100", "network": "carrier-pigeon"}, "'carrier-pigeon'"),
     ({"preset": "dgx-h100", "gpus_per_node": 0}, "gpus_per_node"),
     ({"preset": "dgx-h100", "gpus_per_node": 2.5}, "gpus_per_node"),
     ({"preset": "dgx-h100", "nic_gbps": 0}, "nics_per_node and nic_gbps"),
     ({"preset": "dgx-zz"}, "dgx-zz")],
)
def test_a_bad_table_names_the_problem(table, named):
    with pytest.raises(RingtreeError) as e:
        cluster_from_table("x", table, "cluster file 'x.toml'")
    assert named in str(e.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(RingtreeError, match="cannot read"):
        load_cluster(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster\n")
    with pytest.raises(RingtreeError, match="not valid TOML"):
        load_cluster(bad)
