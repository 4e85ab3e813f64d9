"""Planning training runs: the collectives of one step of DDP, ZeRO-1/2/3 (FSDP), tensor,
sequence, pipeline, context and expert parallelism and their combinations, timed on a cluster,
what compute hides of them, the step's compute, memory, MFU and dollars, and a search for the
best configuration. Nothing here imports torch.

What is trained: ``model`` (shapes, parameter counts), ``presets``. Where: ``placement``
(links, or a cluster as built, and how many nodes). How it is split: ``strategy``, ``groups``
(where each group sits). What a step does: ``volumes`` (the collectives and their sizes, from
the published formulas), ``flops`` (Megatron-LM's count), ``compute`` (a roofline per kernel),
``step`` (a micro-batch on the busiest stage), ``memory``, ``pipeline`` (schedules). Pricing:
a :class:`ringtree.cost.pricer.Pricer` (alpha-beta on links, or the NCCL model), ``overlap``
and ``exposure`` (what compute hides).
The plan: ``record`` (settings and results), ``planner``, ``verdict``, ``search``,
``calibrate`` (fit the efficiency to a measured step), ``timeline`` and ``picture`` (the step
drawn).
"""
