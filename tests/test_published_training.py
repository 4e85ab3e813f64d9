"""bench/published_training/*.toml as data: every file parses and cites its source, every
derived figure follows from the printed ones (recomputed here by each file's stated formula),
and bench/published_runs.py reads each field as the files state it."""

from __future__ import annotations

import importlib.util
import math
import sys
import tomllib
from pathlib import Path

import pytest

from ringtree.plan.compute import GENERATION
from ringtree.plan.strategy import parse_strategy

BENCH = Path(__file__).resolve().parents[1] / "bench"
DATA = BENCH / "published_training"
FILES = sorted(DATA.glob("*.toml"))
sys.path.insert(0, str(BENCH))
import published_runs as pr  # noqa: E402
import torchtitan_runs as tt  # noqa: E402

pytestmark = pytest.mark.slow  # heavy: out of `make test-fast`, in `make test`

#: The files added for issue 28: their runs must also state precision and framework.
NEW = ("llm-foundry-mpt", "megatron-bridge-25.11-perf", "megatron-bridge-26.02-perf",
       "megatron-bridge-26.04-perf", "nemo-automodel-perf", "nemo-long-context",
       "torchtitan-asynctp-2025",
       "torchtitan-h200-trainy", "torchtitan-perf-2024", "torchtitan-perf-2025")


def _runs(path: Path) -> list[dict]:
    return tomllib.loads(path.read_text()).get("runs", [])


