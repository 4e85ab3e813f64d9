"""What CLI users expect of ``ringtree`` itself: --version, ``python -m ringtree``, py.typed,
errors that point at the subcommand's --help, a bug said in one line, ``demo --json``."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ringtree
from conftest import run_main
from ringtree import cli
from ringtree.cli import main


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ringtree {ringtree.__version__}\n"
    assert ringtree.__version__ == importlib.metadata.version("ringtree")


@pytest.mark.multiproc
def test_python_dash_m_ringtree():
    proc = subprocess.run([sys.executable, "-m", "ringtree", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"ringtree {ringtree.__version__}\n"
    proc = subprocess.run([sys.executable, "-m", "ringtree", "cost", "all-reduce", "-n", "8"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_py_typed_is_shipped():
    assert (Path(ringtree.__file__).parent / "py.typed").is_file()
    files = importlib.metadata.files("ringtree") or []
    editable = any(f.name.endswith(".pth") or "__editable__" in f.name for f in files)
    assert editable or any(f.name == "py.typed" for f in files)


@pytest.mark.parametrize(
    ("argv", "help_of"),
    [
        (["cost", "all-reduce", "-n", "8", "--size", "1MB"], "ringtree cost"),  # from the command
        (["cost", "all-reduce", "-n", "0"], "ringtree cost"),  # from argparse
        (["lab", "ddp", "--bogus"], "ringtree lab ddp"),  # unrecognized, nested
        (["lab", "ddp", "--algorithm", "hierarchical"], "ringtree lab ddp"),
        (["trace", "all-reduce", "-n", "4", "extra"], "ringtree trace"),
        (["fly"], "ringtree"),
    ],
)
def test_errors_point_at_the_subcommands_help(argv, help_of, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ringtree: error: ")
    assert err.endswith(f"(see '{help_of} --help')\n"), err


def test_a_bug_is_one_line_with_status_1(monkeypatch, capsys):
    def broken(args: object) -> int:
        raise KeyError("oops\nsecond line")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["links"].set_defaults(func=broken)  # type: ignore[union-attr]
    assert main(["links"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ringtree: internal error: KeyError: ")
    assert "Traceback" not in err


@pytest.mark.multiproc
@pytest.mark.slow
def test_demo_json(capsys):
    proc = run_main(capsys, "demo", "--json")  # `python -m ringtree`: test_python_dash_m_ringtree
    assert proc.returncode == 0, proc.stderr[-2000:]
    d = json.loads(proc.stdout)
    assert d["run"]["correct"] and d["run"]["n_ranks"] == 4 and d["bytes_sent_match_schedule"]
    assert len(d["trace"]["steps"]) == len(d["predicted_step_s"]) == len(d["measured_step_s"]) == 6
