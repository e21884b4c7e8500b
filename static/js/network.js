// The job page's network panel: while the job runs, the verdict, the counts and the NICs that stand out follow
// the network API in place (the heatmap itself is redrawn by the job page's live refresh, keeping its zoom).
(() => {
  "use strict";
  const box = document.getElementById("network-live");
  if (!box || box.dataset.live !== "true") return;
  const page = document.querySelector("[data-job-page]");
  const seconds = Number(page && page.dataset.liveSeconds) || 30;
  const text = (id, value) => { const element = document.getElementById(id); if (element && value !== undefined) element.textContent = value; };

  async function refresh() {
    if (document.visibilityState !== "visible") return;
    let body;
    try {
      const url = new URL(box.dataset.networkUrl, window.location.origin);
      url.searchParams.set("series", "none");
      const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache", credentials: "same-origin" });
      if (!response.ok) return;
      body = await response.json();
    } catch (error) { return; } // the next round tries again
    text("network-verdict", body.verdict);
    text("network-outlier-count", String((body.findings || []).length));
    const list = document.getElementById("network-outliers");
    if (!list) return;
    const items = (body.findings || []).map((item) => {
      const li = document.createElement("li");
      li.className = "network-outlier";
      li.dataset.host = item.host;
      li.dataset.nic = item.nic;
      const strong = document.createElement("strong");
      strong.textContent = item.reason;
      li.append(strong);
      return li;
    });
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "small muted";
      li.textContent = "No NIC stands out from the job's others.";
      items.push(li);
    }
    list.replaceChildren(...items);
    box.dataset.updated = String(Date.now());
  }

  setInterval(refresh, seconds * 1000);
})();
