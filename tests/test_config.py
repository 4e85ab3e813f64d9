"""Configuration: every RINGTREE_* variable validated when read (one line naming it), the
documented table equal to the code's, every API option validated, and the decision log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ringtree import config
from ringtree.errors import RingtreeError
from ringtree.runtime import api, run_ranks

DOCS = Path(__file__).parent.parent / "docs" / "config.md"


def test_every_default_parses():
    for name in config.VARIABLES:
        config.read(name, {})


@pytest.mark.parametrize(("name", "value"), [
    ("RINGTREE_TIMEOUT", "abc"), ("RINGTREE_TIMEOUT", "0"), ("RINGTREE_TIMEOUT", "-3"),
    ("RINGTREE_TIMEOUT", "inf"), ("RINGTREE_TIMEOUT", "nan"), ("RINGTREE_SLICE_BYTES", "abc"),
    ("RINGTREE_SLICE_BYTES", "10"), ("RINGTREE_SLICE_BYTES", "4GiB"), ("RINGTREE_CHECK", "maybe"),
    ("RINGTREE_DEBUG", "LOUD"), ("RINGTREE_DUPLEX", "2"), ("RINGTREE_THREADS", "all"),
])
def test_a_bad_value_is_one_line_naming_the_variable(name, value):
    with pytest.raises(RingtreeError) as e:
        config.read(name, {name: value})
    msg = str(e.value)
    assert msg.startswith(f"{name}={value!r} is not valid: expected") and "\n" not in msg


def test_values_read_as_documented():
    env = {"RINGTREE_TIMEOUT": "2.5", "RINGTREE_SLICE_BYTES": "64KiB", "RINGTREE_CHECK": "1",
           "RINGTREE_DEBUG": "info", "RINGTREE_DUPLEX": "off"}
    got = {name: config.read(name, env) for name in env}
    assert got == {"RINGTREE_TIMEOUT": 2.5, "RINGTREE_SLICE_BYTES": 65536,
                   "RINGTREE_CHECK": "always", "RINGTREE_DEBUG": "INFO",
                   "RINGTREE_DUPLEX": False}


def test_the_documented_table_is_the_code_s():
    rows = re.findall(r"^\| `(RINGTREE_\w+)` \| `?([^|`]*?)`? *\|", DOCS.read_text(), re.M)
    assert dict(rows) == {v.name: v.default for v in config.VARIABLES.values()}


def test_the_engine_reports_a_bad_variable_in_one_line(monkeypatch):
    monkeypatch.setenv("RINGTREE_TIMEOUT", "abc")

    def body(t):
        with pytest.raises(RingtreeError, match=r"^RINGTREE_TIMEOUT='abc' is not valid"):
            api.all_reduce(np.ones(4), group=t)
        return t.messages_sent

    assert run_ranks(2, body) == [0, 0]


@pytest.mark.parametrize(("options", "says"), [
    ({"slice_bytes": -5}, "slice_bytes must be"), ({"n_chunks": 0}, "n_chunks must be"),
    ({"algorithm": None}, "algorithm must be a name"), ({"check": "maybe"}, "check must be"),
    ({"timeout": 0}, "timeout must be > 0"), ({"timeout": "5"}, "timeout must be seconds"),
    ({"ranks_per_node": 1.5}, "ranks_per_node must be"), ({"colour": 1}, "unknown option"),
    ({"algorithm": "warp"}, "unknown algorithm 'warp'"),
])
def test_bad_options_are_one_line_errors_before_any_message(options, says):
    def body(t):
        with pytest.raises(RingtreeError) as e:
            api.all_reduce(np.ones(4), group=t, **{"check": False, **options})
        assert says in str(e.value) and "\n" not in str(e.value)
        return t.messages_sent

    assert run_ranks(2, body) == [0, 0]


SCRIPT = """
import numpy as np
from ringtree.runtime import api, run_ranks
def body(t):
    api.all_reduce(np.ones(262144, dtype=np.float32), group=t)
    api.all_reduce(np.ones(262144, dtype=np.float32), group=t)  # same shape: no new line
    api.broadcast(np.ones(10), src=1, group=t, algorithm="tree")
run_ranks(2, body)
"""


@pytest.mark.multiproc
def test_the_decision_log_names_the_algorithm_and_its_predicted_time(tmp_path):
    env = {**os.environ, "RINGTREE_DEBUG": "INFO", "RINGTREE_DEBUG_FILE": str(tmp_path / "log.%p")}
    subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True, timeout=60)
    (log,) = tmp_path.iterdir()
    lines = log.read_text().splitlines()
    assert len(lines) == 4, lines  # two ranks x two call shapes
    ar = [ln for ln in lines if "all-reduce of 262144 float32" in ln]
    assert len(ar) == 2 and {ln.split("[")[1].split("]")[0] for ln in ar} == {"0", "1"}
    assert all(" ringtree INFO " in ln for ln in lines)
    assert re.search(r"algorithm \w+ \(auto, lowest predicted time: \w+ [\d.]+ [mu]?s", ar[0])
    assert any("algorithm tree (asked for by the caller)" in ln for ln in lines)


@pytest.mark.multiproc
def test_without_the_variable_nothing_is_logged():
    env = {k: v for k, v in os.environ.items() if not k.startswith("RINGTREE_DEBUG")}
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stderr == ""
