"""Local rank processes for ``run``, ``demo``, ``bench`` and ``lab``: beside the engine, not in it.

:mod:`~ringtree.procs.launch` starts N processes on 127.0.0.1 and gathers their results;
:mod:`~ringtree.procs.rank` is the one rank main they all run, to which each command gives a
body; :mod:`~ringtree.procs.native` is the engine's own side of every check (its collectives
and barrier); :mod:`~ringtree.procs.run` is the library behind ``ringtree run``.
"""
