"""Planning whole training strategies: the collectives of one step of DDP, ZeRO-1/2/3 (FSDP),
tensor and pipeline parallelism and their combinations, timed on a cluster with the cost
model's closed forms, what compute hides of them, and what the rest costs.

Modules: ``model`` (what is trained), ``cluster`` (where), ``strategy`` (how it is split),
``groups`` (where each parallel group sits), ``volumes`` (the collectives and their sizes, from
the published formulas), ``timing`` (one call on one group), ``overlap`` (what compute hides),
``planner`` (a step's plan), ``verdict`` (its one-line summary). Nothing here imports torch.
"""
