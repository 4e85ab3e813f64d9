"""What the names in a Kineto trace mean: collectives, element types, NCCL kernels.

A collective appears under several names, by torch version and backend (read from real
traces: torch 2.13 CPU/gloo made here; HTA's and DeepSeek's published GPU traces, torch
1.13-2.4): the dispatcher op ``c10d::allreduce_`` (``cat: cpu_op``), ``record_param_comms``
(a cpu_op whose args name the collective, sizes, dtype and group on GPU builds since ~2.2),
the backend's annotation ``nccl:all_reduce`` / ``gloo:all_reduce`` (``user_annotation``),
and on GPUs the NCCL kernel ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)`` (NCCL >= 2.19)
or ``ncclKernel_AllReduce_RING_LL_Sum_float(...)`` (older). :func:`collective_of` maps any of
them to one name; :data:`BUFFER` says which argument holds the buffer nccl-tests counts.

NCCL kernel names carry less than they seem to: NCCL instantiates one kernel per collective,
type and *ring or tree* and runs every protocol (and NVLS, CollNet, PAT) through it, so the
``LL`` in a name is the kernel's specialisation, not the protocol that ran (NCCL
src/device/generate.py ``best_kernel``, 2.19+; src/collectives/device/common.h
``IMPL_COLL4``, 2.12-2.18). :func:`nccl_kernel` keeps both and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: point-to-point kinds: a send, a receive, and a kernel of grouped sends and receives
P2P = ("send", "recv", "p2p")

#: normalised name (lower case, no "_") -> collective (ringtree's names, or send / recv)
_KINDS = (
    ("allreduce", "all-reduce"), ("allgather", "all-gather"), ("reducescatter", "reduce-scatter"),
    ("alltoall", "all-to-all"), ("broadcast", "broadcast"), ("reduce", "reduce"),
    ("gather", "gather"), ("scatter", "scatter"), ("barrier", "barrier"), ("send", "send"),
    ("recv", "recv"),
)
_PREFIX = re.compile(r"^(c10d::|nccl:|gloo:|mpi:|ucc:|xccl:|hccl:|rccl:)")


def normalise(name: str) -> str:
    """``c10d::_reduce_scatter_base_`` -> ``reducescatterbase``."""
    return _PREFIX.sub("", name).lower().replace("_", "")


def collective_of(name: str) -> str | None:
    """The collective an op, annotation or ``Collective name`` names (None: not one):
    ``c10d::_allgather_base_`` -> ``all-gather``, ``nccl:all_to_all`` -> ``all-to-all``."""
    key = normalise(name)
    for prefix, kind in _KINDS:
        if key.startswith(prefix):
            return kind
    return None


def is_comm_marker(name: str) -> bool:
    """Whether a host event marks a collective call: a ``c10d::`` op, ``record_param_comms``,
    or a backend annotation (``nccl:``, ``gloo:``, ...) that names a collective."""
    if name == "record_param_comms":
        return True
    return bool(_PREFIX.match(name)) and collective_of(name) is not None


@dataclass(frozen=True)
class Buffer:
    """Where the buffer nccl-tests counts is among a ``c10d::`` op's inputs: argument
    ``arg`` (its numel summed over a tensor list), times the group size when ``per_rank``."""

    arg: int
    per_rank: bool = False


#: c10d op (normalised, trailing "_" dropped) -> its buffer: torch/csrc/distributed/c10d/Ops.cpp
#: signatures; all-gather and reduce-scatter count the whole buffer, as nccl-tests does
BUFFER = {
    "allreduce": Buffer(0), "allreducecoalesced": Buffer(0), "broadcast": Buffer(0),
    "reduce": Buffer(0), "send": Buffer(0), "recv": Buffer(0), "recvanysource": Buffer(0),
    "allgatherbase": Buffer(0), "allgatherintotensorcoalesced": Buffer(0),
    "allgather": Buffer(1, per_rank=True), "allgathercoalesced": Buffer(1, per_rank=True),
    "reducescatterbase": Buffer(1), "reducescattertensorcoalesced": Buffer(1),
    "reducescatter": Buffer(0, per_rank=True),
    "alltoallbase": Buffer(1), "alltoall": Buffer(1),
    "gather": Buffer(1, per_rank=True), "scatter": Buffer(0, per_rank=True),
    "barrier": Buffer(-1),
}


def annotation_buffer(collective: str) -> Buffer:
    """The buffer of a backend annotation (``nccl:all_reduce``, ``gloo:all_gather``): its one
    input, which is the per-rank input of an all-gather (ProcessGroupNCCL/Gloo record the
    input tensors) and the whole input elsewhere."""
    return Buffer(0, per_rank=collective in ("all-gather", "gather"))


#: element type as traces write it -> ringtree's dtype name (torch's record_shapes writes
#: C++ names, record_param_comms c10 ScalarType names, NCCL kernels their own)
_DTYPES = {
    "float": "float32", "double": "float64", "c10::half": "float16", "c10::bfloat16": "bfloat16",
    "long int": "int64", "long": "int64", "int": "int32", "short int": "int16", "short": "int16",
    "signed char": "int8", "char": "int8", "unsigned char": "uint8", "byte": "uint8",
    "bool": "bool", "c10::float8_e4m3fn": "float8_e4m3", "c10::float8_e5m2": "float8_e5m2",
    "float8_e4m3fn": "float8_e4m3", "float8_e5m2": "float8_e5m2", "half": "float16",
    "bfloat16": "bfloat16", "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
    # NCCL kernel suffixes (2.19+: f32, bf16 ...; older: the C type)
    "f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i8": "int8",
    "u8": "uint8", "i32": "int32", "u32": "int32", "i64": "int64", "u64": "int64",
    "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2", "int8_t": "int8", "uint8_t": "uint8",
    "int32_t": "int32", "uint32_t": "int32", "int64_t": "int64", "uint64_t": "int64",
    "__nv_bfloat16": "bfloat16", "__half": "float16",
}


def dtype_of(text: object) -> str | None:
    """ringtree's dtype name for a trace's spelling (None: not an element type, e.g.
    ``TensorList`` or ``Scalar``)."""
    if not isinstance(text, str):
        return None
    return _DTYPES.get(text.strip().lower())


@dataclass(frozen=True)
class NcclKernel:
    """What an NCCL kernel's name says: the collective (``SendRecv`` for grouped p2p), its
    reduction, element type, and the kernel's specialisation (``RING``/``TREE`` and ``LL`` /
    ``SIMPLE``), which is not the protocol that ran (module doc)."""

    collective: str | None
    algorithm: str | None
    protocol: str | None
    dtype: str | None


_PROTOCOLS = ("LL", "LL128", "SIMPLE")


def nccl_kernel(name: str) -> NcclKernel | None:
    """Parse an NCCL kernel name (None: not one): ``ncclDevKernel_<Coll>[_<Op>_<type>]
    [_<ALGO>_<PROTO>]`` (2.19+) or ``ncclKernel_<Coll>_<ALGO>_<PROTO>_<Op>_<type>`` (older).
    ``SendRecv`` (the kernel behind send/recv, all-to-all, gather and scatter) has collective
    None."""
    base = name.split("(")[0].split()[-1] if name.strip() else ""
    parts = base.split("_")
    if len(parts) < 2 or parts[0] not in ("ncclDevKernel", "ncclKernel"):
        return None
    coll, rest = _kernel_collective(parts[1]), parts[2:]
    at = next((i for i, p in enumerate(rest) if p in _PROTOCOLS), None)
    if at is None:
        return NcclKernel(coll, None, None, None)
    if parts[0] == "ncclKernel":  # old: ALGO_PROTO_Op_type
        algo, ty = rest[:at], "_".join(rest[at + 2:])
    else:  # new: [Op_type_]ALGO_PROTO
        algo = [p for p in rest[:at] if p.isupper()]
        ty = next((p for p in rest[:at] if p.islower() or p[0].isdigit()), "")
    return NcclKernel(coll, "_".join(algo) or None, rest[at], dtype_of(ty))


def _kernel_collective(name: str) -> str | None:
    return None if name.lower() in ("sendrecv", "generic", "nop") else collective_of(name)


#: Kernels of communication libraries other than NCCL, by pattern: DeepEP's MoE dispatch and
#: combine, an all-to-all over the expert-parallel group ("high-throughput and low-latency
#: all-to-all GPU kernels, also known as MoE dispatch and combine", github.com/deepseek-ai/DeepEP
#: README; ``deep_ep::`` in the public library, ``dpsk::ep::`` in DeepSeek's published
#: profiles), and its notify kernels (the token counts each rank sends, exchanged first).
OTHER_COMM = re.compile(r"(?:deep_ep|dpsk::ep)::\w+::(dispatch|combine|notify_dispatch|"
                        r"cached_notify)\w*<")
#: HTA's communication kernels: names starting with nccl, hip or hccl, or holding ncclKernel
#: (hta/common/types.py CommunicateKernelGroupingPattern)
_HTA_COMM = re.compile(r"^(nccl|hip|hccl)|ncclKernel")


def comm_kernel(name: str) -> tuple[str, str] | None:
    """``(collective, label)`` of a communication kernel, None for any other kernel. The
    collective is "" where the name does not give it (NCCL's SendRecv, behind send/recv,
    all-to-all, gather and scatter); the label names a non-NCCL kernel (``DeepEP dispatch``)
    and is "" for NCCL's."""
    if _HTA_COMM.search(name):
        k = nccl_kernel(name)
        return ((k.collective or "") if k else ""), ""
    m = OTHER_COMM.search(name)
    if m:
        return "all-to-all", f"DeepEP {m.group(1)}"
    return None
