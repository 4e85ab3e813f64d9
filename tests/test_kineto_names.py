"""Names in traces: collectives under every spelling, element types, NCCL kernel names as
NCCL's generator and older common.h spell them, other libraries' communication kernels."""

import pytest

from ringtree.kineto.names import collective_of, comm_kernel, dtype_of, is_comm_marker, nccl_kernel


@pytest.mark.parametrize(("name", "kind"), [
    ("c10d::allreduce_", "all-reduce"), ("c10d::_allgather_base_", "all-gather"),
    ("c10d::allgather_into_tensor_coalesced_", "all-gather"),
    ("c10d::_reduce_scatter_base_", "reduce-scatter"), ("c10d::alltoall_base_", "all-to-all"),
    ("c10d::broadcast_", "broadcast"), ("c10d::reduce_", "reduce"), ("c10d::barrier", "barrier"),
    ("c10d::send", "send"), ("c10d::recv_", "recv"), ("c10d::gather_", "gather"),
    ("c10d::scatter_", "scatter"), ("nccl:all_to_all", "all-to-all"),
    ("gloo:all_reduce", "all-reduce"), ("nccl:_reduce_scatter_base", "reduce-scatter"),
    ("allreduce", "all-reduce"), ("_allgather_base", "all-gather"), ("wait", None),
    ("aten::add_", None),
])
def test_collective_of(name, kind):
    assert collective_of(name) == kind


def test_comm_markers():
    assert is_comm_marker("record_param_comms") and is_comm_marker("gloo:barrier")
    assert not is_comm_marker("aten::copy_") and not is_comm_marker("nccl:wait_thing_x")


@pytest.mark.parametrize(("text", "dtype"), [
    ("float", "float32"), ("c10::BFloat16", "bfloat16"), ("Float", "float32"),
    ("BFloat16", "bfloat16"), ("long int", "int64"), ("unsigned char", "uint8"),
    ("TensorList", None), ("Scalar", None), (None, None),
])
def test_dtype_of(text, dtype):
    assert dtype_of(text) == dtype


@pytest.mark.parametrize(("name", "want"), [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     ("all-reduce", "RING", "LL", "bfloat16")),
    ("ncclDevKernel_AllReduce_Sum_f32_TREE_LL(ncclDevKernelArgsStorage<4096ul>)",
     ("all-reduce", "TREE", "LL", "float32")),
    ("ncclDevKernel_AllGather_RING_LL(x)", ("all-gather", "RING", "LL", None)),
    ("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(x)",
     ("reduce-scatter", "RING", "LL", "float32")),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", (None, None, None, None)),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
     ("all-reduce", "RING", "LL", "float32")),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     (None, "RING", "SIMPLE", "int8")),
    ("ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*)", ("broadcast", "RING", "LL", "int8")),
])
def test_nccl_kernel_names(name, want):
    k = nccl_kernel(name)
    assert (k.collective, k.algorithm, k.protocol, k.dtype) == want


def test_comm_kernels_as_hta_and_deepep():
    assert comm_kernel("ncclDevKernel_SendRecv(x)") == ("", "")
    assert comm_kernel("void dpsk::ep::internode::combine<false, 8>(int4*)") == \
        ("all-to-all", "DeepEP combine")
    assert comm_kernel("void deep_ep::intranode::dispatch<8>(int)") == \
        ("all-to-all", "DeepEP dispatch")
    assert comm_kernel("void at::native::elementwise_kernel<128, 2>(int)") is None
    assert nccl_kernel("sm90_xmma_gemm_bf16") is None
