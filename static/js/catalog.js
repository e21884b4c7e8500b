// The catalogue's pages: copy the sample query or run it against the API (its answer, or its errors by field);
// subscribe to a product's incidents; staff acknowledge, assign and resolve incidents in place.
document.addEventListener("DOMContentLoaded", () => {
  const csrf = () => (document.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";

  async function send(url, method, body) {
    const response = await fetch(url, {
      method, body: JSON.stringify(body), credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf() },
    });
    let data = null;
    try { data = await response.json(); } catch (error) { /* not JSON */ }
    return { ok: response.ok, status: response.status, data };
  }

  // An API error as one line per field: "job: required — give job=…".
  function errorText(data) {
    if (!data) return "";
    const lines = (data.errors || []).map((e) => `${e.field || "request"}: ${e.message}`);
    return [data.detail, ...lines].filter(Boolean).join("\n");
  }

  document.querySelectorAll("[data-copy]").forEach((button) => {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "Copied";
      } catch (error) {
        button.textContent = "Select and copy it by hand";
      }
    });
  });

  document.querySelectorAll("[data-run]").forEach((button) => {
    button.addEventListener("click", async () => {
      const target = document.getElementById(button.dataset.target);
      target.hidden = false;
      target.textContent = "Running…";
      try {
        const response = await fetch(button.dataset.run, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        const body = await response.text();
        let shown = body;
        let parsed = null;
        try { parsed = JSON.parse(body); shown = JSON.stringify(parsed, null, 2); } catch (error) { /* not JSON: show as it is */ }
        const head = response.ok ? `HTTP ${response.status}` : `HTTP ${response.status}: ${errorText(parsed) || response.statusText}`;
        target.textContent = `${head}\n${shown.length > 4000 ? `${shown.slice(0, 4000)}\n… (${shown.length.toLocaleString()} characters)` : shown}`;
        target.dataset.status = String(response.status);
      } catch (error) {
        target.textContent = `The request failed: ${error}`;
      }
    });
  });

  const subscribeButton = document.getElementById("subscribe");
  if (subscribeButton) {
    subscribeButton.addEventListener("click", async () => {
      const want = subscribeButton.dataset.subscribed !== "true";
      const note = document.getElementById("subscribe-note");
      const answer = await send("/api/v1/catalog/subscriptions/", "POST", { product: subscribeButton.dataset.subscribe, subscribed: want });
      if (!answer.ok) {
        note.textContent = errorText(answer.data) || `HTTP ${answer.status}`;
        return;
      }
      const now = answer.data.products.includes(subscribeButton.dataset.subscribe);
      subscribeButton.dataset.subscribed = String(now);
      subscribeButton.setAttribute("aria-pressed", String(now));
      subscribeButton.textContent = now ? "Stop mailing me its incidents" : "Mail me its new incidents";
      note.textContent = now ? `You get mail when it opens an incident${answer.data.email ? ` (to ${answer.data.email})` : " — but your account has no e-mail address"}.`
        : "No more mail about its incidents.";
    });
  }

  const table = document.getElementById("incident-table");
  if (table) {
    const STATUS = { open: "fail", acknowledged: "warn", resolved: "ok" };
    function show(row, incident) {
      row.dataset.state = incident.state;
      const badge = row.querySelector("[data-field=state]");
      badge.textContent = incident.state;
      badge.className = `status status--${STATUS[incident.state] || "unknown"}`;
      const assignee = row.querySelector("[data-field=assignee]");
      assignee.textContent = incident.assignee || "nobody";
      assignee.classList.toggle("muted", !incident.assignee);
      const ack = row.querySelector("[data-action=acknowledged]");
      if (ack && incident.state !== "open") ack.remove();  // (.button sets display, so the hidden attribute would not hide it)
      if (incident.state === "resolved") {
        row.querySelectorAll("[data-action]").forEach((control) => control.remove());
      }
    }
    async function change(row, body) {
      const message = row.querySelector("[data-field=message]");
      message.textContent = "…";
      const answer = await send(`${table.dataset.api}${row.dataset.incident}/`, "PATCH", body);
      if (!answer.ok) {
        message.textContent = errorText(answer.data) || `HTTP ${answer.status}`;
        message.className = "small status--fail";
        return;
      }
      message.textContent = "saved";
      message.className = "small muted";
      show(row, answer.data);
    }
    table.addEventListener("click", (event) => {
      const button = event.target.closest("button[data-action]");
      if (button) change(button.closest("tr"), { state: button.dataset.action });
    });
    table.addEventListener("change", (event) => {
      const select = event.target.closest("select[data-action=assign]");
      if (select) change(select.closest("tr"), { assignee: select.value || null });
    });
  }
});
