"""Without PyTorch (``pip install ringtree``, no extras): the commands that need it say how to
install it in one line (exit 2), the others work. Simulated in one subprocess where
``import torch`` fails (``sys.modules["torch"] = None``), so CI needs no second environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.multiproc  # every test here starts processes
LOG = Path(__file__).parent / "data" / "nccl_tests" / "issue290-1x8-h100-one-process.log"
NEEDS_TORCH = [
    ["run", "-n", "2", "all-reduce"],
    ["run", "-n", "2", "all-reduce", "--backend", "nccl"],
    ["demo"],
    ["demo", "--json"],
    ["bench", "-n", "2"],
    ["calibrate", "-n", "2", "-o", "{tmp}/p.toml"],
    ["validate", "-n", "2", "--profile", "{tmp}/p.toml"],
    ["lab", "ddp"],
]
WITHOUT_TORCH = [
    ["cost", "all-reduce", "-n", "8", "--size", "1MB", "--link", "ib-hdr"],
    ["links"],
    ["crossover", "all-reduce", "-n", "8", "--link", "ib-hdr"],
    ["plan", "--model", "7b", "--gpus", "16"],
    ["trace", "all-reduce", "-n", "4"],
    ["profile", str(Path(__file__).parent / "data" / "kineto" / "cpu-3ranks"), "--cluster",
     "dgx-h100"],
    ["--version"],
    ["validate", "--nccl-tests", str(LOG), "--cluster", "dgx-h100"],
    ["calibrate", "--nccl-tests", str(LOG), "--cluster", "dgx-h100", "-o", "{tmp}/c.toml"],
]

# Runs every command in one process that cannot import torch, and prints what each did.
DRIVER = """
import contextlib, io, json, sys
sys.modules["torch"] = None  # import torch -> ImportError, as when it is not installed
from ringtree.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    err, std = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
        code = main(argv)
    out.append({"argv": argv, "code": code, "err": err.getvalue()})
out.append({"torch_imported": sys.modules.get("torch") is not None})
print(json.dumps(out))
"""


def test_without_torch(tmp_path):
    from ringtree.cost.host import HostLink
    from ringtree.cost.profile import link_table, write_profile

    link = HostLink("gloo-2", bandwidth_Bps=1e9, alpha_s=1e-5)
    write_profile(tmp_path / "p.toml", {"links": {"gloo": link_table(link)}})
    cases = [[a.replace("{tmp}", str(tmp_path)) for a in argv]
             for argv in NEEDS_TORCH + WITHOUT_TORCH]
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cases)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    *results, last = json.loads(proc.stdout.splitlines()[-1])
    assert last == {"torch_imported": False}
    for r in results[: len(NEEDS_TORCH)]:
        lines = r["err"].strip().splitlines()
        assert r["code"] == 2 and len(lines) == 1, r
        assert lines[0].startswith("ringtree: error: ") and "Traceback" not in r["err"], r
        assert "needs PyTorch: pip install 'ringtree[torch]'" in lines[0], r
    for r in results[len(NEEDS_TORCH) :]:
        assert r["code"] == 0 and "Traceback" not in r["err"], r
