"""The HTML page: panels and data embedded; in headless Chromium (where installed) it loads,
reports its step count, and shows the step named in the URL with that step's transfers."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
from html.parser import HTMLParser

import pytest

from ringtree.algorithms import build
from ringtree.collectives import Collective
from ringtree.schedule import Schedule, Step, Transfer
from ringtree.trace.html import schedule_html, write_html
from ringtree.trace.steps import trace_data

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (CI installs it: apt-get install chromium)"
)


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.panels, self.scripts, self._in = [], {}, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and (a.get("class") or "").startswith("panel"):
            self.panels.append(a)
        if tag == "script":
            self._in = a.get("id", "")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None

    def handle_data(self, data):
        if self._in is not None:
            self.scripts[self._in] = self.scripts.get(self._in, "") + data


def test_page_embeds_a_panel_per_step_and_the_trace_data():
    s = build("all-reduce", "ring", 5)
    page = _Page()
    page.feed(schedule_html(s, 1000, 4))
    assert [p["data-step"] for p in page.panels] == [str(k) for k in range(s.n_steps + 1)]
    assert json.loads(page.scripts["ringtree-data"]) == trace_data(s, 1000, 4)


def test_data_cannot_close_the_script_element():
    step = Step((Transfer(0, 1, 0), Transfer(1, 0, 1)), "</script>")
    s = Schedule(Collective.ALL_GATHER, "x</script><b>", 2, 2, (step,), n_blocks=2)
    page = _Page()
    page.feed(schedule_html(s, 10, 4))
    assert json.loads(page.scripts["ringtree-data"])["steps"][0]["phase"] == "</script>"


def dump_dom(url, profile):
    """The DOM after load, from headless Chromium (its whole process group ended after)."""
    proc = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", url],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return out


@pytest.mark.multiproc
@needs_chromium
def test_page_steps_through_the_schedule_in_chromium(tmp_path):
    s = build("all-reduce", "ring", 4)
    path = tmp_path / "ring.html"
    write_html(str(path), s, (1 << 20) // 4, 4)  # 1 MiB of fp32: 262 KB per chunk
    dom = dump_dom(f"file://{path}#3", tmp_path / "profile")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert 'data-steps="6"' in body and 'data-step="3"' in body
    assert re.search(r'id="counter">step 3 of 6<', dom)
    assert re.findall(r"<li>(.*?)</li>", dom) == [
        f"rank {i} → rank {(i + 1) % 4}: chunk {(i - 2) % 4}, reduce, 262 KB" for i in range(4)
    ]
    # only the panel of step 3 is shown
    shown = re.findall(r'<svg[^>]*class="panel[^"]*"[^>]*data-step="(\d+)"(?![^>]*none)', dom)
    assert shown == ["3"]
    # a step past the end shows the last one, with Next disabled
    dom = dump_dom(f"file://{path}#99", tmp_path / "profile")
    assert 'data-step="6"' in re.search(r"<body([^>]*)>", dom).group(1)
    assert re.search(r'<button id="next"[^>]*disabled', dom)
    assert not re.search(r'<button id="prev"[^>]*disabled', dom)
