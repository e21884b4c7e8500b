// The job page's "Training throughput" panel (templates/appmetrics/_job_section.html).
//
// The figure loads as JSON from `data-figure-url` (the job page's panel-figure endpoint) when it comes near
// the viewport: {data, layout, coverage, events}. While the job runs (`data-live="true"`) it is fetched again
// every `data-live-seconds` and redrawn in place with Plotly.react; the layout's uirevision keeps the zoom and
// the hidden legend entries. The coverage line under the heading follows: first and last row, how long ago.
(() => {
  "use strict";
  const config = { responsive: true, displaylogo: false, scrollZoom: false };


  function ago(seconds) {
    if (seconds < 60) return `${Math.max(0, Math.round(seconds))} s`;
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return `${minutes} min`;
    const hours = Math.floor(minutes / 60);
    return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  }

  const hhmm = (iso) => new Date(iso).toISOString().slice(11, 16);

  function coverageWords(holder, coverage, live) {
    if (!holder || !coverage || !coverage.last) return;
    const late = (Date.now() - new Date(coverage.last).getTime()) / 1000;
    const rows = Number(coverage.rows || 0).toLocaleString("en-US");
    let state = "complete";
    let words = `Application metrics: ${rows} row${coverage.rows === 1 ? "" : "s"} from ${hhmm(coverage.first)} to ${hhmm(coverage.last)} UTC`;
    if (live) {
      state = late <= 300 ? "live" : late <= 1800 ? "lagging" : "stale";
      words += `, the last ${ago(late)} ago.`;
    } else {
      // A finished job keeps the server's words (it knows when the job ended); only the counts are refreshed.
      const shown = holder.querySelector(".status");
      if (shown) state = shown.textContent.trim();
      words = holder.dataset.words || `${words}.`;
    }
    const level = state === "live" || state === "complete" ? "ok" : state === "stale" ? "fail" : "warn";
    const status = document.createElement("span");
    status.className = `status status--${level}`;
    status.textContent = state;
    holder.replaceChildren(status, document.createTextNode(` ${words}`));
    holder.dataset.last = coverage.last;
  }

  function init(element) {
    const coverage = document.getElementById("appmetrics-coverage");
    const live = element.dataset.live === "true";
    if (coverage) coverage.dataset.words = (coverage.textContent || "").replace(/^\s*\S+\s+/, "").trim();
    const draw = window.Belvedere.liveFigure(element, {
      what: "The training curves", config,
      drawn(body) {
        element.setAttribute("data-events", String((body.events || []).length));
        coverageWords(coverage, body.coverage, live);
      },
    });
    window.BelvedereAppMetrics = { redraw: () => draw({ again: true }) };
  }

  function wire() {
    const element = document.getElementById("appmetrics-figure");
    if (element && !element.dataset.wired) {
      element.dataset.wired = "true";
      init(element);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
