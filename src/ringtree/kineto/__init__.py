"""Read a real run: torch.profiler (Kineto) traces in, every collective set against the cost
model, each step split into compute, exposed communication and idle.

:mod:`~ringtree.kineto.reader` streams a trace file; :mod:`~ringtree.kineto.events` sorts its
events; :mod:`~ringtree.kineto.link` makes the calls; :mod:`~ringtree.kineto.rank` one rank's
trace, :mod:`~ringtree.kineto.load` a run (with :mod:`~ringtree.kineto.groups`);
:mod:`~ringtree.kineto.instances`, :mod:`~ringtree.kineto.split`,
:mod:`~ringtree.kineto.report`, :mod:`~ringtree.kineto.whatif` and
:mod:`~ringtree.kineto.chrome` what ``ringtree profile`` prints and writes;
:mod:`~ringtree.kineto.pricing` the one place it asks a cost model.
"""
