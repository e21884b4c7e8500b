// Small progressive enhancements; every page works without JavaScript.

// Shared by the job page's figures: draw one when it first comes near the viewport and, for a running job, again
// every data-live-seconds (default 30) while the tab is visible; draw({again: true}) keeps the user's zoom.
window.Belvedere = Object.assign(window.Belvedere || {}, {
  // Resolves once the plotting library (loaded with defer, maybe later than the caller) is there; fails after 60 s.
  plotlyReady() {
    return new Promise((resolve, reject) => {
      if (typeof Plotly !== "undefined") { resolve(); return; }
      const started = Date.now();
      const wait = setInterval(() => {
        if (typeof Plotly !== "undefined") { clearInterval(wait); resolve(); }
        else if (Date.now() - started > 60000) { clearInterval(wait); reject(new Error("the plotting library did not load")); }
      }, 25);
    });
  },
  drawWhenSeen(element, draw, live) {
    let started = false;
    const start = () => { if (!started) { started = true; draw(); } };
    if ("IntersectionObserver" in window) {
      const observer = new IntersectionObserver((entries) => {
        if (entries.some((entry) => entry.isIntersecting)) { observer.disconnect(); start(); }
      }, { rootMargin: "300px 0px" });
      observer.observe(element);
    } else {
      start();
    }
    if (live) {
      const seconds = Number(element.dataset.liveSeconds) || 30;
      setInterval(() => {
        if (document.visibilityState !== "visible" || !started) return;
        draw({ again: true });
      }, seconds * 1000);
    }
  },
  // A job-page panel's figure from its JSON ({data, layout, reason, ...}) at element.dataset.figureUrl, drawn when first
  // seen and, with data-live="true", fetched again every data-live-seconds and redrawn in place only when the answer
  // changed (ETag), the zoom and hidden legend entries kept (uirevision). `what` names it in an error; `drawn(body)`
  // runs after each drawing, before data-updated moves. Returns draw (draw({again: true}) redraws now).
  liveFigure(element, { what, config, drawn }) {
    let controller = null;
    let etag = null;
    const say = (text, state) => {
      const paragraph = document.createElement("p");
      paragraph.className = "empty";
      paragraph.setAttribute("role", "status");
      paragraph.textContent = text;
      element.replaceChildren(paragraph);
      element.setAttribute("data-rendered", state);
    };
    const draw = async ({ again = false } = {}) => {
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
        await this.plotlyReady();
      } catch (error) {
        if (error.name === "AbortError") return;
        if (!again) say(`${what} could not be loaded: ${error.message}`, "error"); // a failed live round keeps the figure
        return;
      }
      if (!body.data || !body.data.length) {
        say(body.reason ? `Nothing to draw: ${body.reason}.` : "Nothing to draw yet.", "empty");
        return;
      }
      if (element.querySelector(".skeleton, .empty")) element.replaceChildren();
      await Plotly.react(element, body.data, { ...body.layout, uirevision: body.layout.uirevision || element.id }, config);
      element.setAttribute("data-rendered", "true");
      if (drawn) drawn(body);
      element.setAttribute("data-updated", String(Date.now()));
    };
    this.drawWhenSeen(element, draw, element.dataset.live === "true");
    return draw;
  },
});
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

// One status vocabulary (apps/core/statuses.py): a page that fills in states holds the rules as
// <script id="status-vocabulary" type="application/json">; "FAILED", "fail" and "Node_Fail" read as
// "Failed" and "Node fail", one colour per meaning. Without the rules a state is shown sentence-cased.
function statusBadge(value) {
  const element = document.getElementById("status-vocabulary");
  const rules = element ? JSON.parse(element.textContent) : { meanings: {}, synonyms: {}, acronyms: {} };
  const state = String(value ?? "").trim().replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase()
    .replace(/[\s\-_.]+/g, "_").replace(/^_+|_+$/g, "") || "unknown";
  const meaning = rules.meanings[state] || rules.meanings[rules.synonyms[state]] || "neutral";
  const shown = (rules.synonyms[state] || state).split("_").map((part) => rules.acronyms[part] || part);
  if (shown[0] === shown[0].toLowerCase()) shown[0] = shown[0].charAt(0).toUpperCase() + shown[0].slice(1);
  const badge = document.createElement("span");
  badge.className = `status status--${meaning}`;
  badge.dataset.state = state;
  badge.textContent = shown.join(" ");
  return badge;
}

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
  const overallBadge = statusBadge(report.status);
  overall.textContent = overallBadge.textContent;
  overall.className = overallBadge.className;
  body.replaceChildren(...Object.entries(report.checks).map(([name, check]) => row([name, check.status, check.message])));

  function row([name, status, message]) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = name;
    const state = document.createElement("td");
    state.append(statusBadge(status));
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

// The demo build's progress (templates/core/_demo_build.html): while make run builds the demo in the
// background, follow /demo-build every two seconds and update the bar in place; once ready, show the logins.
document.addEventListener("DOMContentLoaded", () => {
  const panel = document.querySelector("[data-demo-build-live]");
  if (!panel) return;
  const title = panel.querySelector("[data-demo-build-title]");
  const bar = panel.querySelector("[data-demo-build-bar]");
  const text = panel.querySelector("[data-demo-build-text]");
  const logins = panel.querySelector("[data-demo-build-logins]");
  let misses = 0;
  const follow = async () => {
    let state;
    try {
      const response = await fetch(panel.dataset.demoBuildUrl, { headers: { Accept: "application/json" }, cache: "no-store" });
      state = await response.json();
      misses = 0;
    } catch (error) {
      misses += 1;
      if (misses >= 3) text.textContent = `Lost contact with the portal (${error}); trying again.`;
      setTimeout(follow, 2000);
      return;
    }
    panel.className = `demo-build demo-build--${state.state}`;
    bar.value = state.percent ?? 0;
    if (state.state === "building") {
      const part = Math.min(state.parts_done + 1, state.parts_total);
      text.textContent = `Part ${part} of ${state.parts_total}${state.current ? ` (${state.current})` : ""}, `
        + `${Math.round(state.elapsed_s)} s so far. The portal already answers; the demo's jobs, nodes and logins `
        + "appear when the build is done, and this page says so.";
      setTimeout(follow, 2000);
      return;
    }
    if (state.state === "ready") {
      title.textContent = "The demo system is ready";
      text.textContent = `Built in ${Math.round(state.elapsed_s)} s (seed ${state.seed}). Log in with:`;
      logins.replaceChildren(...(state.logins || []).flatMap((login) => {
        const term = document.createElement("dt");
        term.textContent = login.role;
        const detail = document.createElement("dd");
        detail.innerHTML = "user <code></code> password <code></code>";
        const [user, password] = detail.querySelectorAll("code");
        user.textContent = login.username;
        password.textContent = login.password;
        return [term, detail];
      }));
      logins.hidden = false;
      if (!document.querySelector("form input[name=password]")) {
        const again = document.createElement("a");
        again.href = window.location.href;
        again.textContent = "Show this page with the demo";
        text.append(" ", again);
      }
      return;
    }
    title.textContent = state.state === "failed" ? "The demo build failed" : "The demo build stopped before it finished";
    text.textContent = `${state.error || state.detail || ""}. The terminal that runs make run has the details; `
      + "make run builds it again at its next start.";
  };
  setTimeout(follow, 2000);
});
