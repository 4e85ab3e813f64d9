"""The cost interpreters: what a collective costs on links or on a cluster as built.

- :mod:`~ringtree.cost.terms`: Terms per level, Link, the counts from a schedule;
- :mod:`~ringtree.cost.forms`: the closed forms, one module per algorithm family;
- :mod:`~ringtree.cost.query`: the Query (checked once) and the Prediction;
- :mod:`~ringtree.cost.models`: the models on links (``textbook``, ``alpha-beta``) and
  ``predict``;
- :mod:`~ringtree.cost.pricer`: the seam every command and the planner price through (a
  collective call, a point-to-point send, an all-to-all on a group of ranks), implemented by
  :mod:`~ringtree.cost.link_pricer` (the models on links) and :mod:`~ringtree.cost.nccl.pricer`
  (the NCCL model on a cluster as built);
- :mod:`~ringtree.cost.host`: processes on one machine (calibrated profiles, the engine's
  presets), :mod:`~ringtree.cost.links` and :mod:`~ringtree.cost.profile`: the links;
- :mod:`~ringtree.cost.select` (auto), :mod:`~ringtree.cost.crossover`,
  :mod:`~ringtree.cost.report`, :mod:`~ringtree.cost.money`: what is built on them.

Nothing here imports torch: ``ringtree cost`` answers in milliseconds.
"""
