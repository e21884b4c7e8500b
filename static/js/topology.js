// Draws the Plotly figure whose JSON the page embeds; clicking a node opens its page.
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-figure]").forEach((element) => {
    const source = document.getElementById(element.dataset.figure);
    if (!source || typeof Plotly === "undefined") return;
    const figure = JSON.parse(source.textContent);
    Plotly.newPlot(element, figure.data, figure.layout, { responsive: true, displaylogo: false, scrollZoom: true })
      .then(() => element.setAttribute("data-rendered", "true"));
    const nodeUrl = element.dataset.nodeUrl;
    element.on("plotly_click", (event) => {
      const point = event.points && event.points[0];
      const hostname = point && point.customdata && point.customdata[0];
      if (nodeUrl && hostname && !String(hostname).startsWith("switch")) {
        window.location.href = nodeUrl.replace("HOSTNAME", encodeURIComponent(hostname));
      }
    });
  });
});

// "PNG" buttons next to a figure: Plotly renders the figure as it is now (zoom, legend) to a file.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-download-png]");
  if (!button || typeof Plotly === "undefined") return;
  const element = document.getElementById(button.dataset.downloadPng);
  if (!element || element.dataset.rendered !== "true") return;
  Plotly.downloadImage(element, { format: "png", filename: button.dataset.filename || element.id, scale: 2 });
});
