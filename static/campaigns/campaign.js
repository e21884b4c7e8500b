// The campaign page's figures: the curves across allocations and the goodput per allocation (Plotly), from the JSON
// the page carries (campaign-figures), drawn after the first paint.
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("campaign-figures");
    if (!holder || !window.Plotly) return;
    var figures = JSON.parse(holder.textContent);
    var config = {responsive: true, displaylogo: false};
    [["curves-figure", figures.curves], ["goodput-figure", figures.goodput]].forEach(function (pair) {
      var element = document.getElementById(pair[0]);
      if (element && pair[1]) {
        window.Plotly.newPlot(element, pair[1].data, pair[1].layout, config).then(function () {
          element.setAttribute("data-drawn", "true");
        });
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", draw); else draw();
})();
