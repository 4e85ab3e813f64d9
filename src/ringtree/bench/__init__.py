"""Measure, fit and check: ringtree's nccl-tests.

* :mod:`~ringtree.bench.specs`: one small spec per collective (counts, inputs, expected
  result, bus bandwidth factor, the engine's own call);
* :mod:`~ringtree.bench.worker` and :mod:`~ringtree.bench.sweep`: the shared driver, rank
  side and launcher side; :mod:`~ringtree.bench.result` and :mod:`~ringtree.bench.table`:
  the rows, their JSON/CSV twins and nccl-tests' text;
* :mod:`~ringtree.bench.fit`: least-squares fit of the cost model's constants;
  :mod:`~ringtree.bench.validate`: predicted against measured; :mod:`~ringtree.bench.plots`.
"""
