"""The ``multiproc`` guard of tests/conftest.py: a test without the marker that starts a
process (subprocess, multiprocessing, a rank from the launcher's fork server) fails before
the process exists; one with it may."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from ringtree.procs.forked import _Server


def test_an_unmarked_test_that_starts_a_process_fails_before_it_starts(tmp_path):
    flag = tmp_path / "ran"
    with pytest.raises(pytest.fail.Exception, match="without @pytest.mark.multiproc"):
        subprocess.run([sys.executable, "-c", f"open({str(flag)!r}, 'w')"], timeout=60)
    with pytest.raises(pytest.fail.Exception, match="without @pytest.mark.multiproc"):
        multiprocessing.get_context("spawn").Process(target=print).start()
    with pytest.raises(pytest.fail.Exception, match="without @pytest.mark.multiproc"):
        _Server.fork(None, ["-m", "ringtree.procs.rank"], {}, str(flag))  # type: ignore[arg-type]
    assert not flag.exists()


@pytest.mark.multiproc
def test_a_marked_test_starts_processes(tmp_path):
    flag = tmp_path / "ran"
    subprocess.run([sys.executable, "-c", f"open({str(flag)!r}, 'w')"], check=True, timeout=60)
    assert flag.exists()
