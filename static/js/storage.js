// The job page's "Storage" panel (templates/storage/_job_section.html).
//
// The figure loads as JSON from `data-figure-url` when it comes near the viewport: {data, layout, coverage, bursts,
// verdict}. While the job runs (`data-live="true"`) it is fetched again every `data-live-seconds` and redrawn in
// place with Plotly.react; the layout's uirevision keeps the zoom and the hidden legend entries.
(() => {
  "use strict";
  const config = { responsive: true, displaylogo: false, scrollZoom: false };


  function init(element) {
    const verdict = document.getElementById("storage-verdict");
    window.Belvedere.liveFigure(element, {
      what: "The file-system activity", config,
      drawn(body) {
        element.setAttribute("data-bursts", String((body.bursts || []).length));
        element.bursts = body.bursts || [];
        if (verdict && body.verdict) verdict.textContent = `${body.verdict}.`;
      },
    });
  }

  document.querySelectorAll("#storage-figure[data-figure-url]").forEach(init);
})();
