"""torchtitan's runs (bench/published_training/torchtitan-*.toml) as the planner takes them:
the pipeline defaults of the commit the 2025 tables name, and the rows that stay outside the
model with what sets them apart (docs/plan.md, "torchtitan on the H100 HBM2e")."""

from __future__ import annotations

#: torchtitan's pipeline defaults at the commit its 2025 tables name (9dec370a,
#: torchtitan/parallelisms/pipelining_utils.py): ``pipeline_parallel_microbatches`` unset
#: (train_configs/llama3_405b.toml does not set it) is ``pipeline_parallel_degree``
#: micro-batches, and ``generate_split_points`` gives a looped schedule (Interleaved 1F1B)
#: 2 stages per rank, a single-stage one (1F1B) 1.
TORCHTITAN_PP = {"interleaved": 2, "single": 1}
#: torchao's float8 rowwise recipe with TP (torchtitan-asynctp-2025): 1.35-1.51x the tensorwise
#: step (8B vanilla TP 3.31 vs 2.42 s, 70B async TP 26.22 vs 17.39 s), slower than BF16; its
#: page says "the low baseline performance of the vanilla TP float8 rowwise training is being
#: addressed" (torchtitan issue 1207). torchao's own rowwise run without TP is 1.14x its
#: tensorwise step (torchao/float8/README.md, Llama3-8b on 8 H100s: 6,768 vs 7,689.5
#: tokens/s), so no rowwise cost that benchmark supports brings these rows within 20 %.
ROWWISE = ("torchao float8 rowwise with TP: 1.35-1.51x the tensorwise step, slower than BF16, "
           "a baseline its page says is being addressed (torchtitan issue 1207), where "
           "torchao's rowwise without TP is 1.14x tensorwise: FP8 priced with per-tensor "
           "scales only, predicted -31 to -42 %")
#: torchtitan's context parallelism of December 2024 (PyTorch's experimental ring attention),
#: torchtitan-perf-2025 Tables 2 and 6: at the same 32,768 tokens per GPU (8B) the step grows
#: 4.48 s from CP 1 to CP 2 (priced 4.28 s), then 17.7 s and 29.2 s for twice and four times
#: that attention work (priced 8.56 s and 17.1 s).
CP = ("torchtitan's context parallelism (Dec 2024, ring attention): the 8B step grows as priced "
      "from CP 1 to CP 2 (4.48 s, priced 4.28 s), then 2.1x and 1.7x the priced growth to CP 4 "
      "and CP 8, the 405B rows (CP across nodes) are off from CP 2 while CP 1 is within 9 %, no "
      "mechanism found: predicted -25 to -38 %")


def torchtitan_stages(r: dict) -> int:
    """Stages per pipeline rank of a torchtitan run (:data:`TORCHTITAN_PP`)."""
    looped = "interleaved" in str(r.get("pipeline_schedule", "")).lower()
    return TORCHTITAN_PP["interleaved" if looped else "single"]


def torchtitan_why(r: dict) -> str | None:
    """Why a torchtitan row stays outside the model (:data:`ROWWISE`, :data:`CP`), or None."""
    if r.get("framework") != "torchtitan":
        return None
    if "rowwise" in str(r.get("precision_label", "")):
        return ROWWISE
    cp = r.get("cp", 1)
    across = r.get("tp", 1) * cp > r.get("gpus_per_node", 8)  # CP ranks on other nodes
    if cp >= 4 or (cp >= 2 and across):
        return CP
    return None
