"""Link presets: the vendor's (and the seed's) nominal bandwidth, the bandwidth collectives
really reach, and the per-step latency alpha, each with where the figure comes from.

Three kinds of figure, kept apart on purpose:

- ``nominal_Bps``: what vendors and the seed quote. NVLink and PCIe figures add both
  directions (900 GB/s for NVLink 4 is 450 GB/s each way); network line rates are per direction
  (200 Gb/s InfiniBand HDR = 25 GB/s each way). The textbook model divides by this.
- ``bandwidth_Bps``: the per-direction bandwidth a ring collective reaches, read from published
  nccl-tests bus bandwidths (busbw, which nccl-tests defines so that it compares with the
  per-direction link speed) or, where none is published, from NCCL's own topology model.
- ``alpha_s``: latency of one step on the critical path. For GPU links it is NCCL's per-hop
  hardware latency for a ring with the Simple protocol -- the protocol that reaches the
  bandwidth above (``hwLat`` in NCCL's ``src/graph/tuning.cc``: NVLink 3.4 us, PCIe 5.7 us,
  network 14 us per step); NCCL adds a fixed launch base (8.4 us) that a per-step model leaves
  out.

``gamma_s_per_byte`` (reduction cost) is 0 for every preset: GPU collectives reduce inside the
copy kernel and the measured bandwidths already include it. A custom link may set it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ringtree.cost.host import HostLink, Overload
from ringtree.cost.profile import is_profile_ref, load_profile
from ringtree.cost.terms import INTER, INTRA, Link
from ringtree.errors import RingtreeError
from ringtree.units import parse_bandwidth, parse_time

_NCCL_HWLAT = "NCCL src/graph/tuning.cc hwLat, ring/Simple"

PRESETS: dict[str, Link] = {
    link.name: link
    for link in (
        Link(
            "nvlink3", 230e9, alpha_s=3.4e-6, nominal_Bps=600e9,
            nominal_both_directions=True,
            note="A100 SXM: 12 NVLink 3 links x 25 GB/s each way, through NVSwitch",
            source="busbw 232.5 GB/s, all_reduce_perf on one 8x A100 node (NVIDIA/nccl-tests"
            "#175); NCCL models 12 links x 20 GB/s (src/graph/topo.h SM80_NVLINK_BW); "
            f"alpha: {_NCCL_HWLAT}, NVLink 3.4 us",
        ),
        Link(
            "nvlink4", 370e9, alpha_s=3.4e-6, nominal_Bps=900e9,
            nominal_both_directions=True,
            note="H100 SXM: 18 NVLink 4 links x 25 GB/s each way (seed: 900 GB/s)",
            source="'with the protocol overhead (~20%) NCCL can get an effective NVLink "
            "bandwidth of 370GB/s' with NCCL_ALGO=RING (NVIDIA/nccl-tests#212); ring busbw "
            "365-370 GB/s on 8x H100 (NVIDIA/nccl#1455); NVLink SHARP reaches 480 GB/s busbw, "
            f"beyond a point-to-point model; alpha: {_NCCL_HWLAT}, NVLink 3.4 us",
        ),
        Link(
            "nvlink5", 720e9, alpha_s=3.4e-6, nominal_Bps=1800e9,
            nominal_both_directions=True,
            note="B200/GB200: 18 NVLink 5 links x 50 GB/s each way",
            source="NCCL models 18 links x 40.1 GB/s = 722 GB/s (src/graph/topo.h "
            "SM100_NVLINK_BW; 'maxBw 721.8' on 8x B200, NVIDIA/nccl#1807); "
            f"alpha: {_NCCL_HWLAT}, NVLink 3.4 us",
        ),
        Link(
            "pcie3", 12e9, alpha_s=5.7e-6, nominal_Bps=32e9,
            nominal_both_directions=True,
            note="PCIe 3.0 x16: 15.75 GB/s each way, GPU to GPU through a switch or the CPU",
            source="NCCL's figure for a Gen3 x16 path, 12 GB/s (src/graph/topo.h PCI_BW); "
            f"alpha: {_NCCL_HWLAT}, PCI 5.7 us",
        ),
        Link(
            "pcie4", 24e9, alpha_s=5.7e-6, nominal_Bps=64e9,
            nominal_both_directions=True,
            note="PCIe 4.0 x16: 31.5 GB/s each way (seed: 64 GB/s, both directions added)",
            source="NCCL models a 16 GT/s x16 path as 24 GB/s (src/graph/topo.cc "
            "kvDictPciGen; 'PCI[24.0]' in the topology log of NVIDIA/nccl-tests#307); "
            "SimAI uses 32 x 0.8 = 25.6 GB/s (aliyun/SimAI astra-sim calbusbw.h "
            f"A100_PCIE_BW); alpha: {_NCCL_HWLAT}, PCI 5.7 us",
        ),
        Link(
            "pcie5", 48e9, alpha_s=5.7e-6, nominal_Bps=128e9,
            nominal_both_directions=True,
            note="PCIe 5.0 x16: 63 GB/s each way; through the CPU root complex 8 GPUs reach "
            "less (28 GB/s busbw on 8x RTX 5090, NVIDIA/nccl#1639)",
            source="NCCL models a 32 GT/s x16 path as 48 GB/s (src/graph/topo.cc "
            "kvDictPciGen); SimAI uses 64 x 0.8 = 51.2 GB/s (aliyun/SimAI calbusbw.h "
            f"H100_PCIE_BW); alpha: {_NCCL_HWLAT}, PCI 5.7 us",
        ),
        Link(
            "ib-hdr", 24e9, alpha_s=14e-6, nominal_Bps=25e9,
            note="InfiniBand HDR, 200 Gb/s per direction, one NIC per GPU (seed: 25 GB/s)",
            source="one HDR NIC reaches 24 GB/s in all_reduce_perf (NVIDIA/nccl#1048); "
            "'DGX-A100 ... 8x200Gbit/s IB cards ... 192GB/s AllReduce BusBW' (NVIDIA/nccl"
            f"#812, quoted in #1576); alpha: {_NCCL_HWLAT}, network 14 us",
        ),
        Link(
            "ib-ndr", 48e9, alpha_s=14e-6, nominal_Bps=50e9,
            note="InfiniBand NDR, 400 Gb/s per direction, one NIC per GPU",
            source="'For NDR @ 400Gbps you should see 46-48GB/s per NIC' (NVIDIA/nccl-tests"
            f"#290); 'CX-7 NICs at NDR rate ... up to 48-49GB/s' (#267); alpha: "
            f"{_NCCL_HWLAT}, network 14 us",
        ),
        Link(
            "roce-100g", 12e9, alpha_s=14e-6, nominal_Bps=12.5e9,
            note="RDMA over Converged Ethernet, 100 Gb/s per direction",
            source="'12.2 GB/s (for a 100Gbps card) is as good as you can get' (NVIDIA/"
            "nccl-tests#29); NCCL models a 100 Gbit NIC as 12 GB/s (src/graph/topo.h NET_BW); "
            f"alpha: {_NCCL_HWLAT}, network 14 us",
        ),
        Link(
            "10gbe", 1.18e9, alpha_s=30e-6, nominal_Bps=1.25e9,
            note="10 Gb Ethernet, TCP sockets (seed: 1.25 GB/s)",
            source="TCP at MTU 1500 carries 1448 payload bytes per 1538 on the wire (94 %, "
            "the ~9.4 Gb/s iperf shows); alpha: 8-byte broadcast between two nodes over NCCL's "
            "socket transport takes 38-46 us (NVIDIA/nccl-tests#82), less NCCL's 8.4 us base",
        ),
        Link(
            "25gbe", 2.94e9, alpha_s=30e-6, nominal_Bps=3.125e9,
            note="25 Gb Ethernet, TCP sockets",
            source="TCP at MTU 1500: 1448 of 1538 wire bytes (94 %); alpha as 10gbe "
            "(NVIDIA/nccl-tests#82)",
        ),
        Link(
            "100gbe", 6e9, alpha_s=30e-6, nominal_Bps=12.5e9,
            note="100 Gb Ethernet, TCP sockets (no RDMA): the socket stack, not the wire, limits",
            source="NCCL all-reduce over 100 Gb/s TCP, 4 nodes x 8 V100: best busbw 4-6 GB/s "
            "(NVIDIA/nccl#450); NCCL over TCP stays under ~60 % of wire speed (NVIDIA/nccl#209); "
            "alpha as 10gbe (NVIDIA/nccl-tests#82)",
        ),
        Link(
            "loopback", 1.3e9, alpha_s=128e-6, nominal_Bps=2.8e9,
            note="gloo over TCP on 127.0.0.1 on the project's 2-core machine",
            source="measured on that machine: gloo all_reduce busbw ~1.3 GB/s at N=2; one "
            "loopback TCP stream ~2.8 GB/s (nominal); a 4 KiB all-reduce at N=2 takes 0.26 ms "
            "= 2 ring steps of 128 us plus 3 us of bandwidth term",
        ),
    )
}

#: MPI between local processes: shared memory (not a ``--link`` preset; the engine's auto
#: prices it for MPI, through :data:`LOCAL_HOSTS`).
SHARED_MEMORY = Link(
    "mpi-shm", 8e9, alpha_s=10e-6, gamma_s_per_byte=0.04e-9,
    note="MPI between local processes (shared memory)",
    source="measured with mpi4py + Open MPI 5 on the project's 2-core machine: 1 MiB "
    "exchange + reduce 140 us, 4 MiB 520 us; numpy float32 add 25 GB/s in cache",
)

#: Local processes on one machine, as one-machine models whose ranks poll: ``loopback`` (gloo
#: over 127.0.0.1) and ``mpi-shm`` (MPI's shared memory), each measured with as many ranks as
#: cores (2) and with twice as many. With more ranks than cores every message waits for a core,
#: so alpha grows about as (N/cores)^2.7 (a 6-step ring all-reduce of 4 KiB: 5 ms at N=4 on 2
#: cores, 0.26 ms for 2 steps at N=2); bandwidth shrinks as (N/cores)^-0.5 over loopback TCP
#: (gloo all-reduce busbw 1.3 GB/s at N=2, 0.9 at N=4) but as (N/cores)^-1 over shared memory,
#: where every byte is a copy by a CPU the ranks share (Open MPI's own all-reduce of 64 MiB:
#: busbw 2.1 GB/s at N=2, 1.1 at N=4); reductions, CPU work too, cost N/cores times more (at
#: N=4 on 2 cores, 1 MiB: recursive doubling 1.5-1.8x Open MPI's time, Rabenseifner
#: 1.35-1.4x).
#: Of the loopback step's 128 us, what each message costs a rank (its post and its wait
#: through the engine's Python and torch's point-to-point call): posting a 2 KiB receive took
#: 45-60 us and a send 25-40 us on 2 gloo ranks on 2 cores (medians of 300 calls, each after
#: a barrier, 2026-12-01, through ProcessGroup.send/recv; posted through the gloo backend
#: since 9b3a2cc, 26-36 and 16-27 us; docs/engine.md). A step of one message each way keeps
#: the measured 128 us; a linear all-to-all's step of N-1 each way costs more than Bruck's.
LOOPBACK_MESSAGE_S = 40e-6
LOCAL_HOSTS: dict[str, HostLink] = {
    "loopback": HostLink.polling(PRESETS["loopback"], 2, Overload(
        latency=2.7, bandwidth=0.5, reduce=1.0,
        source="gloo on 2 cores: 4 KiB ring all-reduce 0.26 ms (2 steps) at N=2, 5 ms (6 steps) "
        "at N=4; all-reduce busbw 1.3 GB/s at N=2, 0.9 GB/s at N=4"),
        message_s=LOOPBACK_MESSAGE_S),
    "mpi-shm": HostLink.polling(SHARED_MEMORY, 2, Overload(
        latency=2.7, bandwidth=1.0, reduce=1.0,
        source="Open MPI 5 on 2 cores: Allreduce of 64 MiB busbw 2.1 GB/s at N=2, 1.1 GB/s at "
        "N=4; latency growth as gloo's")),
}

LinkSpec = Link | Mapping[str, Link]
_CUSTOM_KEYS = "bw (required), lat, reduce, nominal"


def get_link(name: str) -> Link:
    """The preset called ``name`` (case-insensitive); RingtreeError listing the presets."""
    link = PRESETS.get(name.strip().lower())
    if link is None:
        raise RingtreeError(
            f"unknown link {name!r}: expected one of {', '.join(PRESETS)}, "
            "custom:bw=450GB/s,lat=3us or a profile FILE.toml from ringtree calibrate"
        )
    return link


def parse_link(text: str) -> Link:
    """A preset name, ``custom:bw=450GB/s,lat=3us[,reduce=20GB/s][,nominal=900GB/s]``, or a
    profile written by ``ringtree calibrate`` (``FILE.toml`` or ``FILE.toml#NAME``).

    ``bw`` is the effective per-direction bandwidth, ``lat`` the per-step latency (default 0),
    ``reduce`` the reduction throughput (gamma = 1/reduce; default: free), ``nominal`` the
    figure the textbook model uses (default: bw).
    """
    if is_profile_ref(text):
        return load_profile(text)
    if not text.strip().lower().startswith("custom:"):
        return get_link(text)
    fields: dict[str, str] = {}
    for item in text.strip()[len("custom:") :].split(","):
        key, sep, value = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("bw", "lat", "reduce", "nominal") or key in fields:
            raise RingtreeError(
                f"malformed custom link {text!r}: expected custom:bw=450GB/s,lat=3us "
                f"(keys: {_CUSTOM_KEYS})"
            )
        fields[key] = value.strip()
    if "bw" not in fields:
        raise RingtreeError(f"custom link {text!r} needs bw=, e.g. custom:bw=450GB/s,lat=3us")
    bandwidth = parse_bandwidth(fields["bw"])
    return Link(
        name=text.strip(),
        bandwidth_Bps=bandwidth,
        alpha_s=parse_time(fields.get("lat", "0")),
        gamma_s_per_byte=1 / parse_bandwidth(fields["reduce"]) if "reduce" in fields else 0.0,
        nominal_Bps=parse_bandwidth(fields["nominal"]) if "nominal" in fields else None,
        note="custom link from the command line",
        source="the command line",
    )


def parse_links(text: str) -> LinkSpec:
    """One link (``nvlink4``, ``custom:...``) or two levels ``INTRA+INTER``
    (``nvlink4+ib-hdr``: NVLink inside a node, InfiniBand between nodes)."""
    if "+" not in text:
        return parse_link(text)
    parts = text.split("+")
    if len(parts) != 2:
        raise RingtreeError(
            f"malformed link {text!r}: expected one link or INTRA+INTER, e.g. nvlink4+ib-hdr"
        )
    return {INTRA: parse_link(parts[0]), INTER: parse_link(parts[1])}


def link_name(links: LinkSpec) -> str:
    """``"nvlink4"``, or ``"nvlink4+ib-hdr"`` for two levels."""
    if isinstance(links, Link):
        return links.name
    return "+".join(links[level].name for level in (INTRA, INTER) if level in links)


def link_record(link: Link) -> dict[str, object]:
    """A preset as plain data (``ringtree links --json``)."""
    return {
        "name": link.name,
        "nominal_Bps": link.nominal,
        "nominal_both_directions": link.nominal_both_directions,
        "bandwidth_Bps": link.bandwidth_Bps,
        "alpha_s": link.alpha_s,
        "gamma_s_per_byte": link.gamma_s_per_byte,
        "note": link.note,
        "source": link.source,
    }
