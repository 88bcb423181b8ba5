"""A view as one self-contained HTML file: the report, a flame graph of its rows and the advisor's findings.

Everything is inline (our own small CSS and script, the data as JSON in the page): the file
makes no request and opens offline, from disk or an e-mail attachment. The flame graph draws
the view's stacks (``tfprof.queries.stacks``) for the first selected metric as an icicle, top
row first; clicking a frame zooms to it, clicking the top row zooms out. Without a script the
page still shows the report and the advice.
"""

from __future__ import annotations

import html
import json

from tfprof.queries.stacks import Stacks

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
pre { background: #f6f6f6; padding: .8em; overflow: auto; font-size: 12px; }
#flame { position: relative; width: 100%; font-size: 11px; }
#flame div { position: absolute; height: 17px; overflow: hidden; white-space: nowrap; box-sizing: border-box;
  border: 1px solid #fff; padding: 0 3px; cursor: pointer; border-radius: 2px; }
#flame div:hover { filter: brightness(0.9); }
#info { min-height: 1.4em; font-family: monospace; }
"""

# Our own icicle: subtree sums from the exclusive values, one absolutely placed div per frame
# wider than half a pixel, zoom on click. No library, no network.
_SCRIPT = """
(function () {
  var d = JSON.parse(document.getElementById('flame-data').textContent);
  var n = d.names.length, kids = [], sum = d.values.slice(), i;
  for (i = 0; i < n; i++) kids.push([]);
  for (i = n - 1; i >= 0; i--) if (d.parent[i] >= 0) { kids[d.parent[i]].push(i); sum[d.parent[i]] += sum[i]; }
  var tops = [], box = document.getElementById('flame'), info = document.getElementById('info');
  for (i = 0; i < n; i++) { kids[i].reverse(); if (d.parent[i] < 0) tops.push(i); }
  function color(s) { var h = 0; for (var k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) % 360;
    return 'hsl(' + (h % 50 + 10) + ',75%,' + (60 + h % 15) + '%)'; }
  function draw(focus) {
    box.innerHTML = ''; var width = box.clientWidth || 1000, depth = 0;
    var roots = focus === null ? tops : [focus], whole = 0;
    roots.forEach(function (r) { whole += sum[r]; });
    if (!whole) { box.textContent = 'Nothing to draw: every value is 0.'; return; }
    function place(i, x, level) {
      var w = sum[i] / whole * width; if (w < 0.5) return;
      depth = Math.max(depth, level + 1);
      var el = document.createElement('div');
      el.style.left = x + 'px'; el.style.top = (level * 18) + 'px'; el.style.width = w + 'px';
      el.style.background = color(d.names[i]); el.textContent = d.names[i];
      el.title = d.names[i] + ': ' + sum[i].toLocaleString() + ' ' + d.unit;
      el.onclick = function () { draw(focus === i ? (d.parent[i] >= 0 ? d.parent[i] : null) : i); };
      el.onmouseover = function () { info.textContent = el.title + ' (' + (100 * sum[i] / whole).toFixed(2) + '%)'; };
      box.appendChild(el);
      var cx = x; kids[i].forEach(function (k) { place(k, cx, level + 1); cx += sum[k] / whole * width; });
    }
    var x = 0; roots.forEach(function (r) { place(r, x, 0); x += sum[r] / whole * width; });
    box.style.height = (depth * 18 + 2) + 'px';
  }
  draw(null); window.addEventListener('resize', function () { draw(null); });
})();
"""


def _script_json(data: object) -> str:
    """JSON safe inside a ``<script>`` element: no ``</``, no ``<!--`` can end or hide it."""
    return json.dumps(data, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(
    *, title: str, subtitle: str, report: str, stacks: Stacks, metric: str, unit: str, advice: str
) -> bytes:
    """The page's bytes (UTF-8): ``title``, a ``subtitle`` line (the view and its options), the text
    ``report``, a flame graph of ``stacks`` by ``metric`` (in ``unit``) and the ``advice`` text."""
    data = {
        "names": stacks.names,
        "parent": [int(p) for p in stacks.parent],
        "values": [int(v) for v in stacks.values[metric]],
        "unit": unit,
    }
    esc = html.escape
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{esc(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{esc(title)}</h1>
<p>{esc(subtitle)}</p>
<h2>Flame graph: {esc(metric)} ({esc(unit)})</h2>
<div id="info"></div>
<div id="flame"><noscript>The flame graph needs JavaScript; the report below does not.</noscript></div>
<h2>Report</h2>
<pre id="report">{esc(report)}</pre>
<h2>Advisor</h2>
<pre id="advice">{esc(advice)}</pre>
<script type="application/json" id="flame-data">{_script_json(data)}</script>
<script>{_SCRIPT}</script>
</body>
</html>
"""
    return page.encode()
