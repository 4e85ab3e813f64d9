"""Measure, fit and check: ringtree's nccl-tests.

* :mod:`~ringtree.measure.specs`: one small spec per collective (counts, inputs, expected
  result, bus bandwidth factor, the engine's own call);
* :mod:`~ringtree.measure.sweep`: what a sweep measures (its cells and lines);
  :mod:`~ringtree.measure.worker` and :mod:`~ringtree.measure.sweep_run`: the shared driver,
  rank side and launcher side; :mod:`~ringtree.measure.result` and :mod:`~ringtree.measure.table`:
  the rows, their JSON/CSV twins and nccl-tests' text;
* :mod:`~ringtree.measure.fit`: least-squares fit of the cost model's constants;
  :mod:`~ringtree.measure.validate`: predicted against measured; :mod:`~ringtree.measure.plots`.
"""
