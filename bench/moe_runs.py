"""The mixture-of-experts rows of bench/published_training that stay outside the model, each
with the mechanism missing and its measured errors (docs/plan.md, "Mixture of experts")."""

from __future__ import annotations

#: Host-bound MoE rows (module doc of ringtree.plan.moe): Megatron-Core's all-to-all dispatcher
#: copies the per-expert token counts to the host in every layer's forward
#: (megatron/core/transformer/moe/token_dispatcher.py, ``_maybe_dtoh_and_synchronize``, at
#: NVIDIA/Megatron-LM d98e8a64), so with little GPU work per layer the host's kernel launches
#: set the pace; Megatron-Bridge's GB200 recipes capture CUDA graphs of the attention, router
#: and dispatch preprocessing (scripts/performance/configs/qwen/qwen3_workload_base_configs.py
#: at cfeddcd9), its B200 235B ones do not.
HOST_BOUND = ("host-bound: Qwen3 MoE at micro-batch 1 on DGX-B200 (x86 host, no CUDA graphs in "
              "the 235B recipe; the dispatcher's per-layer device-to-host sync exposes the "
              "launches) and the planner has no host time: 30B predicted -64 to -65 %, 235B -23 "
              "to -33 %; the 30B row at MBS 4 on the same system (26.04) runs 2.8x the tokens/s")
PIPELINED_HOST = ("host-bound: Qwen3-30B-A3B on H100 interleaved in chunks of 1-2 layers (pp=2, "
                  "vp=12-24) runs 0.57x the tokens/s of the same model without a pipeline (26.04: "
                  "8,901 vs 5,113-5,275); per-chunk host and launch time is not priced: "
                  "predicted -53 to -56 %")
GPT_OSS = ("GPT-OSS's attention sinks, expert biases and clamped SwiGLU (unfused element-wise "
           "kernels) are not priced: Megatron-Bridge rows predicted -41 to +6 %")
BLACKWELL_BF16 = ("BF16 on Blackwell is not calibrated (e_gemm tied to FP8's by Hopper's ratio): "
                  "the MoE rows in BF16 on GB200 predicted +16 % (Qwen3-235B) and +42 % "
                  "(DeepSeek-V3); a BF16 e_gemm fitted on the Qwen3 row (0.65 for 0.50) leaves "
                  "DeepSeek-V3 at +21 % and takes the GPT-OSS BF16 rows, already too fast, from "
                  "-18..-43 % to -23..-47 %: no one BF16 rate fits them")
FOLDED_A2A = ("Qwen3-235B on 256 H100 with ep=32 folded over tp=2 x 16 data-parallel ranks (etp=1) "
              "and the recipe's moe_a2a_overlap: predicted -23 to -27 % with the four-node "
              "all-to-alls wholly behind the other micro-batch's pass (ep_overlap), +27 to +35 % "
              "with them exposed; how much of them that overlap hides is not modelled")
OLD_CONTAINER = ("the 25.11 container: the same GB200 Qwen3-30B row runs 10 % faster in 26.02 and "
                 "26.04 (10.05, 10.07 s vs 11.03 s); predicted -26 %")
