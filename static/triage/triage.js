/* The staff triage inbox, in place: acknowledge / resolve / mute / reopen an item through
   PATCH /api/v1/staff/triage/<pk>/, dry-run drain a node through the vetting API, refresh the sync, and
   filter by kind and state (the inbox's HTML for the new filters replaces the list; the address bar follows).
   Without JavaScript the same forms post to /staff/triage/<pk>/ and /staff/triage/refresh/, and the filter
   form loads the page. */
(function () {
  "use strict";

  function csrf(form) {
    const input = (form || document).querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function problems(body, status) {
    if (!body) return `HTTP ${status}`;
    const items = (body.errors || []).map((e) => (e.field ? `${e.field}: ${e.message}` : e.message));
    return items.length ? items.join("; ") : body.detail || `HTTP ${status}`;
  }

  async function send(url, method, data, form) {
    const response = await fetch(url, {
      method, credentials: "same-origin", body: JSON.stringify(data),
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf(form) },
    });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    return { ok: response.ok, status: response.status, body };
  }

  function bump(kind, state, delta) {
    const cells = document.querySelectorAll(`[data-count-kind="${kind}"][data-count-state="${state}"]`);
    cells.forEach((cell) => { cell.textContent = String(Math.max(0, Number(cell.textContent || 0) + delta)); });
  }

  const WORDS = { new: "new", acknowledged: "acknowledged", resolved: "resolved", muted: "muted" };
  const OPEN = new Set(["new", "acknowledged"]); // apps.triage.selectors.OPEN_STATES

  function bumpOpen(delta) {  // the verdict's "N open items" follows the changes made in place
    document.querySelectorAll("[data-role=open-count]").forEach((span) => {
      const n = Math.max(0, Number(span.dataset.open || 0) + delta);
      span.dataset.open = String(n);
      span.textContent = `${n} ${span.dataset.word}${n === 1 ? "" : "s"}`;
    });
  }

  function show(li, item) {
    const before = li.dataset.state;
    li.dataset.state = item.state;
    li.className = li.className.replace(/triage-item--(new|acknowledged|resolved|muted)/, `triage-item--${item.state}`);
    const state = li.querySelector("[data-role=state]");
    state.textContent = WORDS[item.state] || item.state;
    state.className = `state triage-state triage-state--${item.state}`;
    let who = item.assignee ? `→ ${item.assignee}` : "";
    if (item.muted_until) who += ` until ${new Date(item.muted_until).toISOString().slice(5, 16).replace("T", " ")} UTC`;
    li.querySelector("[data-role=who]").textContent = who;
    li.querySelector("[data-role=message]").textContent = item.note || "";
    if (before !== item.state) { bump(li.dataset.kind, before, -1); bump(li.dataset.kind, item.state, +1); }
    if (OPEN.has(before) !== OPEN.has(item.state)) bumpOpen(OPEN.has(item.state) ? +1 : -1);
  }

  let filtering = null;

  async function filter(form) {
    const query = new URLSearchParams();
    for (const [name, value] of new FormData(form)) if (value) query.set(name, value);
    const url = `${form.action || location.pathname}`.split("?")[0] + (query.toString() ? `?${query}` : "");
    const message = form.querySelector("[data-role=message]");
    if (filtering) filtering.abort();
    filtering = new AbortController();
    message.textContent = "filtering…";
    try {
      const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" }, signal: filtering.signal });
      if (!response.ok) { message.textContent = `Not filtered: HTTP ${response.status}`; return; }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const selector of ["#triage-results", "#triage-filter .error"]) {
        const old = document.querySelector(selector), next = fresh.querySelector(selector);
        if (old && next) old.replaceWith(next);
        else if (old) old.remove();
        else if (next) form.append(next);
      }
      history.replaceState(null, "", url);
      message.textContent = "";
    } catch (error) {
      if (error.name !== "AbortError") message.textContent = `Not filtered: ${error}`;
    }
  }

  document.addEventListener("change", (event) => {
    const form = event.target.closest("form.triage-filter");
    if (form) filter(form);
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (form.matches("form.triage-filter")) {
      event.preventDefault();
      filter(form);
    } else if (form.matches("form.triage-change")) {
      event.preventDefault();
      const li = form.closest("[data-item]");
      const list = form.closest("[data-api]");
      const submitter = event.submitter;
      const data = { state: submitter ? submitter.value : "" };
      const assignee = form.elements.assignee.value.trim();
      if (data.state === "acknowledged" && assignee) data.assignee = assignee;
      if (data.state === "muted") {
        const value = form.elements.muted_until.value;
        data.muted_until = value ? `${value}:00Z` : null; // the field is in UTC, as the form without JavaScript reads it
      }
      const message = li.querySelector("[data-role=message]");
      message.textContent = "saving…";
      form.querySelectorAll("button").forEach((b) => { b.disabled = true; });
      try {
        const answer = await send(`${list.dataset.api}${li.dataset.item}/`, "PATCH", data, form);
        if (answer.ok) show(li, answer.body);
        else message.textContent = `Not changed: ${problems(answer.body, answer.status)}`;
      } catch (error) {
        message.textContent = `Not changed: ${error}`;
      } finally {
        form.querySelectorAll("button").forEach((b) => { b.disabled = false; });
      }
    } else if (form.matches("form.triage-refresh")) {
      event.preventDefault();
      const message = form.querySelector("[data-role=message]");
      message.textContent = "queueing…";
      const response = await fetch(form.action, {
        method: "POST", credentials: "same-origin", body: new FormData(form),
        headers: { Accept: "application/json", "X-CSRFToken": csrf(form) },
      });
      let body = {};
      try { body = await response.json(); } catch (e) { body = {}; }
      message.textContent = body.message || `HTTP ${response.status}`;
    }
  });

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.triage-drain");
    if (!button) return;
    const li = button.closest("[data-item]");
    const message = li.querySelector("[data-role=message]");
    button.disabled = true;
    const sw = button.dataset.switch;
    message.textContent = `asking for a dry-run drain of ${sw ? `the nodes behind switch ${sw}` : button.dataset.host}…`;
    try {
      // a switch: one dry run over its nodes (vetting triage's switch action); a node: the node-action API
      const data = sw ? { switch: sw, action: "drain", reason: button.dataset.reason || "triage", dry_run: true }
                      : { action: "drain", reason: button.dataset.reason || "triage" };
      const answer = await send(button.dataset.url, "POST", data, li.querySelector("form"));
      if (answer.ok && sw) {
        message.textContent = answer.body.message;  // "switch 5.0: would drain 14 nodes (dry run: nothing changed …)"
      } else if (answer.ok) {
        const e = answer.body.event || {};
        message.textContent = e.dry_run ? `would drain (dry run, nothing changed): ${e.command}` : `${e.action}: ${e.command || ""}`;
      } else {
        message.textContent = `Not drained: ${problems(answer.body, answer.status)}`;
      }
    } finally {
      button.disabled = false;
    }
  });
})();
