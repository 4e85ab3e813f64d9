"""A self-contained HTML page that steps through a Schedule: one inline SVG panel per step
(:mod:`ringtree.trace.svg`), Previous/Next buttons (and the arrow keys), a step counter, and
the step's transfers in words from the embedded trace data (:func:`trace_data`).

No network, no library: a few lines of vanilla JavaScript. After load the ``<body>`` carries
``data-steps`` (the schedule's steps) and ``data-step`` (the step shown, 0 = before step 1);
``page.html#3`` opens at step 3.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET

from ringtree.schedule import Schedule
from ringtree.trace.files import write_text
from ringtree.trace.steps import trace_data
from ringtree.trace.svg import legend_svg, schedule_title, step_panels
from ringtree.units import format_bytes

_STYLE = """
body { font-family: Helvetica, Arial, sans-serif; color: #222; margin: 24px; background: #fcfcfc; }
h1 { font-size: 20px; margin: 0 0 4px; }
.sub { color: #666; margin: 0 0 14px; }
.controls { display: flex; gap: 12px; align-items: center; margin: 0 0 12px; }
button { font-size: 15px; padding: 6px 14px; border-radius: 6px; border: 1px solid #999;
         background: white; cursor: pointer; }
button:disabled { opacity: .4; cursor: default; }
#counter { font-weight: bold; min-width: 11em; }
.stage { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }
#panels svg.panel { width: min(92vw, 600px); height: auto; }
svg.legend { display: block; margin-top: 16px; }
#transfers { font-family: Menlo, Consolas, monospace; font-size: 13px; padding-left: 28px;
             margin: 8px 0; }
"""

_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById("ringtree-data").textContent);
  const panels = Array.from(document.querySelectorAll("svg.panel"));
  const n = data.steps.length;
  const counter = document.getElementById("counter");
  const list = document.getElementById("transfers");
  const prev = document.getElementById("prev"), next = document.getElementById("next");
  const fmt = (b) => b >= 1e9 ? (b / 1e9).toPrecision(3) + " GB" : b >= 1e6 ?
    (b / 1e6).toPrecision(3) + " MB" : b >= 1e3 ? (b / 1e3).toPrecision(3) + " KB" : b + " B";
  function show(k) {
    k = Math.max(0, Math.min(n, k));
    panels.forEach((p, i) => { p.style.display = i === k ? "" : "none"; });
    counter.textContent = k > 0 ? "step " + k + " of " + n
      : n > 0 ? "before step 1 (of " + n + ")" : "no steps: nothing to send";
    prev.disabled = k === 0;
    next.disabled = k === n;
    list.replaceChildren(...(k === 0 ? [] : data.steps[k - 1].transfers.map((t) => {
      const li = document.createElement("li");
      li.textContent = "rank " + t.src + " \\u2192 rank " + t.dst + ": chunk " + t.chunk +
        ", " + t.action + ", " + fmt(t.bytes);
      return li;
    })));
    document.body.dataset.step = k;
    if (location.hash !== "#" + k) history.replaceState(null, "", "#" + k);
  }
  prev.addEventListener("click", () => show(+document.body.dataset.step - 1));
  next.addEventListener("click", () => show(+document.body.dataset.step + 1));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") prev.click();
    if (e.key === "ArrowRight") next.click();
  });
  document.body.dataset.steps = n;
  show(parseInt(location.hash.slice(1), 10) || 0);
})();
"""


def schedule_html(s: Schedule, count: int, itemsize: int, *, layout: str = "auto") -> str:
    """The page for ``s`` with a buffer of ``count`` elements of ``itemsize`` bytes."""
    data = trace_data(s, count, itemsize)
    panels = "\n".join(ET.tostring(p, encoding="unicode") for p in step_panels(s, layout))
    legend = ET.tostring(legend_svg(s), encoding="unicode")
    # "<" escaped so that no "</script>" in the data can end the script element
    payload = json.dumps(data, allow_nan=False).replace("<", "\\u003c")
    sent = ", ".join(format_bytes(b) for b in data["bytes_sent"])
    title = html.escape(schedule_title(s))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ringtree: {title}</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>{title}</h1>
<p class="sub">{html.escape(format_bytes(count * itemsize))} in all; bytes sent per rank:
{html.escape(sent)}. Keys: &larr; and &rarr;.</p>
<div class="controls">
<button id="prev" type="button">&larr; Previous</button>
<span id="counter"></span>
<button id="next" type="button">Next &rarr;</button>
</div>
<div class="stage">
<div id="panels">
{panels}
</div>
<ol id="transfers"></ol>
</div>
{legend}
<script type="application/json" id="ringtree-data">{payload}</script>
<script>{_SCRIPT}</script>
</body>
</html>
"""


def write_html(path: str, s: Schedule, count: int, itemsize: int, *, layout: str = "auto") -> None:
    """Write :func:`schedule_html` to ``path``."""
    write_text(path, schedule_html(s, count, itemsize, layout=layout))
