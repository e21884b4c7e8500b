// Small progressive enhancements; every page works without JavaScript.
document.addEventListener("DOMContentLoaded", () => {
  const toggle = document.querySelector(".nav-toggle");
  const nav = document.getElementById("site-nav");
  if (toggle && nav) {
    toggle.addEventListener("click", () => {
      const open = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", String(!open));
      nav.classList.toggle("site-nav--open", !open);
    });
  }
});

// Staff page: fill the services table from /readyz without holding up the page.
document.addEventListener("DOMContentLoaded", async () => {
  const table = document.querySelector("[data-readiness-url]");
  if (!table) return;
  const overall = document.querySelector("[data-readiness-overall]");
  const body = table.querySelector("tbody");
  let report;
  try {
    const response = await fetch(table.dataset.readinessUrl, { headers: { Accept: "application/json" } });
    report = await response.json();
  } catch (error) {
    body.replaceChildren(row(["readiness", "fail", `could not reach /readyz: ${error}`]));
    return;
  }
  overall.textContent = report.status;
  overall.className = `status status--${report.status}`;
  body.replaceChildren(...Object.entries(report.checks).map(([name, check]) => row([name, check.status, check.message])));

  function row([name, status, message]) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = name;
    const state = document.createElement("td");
    const badge = document.createElement("span");
    badge.className = `status status--${status}`;
    badge.textContent = status;
    state.append(badge);
    const detail = document.createElement("td");
    detail.textContent = message;
    tr.append(th, state, detail);
    return tr;
  }
});

// Pages of active jobs reload themselves while visible, so state and placement stay current.
document.addEventListener("DOMContentLoaded", () => {
  const holder = document.querySelector("[data-auto-refresh]");
  if (!holder) return;
  const seconds = Number(holder.dataset.autoRefresh) || 60;
  setInterval(() => { if (document.visibilityState === "visible") window.location.reload(); }, seconds * 1000);
});
