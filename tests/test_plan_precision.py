"""--precision fp8 as Transformer Engine runs it: FP8 GEMMs on the FP8 peak with their casts
priced by bytes, BF16 attention and LM head, the memory each part keeps; the Blackwell
generation fitted on Megatron-Bridge's B200 row."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringtree.cli import main
from ringtree.cost.clusters import get_cluster
from ringtree.plan.compute import GENERATION, TILE_M, TILE_N, Device, Slice, layer_time
from ringtree.plan.memory import activation_bytes_per_layer, state_memory
from ringtree.plan.model import attention_params, mlp_params
from ringtree.plan.placement import on_cluster
from ringtree.plan.planner import plan
from ringtree.plan.precision import FP8
from ringtree.plan.presets import get_model
from ringtree.plan.record import Training
from ringtree.plan.strategy import Layout

H100 = get_cluster("dgx-h100").gpu
LLAMA3_8B = get_model("llama3-8b")


def _step(precision, model=LLAMA3_8B, cluster="dgx-h100", layout=None, **kw):
    tr = Training(precision=precision, **{"global_batch": 8, "recompute": "selective", **kw})
    lay = layout or Layout("zero3", 8, 1, 1)
    return plan(model, on_cluster(get_cluster(cluster), 1), lay, tr, with_verdict=False)


def test_an_fp8_gemm_runs_at_the_fp8_peak_and_its_casts_move_four_bytes_an_element():
    dev = Device.of(H100, precision=FP8)
    m = n = k = 16384
    waves = math.ceil(m / TILE_M) * math.ceil(n / TILE_N) / 132
    hbm = 3350e9 * 0.8
    want = 2 * m * n * k / (1979e12 * GENERATION["hopper"].fp8_gemm * waves / (waves + 0.5))
    want += 2 * m * n / hbm  # the BF16 output's write after the main loop
    gemm, cast_f, cast_b = dev.linear_s(m, n, k)
    assert gemm == pytest.approx(want + 3e-6, rel=1e-9)
    assert cast_f == pytest.approx(4 * (m * k + k * n) / hbm + 2 * 3e-6, rel=1e-9)
    assert cast_b == pytest.approx(4 * m * n / hbm + 3e-6, rel=1e-9)
    # BF16 has no casts
    assert Device.of(H100).linear_s(m, n, k)[1:] == (0.0, 0.0)


@given(st.integers(2048, 32768), st.integers(2048, 32768), st.sampled_from([256, 1024, 4096]))
def test_an_fp8_gemm_runs_at_k_over_k_plus_k0_of_its_large_k_rate(m, n, k):
    # K0 = the large-K FP8 rate / (HBM x e_mem): on H100 1,979e12 x fp8_gemm / (3,350e9 x 0.8)
    dev = Device.of(H100, precision=FP8)
    rate = 1979e12 * GENERATION["hopper"].fp8_gemm
    k0 = rate / (3350e9 * 0.8)
    waves = math.ceil(m / TILE_M) * math.ceil(n / TILE_N) / 132
    main = 2 * m * n * k / (rate * waves / (waves + 0.5))
    got = dev.gemm_s(m, n, k, fp8=True) - 3e-6
    assert got >= main * (k + k0 * waves / (waves + 0.5)) / k * (1 - 1e-9)
    assert got <= max(main * (k + k0) / k, (m * k + k * n + 2 * m * n) / (3350e9 * 0.8)) * 1.000001


@given(st.integers(4096, 32768), st.integers(4096, 32768), st.integers(4096, 32768))
def test_fp8_is_never_slower_than_bf16_for_gemm_bound_linear_layers(m, n, k):
    fp8, bf16 = Device.of(H100, precision=FP8), Device.of(H100)
    g, cf, cb = fp8.linear_s(m, n, k)
    assert 3 * g + cf + cb <= 3 * bf16.linear_s(m, n, k)[0]


def test_attention_and_the_output_layer_stay_bf16():
    m = LLAMA3_8B
    sl = Slice(8192, 8192, 1, False, 1, "flash")
    fp8, bf16 = (layer_time(m, sl, Device.of(H100, precision=p)) for p in (FP8, "bf16"))
    assert fp8.attention_fwd == bf16.attention_fwd
    assert fp8.forward < bf16.forward and fp8.wgrad < bf16.wgrad


def test_llama3_8b_on_one_h100_node_fp8_is_1_2_to_1_7_times_faster_and_keeps_its_states():
    b, f = _step("bf16"), _step(FP8)
    assert 1.2 <= b.step_time_s / f.step_time_s <= 1.7
    assert f.memory.states >= 0.9 * b.memory.states
    assert f.memory.activations < b.memory.activations


def test_fp8_memory_keeps_master_weights_and_stores_linear_weights_in_one_byte():
    m = LLAMA3_8B
    lay = Layout("zero1", 8, 1, 1)
    linear = 32 * (attention_params(m) + mlp_params(4096, 14336, True))
    wb, gb, ob, xb = state_memory(m, lay)
    wf, gf, of, xf = state_memory(m, lay, precision=FP8)
    assert (gf, of, xf) == (gb, ob, xb)  # fp32 main gradients, master weights, Adam moments
    # Megatron: the linear layers' weights are FP8 parameters (fp8_param_gather)
    assert wb - wf == pytest.approx(linear, abs=2)
    # torchao under FSDP: the BF16 weights stay, the two layers in use get FP8 copies
    wt, _, _, xt = state_memory(m, lay, framework="deepspeed", precision=FP8)
    _, _, _, xd = state_memory(m, lay, framework="deepspeed")
    assert wt == state_memory(m, lay, framework="deepspeed")[0]
    assert xt - xd == pytest.approx(2 * linear / 32, abs=2)
    z3 = Layout("zero3", 8, 1, 1)
    assert state_memory(m, z3)[0] - state_memory(m, z3, precision=FP8)[0] == pytest.approx(
        linear / 8, abs=2)
    s, h, f = 8192, 4096, 14336
    saved = s * (2 * h + f)  # the two norms' outputs and the down projection's input, 1 B less
    got = (activation_bytes_per_layer(m, 1, 1, False, "none", "flash")
           - activation_bytes_per_layer(m, 1, 1, False, "none", "flash", precision=FP8))
    assert got == pytest.approx(saved)


def test_blackwell_is_calibrated_and_reproduces_megatron_bridges_b200_row():
    # DGX-B200, LLAMA3_8B FP8-CS, 8 GPUs, GBS 128, MBS 2, seq 8192: 30,624 tokens/s/GPU
    p = _step(FP8, cluster="dgx-b200", layout=Layout("zero1", 8, 1, 1), global_batch=128,
              micro_batch=2, recompute="none")
    published = 128 * 8192 / (30624 * 8)
    assert p.step_time_s == pytest.approx(published, rel=0.02)
    assert "not calibrated" not in GENERATION["blackwell"].source
    gb200 = _step("bf16", cluster="dgx-gb200-nvl72", layout=Layout("zero1", 72, 1, 1),
                  global_batch=72)
    assert gb200.step_time_s and gb200.mfu < 1


def test_cli_precision_dtype_alias_and_refusal(capsys):
    argv = ["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
            "--global-batch", "8", "--json"]
    assert main([*argv, "--precision", "fp8"]) == 0
    by_precision = json.loads(capsys.readouterr().out)["plans"][0]
    assert main([*argv, "--dtype", "fp8"]) == 0
    by_dtype = json.loads(capsys.readouterr().out)["plans"][0]
    assert by_dtype["step_time_s"] == by_precision["step_time_s"]
    assert main(["plan", "--model", "7b", "--cluster", "dgx-a100", "--nodes", "1",
                 "--precision", "fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "FP8 tensor cores" in err and len(err.splitlines()) == 1


def test_a_gpu_described_in_a_cluster_file(tmp_path, capsys):
    # an H800: an H100 SXM with 8 NVLink links instead of 18; and a GPU from its figures
    h800 = tmp_path / "h800.toml"
    h800.write_text('[cluster]\npreset = "dgx-h100"\ngpu = { preset = "h100-sxm", name = '
                    '"H800 SXM5 80GB", nvlink_links = 8 }\n')
    own = tmp_path / "own.toml"
    own.write_text('[cluster]\npreset = "dgx-h100"\n[cluster.gpu]\nname = "mine"\narch = '
                   '"hopper"\nsm = 90\nmemory_gb = 96\nmemory_bandwidth_gbps = 2400\n'
                   'bf16_dense_tflops = 800\nfp8_dense_tflops = 1600\n')
    argv = ["plan", "--model", "llama3-8b", "--nodes", "1", "--strategy", "zero3",
            "--global-batch", "8", "--json", "--cluster"]
    got = {}
    for name, path in (("h100", "dgx-h100"), ("h800", str(h800)), ("own", str(own))):
        assert main([*argv, path]) == 0
        got[name] = json.loads(capsys.readouterr().out)["plans"][0]
    # the H800's compute is the H100's; its NVLink is 8/18 of it
    assert got["h800"]["compute_s"] == pytest.approx(got["h100"]["compute_s"])
    assert got["own"]["gpu_memory_bytes"] == 96e9
    assert got["own"]["compute_s"] > got["h100"]["compute_s"]  # 800 TFLOP/s, 2.4 TB/s
    bad = tmp_path / "bad.toml"
    bad.write_text('[cluster]\npreset = "dgx-h100"\ngpu = { name = "x" }\n')
    assert main([*argv, str(bad)]) == 2
    assert "the gpu table needs arch" in capsys.readouterr().err


def test_json_says_the_precision(capsys):
    assert main(["plan", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1",
                 "--precision", "fp8", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)["plans"][0]
    assert (p["precision"], p["compile"]) == ("fp8", True)
