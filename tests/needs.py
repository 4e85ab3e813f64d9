"""What the machine offers the process tests: MPI (mpi4py and an mpirun)."""

from __future__ import annotations

import os


def have_mpi() -> bool:
    """Whether mpi4py imports and an MPI launcher is found."""
    try:
        import mpi4py  # noqa: F401

        from ringtree.procs.launch import mpirun_path

        mpirun_path()
        return True
    except Exception:  # noqa: BLE001
        return False


#: Skip the MPI tests without MPI, unless RINGTREE_REQUIRE_MPI=1 makes them fail instead (CI).
MPI_MISSING = not have_mpi() and os.environ.get("RINGTREE_REQUIRE_MPI") != "1"
