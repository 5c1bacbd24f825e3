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
