// Entry of Belvedere's partial Plotly bundle: plotly.js core with exactly the trace types the
// portal's figures use (apps/*/figures.py: go.Scatter, go.Heatmap, go.Bar). Core already carries
// scatter; naming it keeps the bundle right if core ever stops doing so.
// `npm run build:plotly` (build-plotly.mjs) turns it into ../static/vendor/plotly/plotly-belvedere.min.js.
var Plotly = require("plotly.js/lib/core");

Plotly.register([require("plotly.js/lib/scatter"), require("plotly.js/lib/heatmap"), require("plotly.js/lib/bar")]);

window.Plotly = Plotly;
