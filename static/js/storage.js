// The job page's "Storage" panel (templates/storage/_job_section.html).
//
// The figure loads as JSON from `data-figure-url` when it comes near the viewport: {data, layout, coverage, bursts,
// verdict}. While the job runs (`data-live="true"`) it is fetched again every `data-live-seconds` and redrawn in
// place with Plotly.react; the layout's uirevision keeps the zoom and the hidden legend entries.
(() => {
  "use strict";
  const config = { responsive: true, displaylogo: false, scrollZoom: false };


  function note(element, text, state) {
    const paragraph = document.createElement("p");
    paragraph.className = "empty";
    paragraph.setAttribute("role", "status");
    paragraph.textContent = text;
    element.replaceChildren(paragraph);
    element.setAttribute("data-rendered", state);
  }

  function init(element) {
    const live = element.dataset.live === "true";
    const verdict = document.getElementById("storage-verdict");
    let controller = null;
    let etag = null;

    async function draw({ again = false } = {}) {
      if (controller) controller.abort();
      controller = new AbortController();
      let body;
      try {
        const response = await fetch(element.dataset.figureUrl, { headers: { Accept: "application/json" }, cache: "no-cache",
                                                                  credentials: "same-origin", signal: controller.signal });
        if (again && response.status === 304) return;
        if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
        const next = response.headers.get("ETag");
        if (again && next && next === etag) return;
        etag = next;
        body = await response.json();
        await window.Belvedere.plotlyReady();
      } catch (error) {
        if (error.name === "AbortError") return;
        if (!again) note(element, `The file-system activity could not be loaded: ${error.message}`, "error");
        return;
      }
      if (!body.data || !body.data.length) {
        note(element, body.reason ? `Nothing to draw: ${body.reason}.` : "Nothing to draw yet.", "empty");
        return;
      }
      if (element.querySelector(".skeleton, .empty")) element.replaceChildren();
      await Plotly.react(element, body.data, { ...body.layout, uirevision: body.layout.uirevision || element.id }, config);
      element.setAttribute("data-rendered", "true");
      element.setAttribute("data-bursts", String((body.bursts || []).length));
      element.setAttribute("data-updated", String(Date.now()));
      element.bursts = body.bursts || [];
      if (verdict && body.verdict) verdict.textContent = `${body.verdict}.`;
    }

    window.Belvedere.drawWhenSeen(element, draw, live);
  }

  document.querySelectorAll("#storage-figure[data-figure-url]").forEach(init);
})();
