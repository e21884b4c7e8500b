// The job page's "PDF report" button (templates/appmetrics/_job_section.html): asks the worker for the report
// (POST .../report/), shows its progress in place while it builds (GET .../report/ every 2 s) and then links the file.
(() => {
  "use strict";
  const form = document.getElementById("appmetrics-report");
  if (!form) return;
  const status = document.getElementById("appmetrics-report-status");
  const url = form.dataset.reportUrl;
  const button = form.querySelector("button");

  function show(body) {
    if (body.status === "ready" && body.pdf) {
      status.textContent = "";
      const link = document.createElement("a");
      link.href = body.pdf;
      link.textContent = `Download the report (${body.pages} page${body.pages === 1 ? "" : "s"})`;
      status.append(link);
      button.disabled = false;
      button.textContent = "Build again";
      return true;
    }
    if (body.status === "failed") {
      status.textContent = `The report failed: ${body.message || "no reason given"}`;
      button.disabled = false;
      return true;
    }
    status.textContent = body.status === "building" ? `Building… ${body.progress} %` : "Waiting for a worker…";
    return false;
  }

  async function poll() {
    const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) { status.textContent = `Could not read the report's state (HTTP ${response.status}).`; button.disabled = false; return; }
    if (!show(await response.json())) setTimeout(poll, 2000);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    status.textContent = "Asking a worker…";
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": form.elements.csrfmiddlewaretoken.value },
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      status.textContent = body.detail || `The report could not be asked for (HTTP ${response.status}).`;
      button.disabled = false;
      return;
    }
    if (!show(await response.json())) setTimeout(poll, 2000);
  });

  fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then((response) => (response.ok ? response.json() : null))
    .then((body) => { if (body && body.status !== "none" && !show(body)) setTimeout(poll, 2000); })
    .catch(() => {});
})();
