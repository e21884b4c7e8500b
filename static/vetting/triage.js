/* Vetting triage, in place: the one action of a switch finding over the nodes behind it.
   "Dry run: drain N nodes" posts {switch, action, reason, dry_run: true} to this page as JSON and shows what would
   run ("would drain N nodes", each node's scontrol command); no node's state, badge or counter changes. Where
   actions run for real (VETTING_ACTIONS_DRY_RUN off), the real drain is offered after the dry run, for the number of
   nodes it named; after it the page's states, counters and rows are read again in place.
   Without JavaScript the same form posts and the page answers with a message. */
(function () {
  "use strict";

  function csrf(form) {
    const input = form.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function problems(body, status) {
    const items = ((body && body.errors) || []).map((e) => (e.field ? `${e.field}: ${e.message}` : e.message));
    return items.length ? items.join("; ") : `HTTP ${status}`;
  }

  function say(row, text, commands) {
    const message = row.querySelector("[data-role=message]");
    message.textContent = text;
    if (commands && commands.length) {
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = `the ${commands.length} command${commands.length === 1 ? "" : "s"}`;
      const pre = document.createElement("pre");
      pre.className = "switch-commands";
      pre.textContent = commands.join("\n");
      details.append(summary, pre);
      message.append(details);
    }
  }

  async function reread() {  // after a real drain: states, counters and rows as the server has them now
    const response = await fetch(location.pathname, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const selector of [".stats", "#triage-nodes"]) {
      const old = document.querySelector(selector), next = fresh.querySelector(selector);
      if (old && next) old.replaceWith(next);
    }
  }

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.matches("form.switch-action")) return;
    event.preventDefault();
    const row = form.closest("[data-switch]");
    const real = event.submitter && event.submitter.value === "0";
    const data = { switch: form.elements.switch.value, action: form.elements.action.value,
                   reason: form.elements.reason.value, dry_run: !real };
    if (real) data.expect = Number(form.elements.expect.value);
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => { b.disabled = true; });
    say(row, real ? "draining in Slurm…" : "asking for a dry run…");
    try {
      const response = await fetch(location.pathname, {
        method: "POST", credentials: "same-origin", body: JSON.stringify(data),
        headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": csrf(form) },
      });
      let body = null;
      try { body = await response.json(); } catch (e) { body = null; }
      if (!response.ok) { say(row, `Not done: ${problems(body, response.status)}`); return; }
      say(row, body.message, body.commands);
      row.dataset.outcome = body.dry_run ? "dry-run" : "done";
      if (body.dry_run) {
        form.elements.expect.value = String(body.count);
        const drain = form.querySelector(".switch-drain-real");
        if (drain) { drain.hidden = false; drain.textContent = `Drain ${body.count} node${body.count === 1 ? "" : "s"} in Slurm`; }
      } else {
        await reread();
      }
    } catch (error) {
      say(row, `Not done: ${error}`);
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  });
})();