def _all_runs() -> list[tuple[str, dict]]:
    return [(p.stem, r) for p in FILES for r in _runs(p)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_parses_and_cites_its_source(path):
    d = tomllib.loads(path.read_text())
    src = d["source"]
    assert src["url"].startswith("https://"), path.stem
    for key in ("title", "where", "retrieved", "read_via", "notes"):
        assert src.get(key), (path.stem, key)
    names = [r["name"] for r in d.get("runs", [])]
    assert len(names) == len(set(names)), f"{path.stem}: run names repeat"
    if path.stem != "activation_memory":
        assert src["name"] == path.stem


def test_the_new_sources_are_there():
    stems = {p.stem for p in FILES}
    assert set(NEW) <= stems
    assert sum(len(_runs(DATA / f"{s}.toml")) for s in NEW) >= 150 + 3  # 3 were on main


def _tokens_time(r: dict) -> float | None:
    """A step from tokens per step over tokens per second: the printed whole-job rate
    (llm-foundry), else per GPU times GPUs (NeMo, Megatron-Bridge, torchtitan)."""
    if "tokens_per_s" in r and "global_batch_tokens" in r:
        return r["global_batch_tokens"] / r["tokens_per_s"]
    if "tokens_per_s_per_gpu" in r:
        batch = r.get("global_batch", r.get("derived_global_batch"))
        return batch * r["seq_len"] / (r["tokens_per_s_per_gpu"] * r["gpus"])
    return None


def _narayanan_time(r: dict) -> float:
    """Narayanan et al. 2021 eq. 3: F = 96 B s l h^2 (1 + s/6h + V/16lh) over TFLOP/s * GPUs."""
    b, s, ll, h, v = r["global_batch"], r["seq_len"], r["layers"], r["hidden"], r["vocab"]
    f = 96 * b * s * ll * h * h * (1 + s / (6 * h) + v / (16 * ll * h))
    return f / (r["tflops_per_gpu"] * 1e12 * r["gpus"])


def test_derived_iteration_times_follow_from_the_printed_figures():
    checked = 0
    for source, r in _all_runs():
        if "derived_iteration_time_s" not in r:
            continue
        want = _tokens_time(r)
        if want is None and source == "narayanan2021":
            want = _narayanan_time(r)
        if want is None:
            continue  # a FLOP-count derivation the file's notes name (Megatron-LM README)
        # stored to 3-5 significant figures: within the last printed digit
        assert r["derived_iteration_time_s"] == pytest.approx(want, rel=6e-3), (source, r["name"])
        checked += 1
    assert checked >= 340


def test_printed_step_times_agree_with_printed_throughputs():
    seen = 0
    for _, r in _all_runs():
        if "iteration_time_s" in r and _tokens_time(r) is not None:
            assert r["iteration_time_s"] == pytest.approx(_tokens_time(r), rel=3e-3), r["name"]
            seen += 1
    assert seen >= 6


def test_derived_batches_and_ffn_follow_the_stated_rules():
    seen = 0
    for _, r in _all_runs():
        if "derived_global_batch" in r:
            assert r["derived_global_batch"] == r["local_batch"] * r["fsdp_degree"], r["name"]
            seen += 1
        if "derived_ffn" in r:  # torchtitan's FeedForward: 2/3 of 4h, times the multiplier,
            h = int(2 * 4 * r["hidden"] / 3)  # rounded up to a multiple
            h = int(r.get("ffn_dim_multiplier", 1) * h) if "ffn_dim_multiplier" in r else h
            m = r["multiple_of"]
            assert r["derived_ffn"] == m * math.ceil(h / m), r["name"]
            seen += 1
    assert seen >= 60


def test_the_llama_ffn_rule_gives_meta_s_sizes():
    # Llama 3 paper Table 3: 14,336 / 28,672 / 53,248; Llama 2 13B: 13,824 (its config)
    got = {(r["hidden"], r["derived_ffn"]) for s, r in _all_runs() if "derived_ffn" in r}
    assert got == {(4096, 14336), (8192, 28672), (16384, 53248), (5120, 13824)}


@pytest.mark.parametrize("source", NEW)
def test_new_runs_state_precision_framework_and_a_known_gpu(source):
    for r in _runs(DATA / f"{source}.toml"):
        assert r["precision"].split()[0] in ("bf16", "fp8"), r["name"]
        label = str(r.get("precision_label", "")).lower()
        if pr.precision(r) == "fp8":  # FP8-CS, MXFP8, amp_fp8, Float8, float8 rowwise, ...
            assert "8" in label, (r["name"], label)
        else:  # BF16, amp_bf16, None (bfloat16), not stated (torchtitan's default bfloat16)
            assert "16" in label or "none" in label, (r["name"], label)
        assert r.get("framework") or source.startswith("megatron-bridge"), r["name"]
        pr.cluster(source, r)  # a preset exists for its GPU
        if r.get("ep", 1) > 1:
            assert r["experts"] % r["ep"] == 0 and r["top_k"] >= 1, r["name"]
        assert r["gpus"] == (r.get("tp", 1) * r.get("pp", 1) * r.get("cp", 1)
                             * pr.dp_degree(r)), r["name"]


def test_each_field_is_read_as_stated():
    assert pr.precision({"precision": "fp8 (FP8-CS)"}) == "fp8"
    assert pr.precision({"precision": "mixed-16bit"}) == "mixed-16bit"
    assert pr.precision({}) == "mixed-16bit"
    qwen = {"gpus": 256, "tp": 2, "pp": 8, "ep": 32, "virtual_stages": 4}
    assert pr.strategy("megatron-bridge-26.04-perf", qwen) == "ddp,tp=2,pp=8,v=4,ep=32"
    assert "ep=32 spans" in pr.outside("x", {**qwen, "seq_len": 4096, "experts": 128})
    fsdp = {"gpus": 256, "tp": 8, "fsdp": True, "fsdp_label": "8"}
    assert pr.strategy("t", fsdp) == "zero3,tp=8,shard=8"  # 32 replicas, groups of 8: HSDP
    assert pr.strategy("t", {"gpus": 64, "fsdp": True, "fsdp_label": "64"}) == "zero3"
    assert pr.flavors("x", {"zero": 2}) == ["zero2"]
    assert pr.flavors("x", {}) == ["ddp", "zero1"]
    assert pr.global_batch({"global_batch_tokens": 8388608, "seq_len": 2048}) == 4096
    assert pr.micro_batches({"local_batch": 16}) == [16]
    # torchtitan's default of pp micro-batches (9dec370a): 32 sequences in 8 of 4
    assert pr.micro_batches({"local_batch": 32, "pp": 8}) == [4]
    assert pr.micro_batches({"pp": 8}) == [1, 2, 4, 8]
    assert tt.torchtitan_stages({"pipeline_schedule": "Interleaved 1F1B"}) == 2  # 9dec370a
    assert tt.torchtitan_stages({"pipeline_schedule": "1F1B"}) == 1
    assert pr.framework("bloom176b", {}) == "deepspeed"
    assert pr.planner_framework("torchtitan") == "fsdp"
    assert pr.planner_framework("llm-foundry") == "fsdp"
    assert pr.planner_framework("megatron-bridge") == "megatron"
    assert pr.ERA["llm-foundry-mpt"][0] == "triton"  # attn_impl: triton


def test_torchtitan_rows_outside_name_their_reason():
    base = {"framework": "torchtitan", "seq_len": 8192, "gpus_per_node": 8}
    assert tt.torchtitan_why({**base, "precision_label": "float8 rowwise"}) == tt.ROWWISE
    assert tt.torchtitan_why({**base, "precision_label": "float8 tensorwise"}) is None
    assert tt.torchtitan_why({**base, "cp": 2}) is None  # 8B, CP 2 in one node: priced
    assert tt.torchtitan_why({**base, "cp": 4}) == tt.CP
    assert tt.torchtitan_why({**base, "cp": 2, "tp": 8}) == tt.CP  # CP ranks on other nodes
    assert tt.torchtitan_why({**base, "framework": "megatron", "cp": 8}) is None
    # the H100 HBM2e part has a preset: no run is outside for its GPU any more
    assert not any("no GPU preset" in (pr.outside(s, r) or "") for s, r in _all_runs())


def test_placements_keep_every_gpu():
    for source, r in _all_runs():
        if pr.left_out(source, r) is None:
            p = pr.placement(source, r)
            assert p.gpus == r["gpus"], (source, r["name"])
    small = pr.placement("x", {"gpu": "B200", "gpus": 2, "gpus_per_node": 8})
    assert (small.nodes, small.gpus_per_node) == (1, 2)
    rack = pr.placement("x", {"gpu": "GB200", "gpus": 256, "gpus_per_node": 4})
    assert (rack.nodes, rack.gpus_per_node) == (4, 64)
    hbm2e = pr.placement("x", {"gpu": "H100-HBM2e-96GB", "gpus": 8})
    assert hbm2e.gpu_memory_bytes == 96 * 10**9
    assert hbm2e.cluster.gpu.key == "h100-hbm2e-96gb"  # Meta's 500 W part, not the SXM's
    assert hbm2e.cluster.gpu.memory_bandwidth_GBps == 2400  # torchtitan: 2.4 TB/s
    old = pr.placement("x", {"gpu": "H100-HBM2e-95GB", "gpus": 128})  # the 2024 page's
    assert old.cluster.gpu.key == "h100-hbm2e-96gb" and old.gpu_memory_bytes == 95 * 10**9
    assert pr.placement("x", {"gpu": "H100-SXM-80GB", "gpus": 8}).cluster.gpu.key == "h100-sxm"
    h200 = pr.placement("x", {"gpu": "H200", "gpus": 32, "gpus_per_node": 8})
    assert h200.gpu_memory_bytes == 141 * 10**9 and h200.nodes == 4


@pytest.fixture(scope="module")
def comparison():
    script = BENCH / "plan_vs_published.py"
    spec = importlib.util.spec_from_file_location("plan_vs_published", script)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    runs, skipped = mod.load()
    return mod, mod.compare(runs, skipped, dict(GENERATION))


def test_the_comparison_keeps_issue_28s_contract(comparison):
    mod, doc = comparison
    counted, left = doc["runs"], doc["left_out_runs"]
    assert len(counted) + len(left) == len(_all_runs()) and doc["left_out"] == len(left)
    for r in counted:
        assert {"source", "name", "fit", "precision", "strategy", "error"} <= set(r)
        assert isinstance(r["fit"], bool) and r["fit"] == (
            mod.CALIBRATION.get(r["gpu"]) == (r["source"], r["name"])
            or (r["source"], r["name"]) in mod.FITTED)
        parse_strategy(r["strategy"])  # spelled as ringtree plan --strategy takes it
    named = set(mod.CALIBRATION.values()) | mod.FITTED  # fitted on: counted unless outside
    assert {(r["source"], r["name"]) for r in counted if r["fit"]} == named - {
        (r["source"], r["name"]) for r in left}
    errs = [abs(r["error"]) for r in counted]
    check = [abs(r["error"]) for r in counted if not r["fit"]]
    assert doc["mean_abs_error"] == pytest.approx(sum(errs) / len(errs))
    assert doc["check_mean_abs_error"] == pytest.approx(sum(check) / len(check))
    assert doc["max_abs_error"] == max(errs)
    assert all(r["why"] for r in left)
    assert sum(doc["sources"][s]["left_out"] for s in doc["sources"]) == len(left)
    assert not set(doc["ran_but_predicted_not_to_fit"]) & {r["name"] for r in counted
                                                           if r.get("fits")}
    peaks = doc["peak_memory"]  # torchtitan's GiB against the plan's bytes / 2^30
    assert len(peaks) == sum("memory_gib" in r for _, r in _all_runs())
    for m in peaks:
        assert m["error"] == pytest.approx(m["predicted_gib"] / m["published_gib"] - 1)


def test_fp8_moe_blackwell_and_long_runs_are_counted(comparison):
    """The planner prices FP8 GEMMs, MoE layers, Blackwell and attention by sequence: those
    runs are counted (or outside for another reason, never for these)."""
    _, doc = comparison
    for r in doc["left_out_runs"]:
        assert not any(w in r["why"] for w in ("FP8:", "mixture of experts: the MoE",
                                               "Blackwell:", "16k tokens or more")), r["name"]
    counted = doc["runs"]
    assert sum(r["precision"] == "fp8" for r in counted) >= 15
    assert sum("ep=" in r["strategy"] and "ep=1," not in r["strategy"] for r in counted) >= 6
    assert sum(r["gpu"] == "blackwell" for r in counted) >= 10


def test_count_lifts_only_the_named_reasons(comparison):
    mod, doc = comparison
    assert mod.lift("FP8: x | torch.compile's y", ("FP8",)) == "torch.compile's y"
    assert mod.lift("a; b | c", ("c",)) == "a; b"  # a reason may hold "; "
    assert mod.lift("FP8: x", ("FP8",)) is None and mod.lift(None, ()) is None
    runs, skipped = mod.load()
    alone = doc["outside_for_one_reason"]
    reason, window = max(alone.items(), key=lambda kv: kv[1]["runs"])  # the commonest
    lifted = mod.compare(runs, skipped, dict(GENERATION), (reason,))
    # the runs outside for that reason alone, and only they, join the counted ones
    assert lifted["counted"] == doc["counted"] + window["runs"]
    assert lifted["left_out"] == doc["left_out"] - window["runs"]


def test_each_unexplained_run_exists_and_is_shown_with_its_error(comparison):
    _, doc = comparison
    shown = {(r["source"], r["name"]): r for r in doc["left_out_runs"]}
    for key, err in pr.UNEXPLAINED.items():
        r = shown[key]  # a run of the data, shown outside the model
        assert r["why"].endswith(f"(predicted {err})")
        assert r.get("error") is not None and f"{r['error']:+.0%}" == err.replace(" ", "")


def test_a_reason_is_one_entry_of_the_histogram(comparison):
    """Reasons join with " | ", so one holding "; " (the host-bound rows') counts whole."""
    _, doc = comparison
    hist = doc["left_out_by_reason"]
    assert hist.get(pr.HOST_BOUND) == sum(r["why"] == pr.HOST_BOUND for r in doc["left_out_runs"])
    assert hist[pr.HOST_BOUND] >= 1 and not any(k.startswith(" ") for k in hist)
    assert sum(hist.values()) == sum(len(r["why"].split(pr.SEP)) for r in doc["left_out_runs"])


def test_megascale_rows_are_counted_with_its_stated_changes(comparison):
    """MegaScale (Jiang et al. 2024, Table 2): planned with its parallel block and its overlaps;
    its 8 rows counted beside the 9 Megatron-LM baselines, every one of them within 10 %."""
    _, doc = comparison
    rows = [r for r in doc["runs"] if r["source"] == "megascale2024"]
    assert sum(r["name"].startswith("megascale-") for r in rows) == 8 and len(rows) == 17
    assert all(abs(r["error"]) < 0.10 for r in rows if r["name"].startswith("megascale-"))
    assert not any(r["source"] == "megascale2024" for r in doc["left_out_runs"])
    data = next(r for _, r in _all_runs() if r["name"] == "megascale-175b-256gpu-bs768")
    assert pr.model("megascale2024", data).parallel_block
    base = next(r for _, r in _all_runs() if r["name"] == "megatron-lm-175b-256gpu-bs768")
    assert not pr.model("megascale2024", base).parallel_block
    assert pr.SYSTEMS["megascale"]["tp_comm_overlap"] and "megatron-lm" not in pr.SYSTEMS


def test_qwen3_235b_h100_rows_are_planned_folded_and_shown_with_both_bounds(comparison):
    """The recipe's expert_tensor_parallel_size=1 folds ep=32 over tp=2 x 16 dp ranks; the
    rows are planned so (etp=1) and shown outside, their error between the all-to-alls hidden
    (the recipe's moe_a2a_overlap, as planned) and exposed."""
    _, doc = comparison
    rows = [r for r in doc["left_out_runs"] if r["why"] == pr.FOLDED_A2A]
    assert len(rows) == 3
    for r in rows:
        assert "ep=32,etp=1" in r["strategy"] and -0.28 <= r["error"] <= -0.22
    assert not any("spans tensor- and data-parallel" in r["why"] for r in doc["left_out_runs"])
    data = {"tp": 2, "pp": 8, "gpus": 256, "ep": 32, "etp": 1}
    assert (pr.folded_etp(data), pr.expert_degree(data)) == (1, 32)
    assert pr.expert_degree({**data, "etp": None}) == 1  # unstated: not foldable
