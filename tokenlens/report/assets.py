"""The page's own CSS and chart-embedding script, kept as Python strings so they ship in
the wheel without package-data configuration."""

CSS = """\
body {
  font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans CJK JP", "Noto Sans JP", sans-serif;
  margin: 0 auto;
  max-width: 1180px;
  padding: 0 24px 48px;
  color: #222;
  line-height: 1.45;
}
h1 { margin: 24px 0 4px; }
h2 { margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #555; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f5f5f5; }
.chart { margin: 16px 0 24px; }
.hyps { display: flex; gap: 16px; flex-wrap: wrap; }
.hyp { flex: 1 1 420px; border: 1px solid #ddd; border-radius: 6px; padding: 12px 16px; }
.hyp h3 { margin: 0 0 6px; }
.verdict {
  display: inline-block;
  padding: 1px 8px;
  border-radius: 10px;
  font-size: 13px;
  color: #fff;
}
.verdict.supported { background: #2e7d32; }
.verdict.not_supported { background: #555; }
.verdict.inconclusive { background: #b26a00; }
.effect { font-variant-numeric: tabular-nums; }
.evidence { margin: 8px 0 0; }
.legend span { margin-right: 12px; }
.pair { display: flex; gap: 16px; margin: 12px 0 20px; }
.request {
  flex: 1 1 0;
  min-width: 0;
  border: 1px solid #ddd;
  border-radius: 6px;
  padding: 8px 12px;
}
.request h4 { margin: 0 0 6px; font-size: 14px; }
.request .run { color: #777; font-weight: normal; }
.text { white-space: pre-wrap; word-break: break-word; font-size: 15px; line-height: 1.9; }
.t { border-radius: 2px; padding: 0 1px; }
.t:empty { display: inline-block; min-width: 0.3em; height: 1em; vertical-align: middle; }
.t.accepted { background: #c8e6c9; }
.t.rejected { background: #ffcdd2; text-decoration: underline #c62828; }
.t.plain { background: #eeeeee; }
.t.gap { background: repeating-linear-gradient(45deg,#fff,#fff 2px,#ccc 2px,#ccc 4px); }
body:has(#show-pos:checked) .t[data-pos]::after {
  content: attr(data-pos);
  font-size: 0.6em;
  vertical-align: super;
  color: #555;
  margin-left: 1px;
}
.more { color: #777; font-style: italic; }
footer {
  margin-top: 40px;
  border-top: 1px solid #ddd;
  padding-top: 8px;
  font-size: 12px;
  color: #555;
}
footer code { word-break: break-all; }
"""

EMBED_JS = """\
// Renders every chart spec of the page with vega-embed (inlined once above this script).
// The specs are JSON in <script type="application/json" id="tl-specs">; each goes into
// <div id="chart-ID">. data-rendered says how it went (the browser test reads it).
(function () {
  "use strict";
  var specs = JSON.parse(document.getElementById("tl-specs").textContent);
  var options = {
    renderer: "svg",
    actions: { export: true, source: false, compiled: false, editor: false },
  };
  Object.keys(specs).forEach(function (id) {
    var el = document.getElementById("chart-" + id);
    vegaEmbed(el, specs[id], options)
      .then(function () { el.dataset.rendered = "true"; })
      .catch(function (err) {
        el.dataset.rendered = "error";
        el.textContent = "chart failed: " + err;
        console.error(err);
      });
  });
})();
"""
