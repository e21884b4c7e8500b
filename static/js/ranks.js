// The rank map of the job page (templates/ranks/_job_section.html).
//
// The figure loads as JSON from `data-figure-url` after the first paint, when it comes near the
// viewport (or at once when the selection changes first). Changing the colour or
// the selection (the form, or a cell of the stage × replica grid) redraws it in place with
// Plotly.react: no navigation, zoom and pan kept (the figure's layout.uirevision), the messages
// next to the fields, the count and the marked grid cells updated, and the address bar following
// with history.replaceState so a reload shows the same. Without JavaScript the form submits as GET.
(() => {
  "use strict";
  const FIELDS = ["dp", "pp", "tp"];
  const config = { responsive: true, displaylogo: false, scrollZoom: true };

  // Plotly arrives with the page (deferred script in the head); if no other script of the page
  // brings it, load the one the element names.
  let plotlyPromise = null;
  function plotly(element) {
    if (typeof Plotly !== "undefined") return Promise.resolve();
    if (plotlyPromise) return plotlyPromise;
    plotlyPromise = new Promise((resolve, reject) => {
      const started = Date.now();
      let injected = false;
      const wait = setInterval(() => {
        if (typeof Plotly !== "undefined") { clearInterval(wait); resolve(); return; }
        const waited = Date.now() - started;
        if (!injected && waited > 3000 && element.dataset.plotlySrc) {
          injected = true;
          const script = document.createElement("script");
          script.src = element.dataset.plotlySrc;
          document.head.append(script);
        }
        if (waited > 60000) { clearInterval(wait); reject(new Error("the plotting library did not load")); }
      }, 25);
    });
    return plotlyPromise;
  }

  function plural(count, word) {
    return `${count.toLocaleString("en-US")} ${word}${count === 1 ? "" : "s"}`;
  }

  function init(element) {
    const form = document.querySelector(`[data-rank-form="${element.id}"]`);
    const errors = document.getElementById("rank-selection-errors");
    const count = document.getElementById("rank-selected-count");
    const note = document.getElementById("rank-colour-note");
    let controller = null;
    let wired = false;
    let first = false; // drawn, or being drawn, once

    function status(text) {
      let holder = element.querySelector("[data-rank-figure-status]");
      if (!text) { if (holder) holder.remove(); return; }
      if (!holder) {
        holder = document.createElement("p");
        holder.setAttribute("data-rank-figure-status", "");
        holder.setAttribute("role", "status");
        element.prepend(holder);
      }
      holder.className = "empty";
      holder.textContent = text;
    }

    function formParams() {
      const params = { colour: form.elements.rank_colour.value };
      FIELDS.forEach((name) => { params[`sel_${name}`] = form.elements[`sel_${name}`].value.trim(); });
      return params;
    }

    function urlFor(params) {
      const url = new URL(element.dataset.figureUrl, window.location.origin);
      if (!params) return url;
      url.search = "";
      Object.entries(params).forEach(([key, value]) => { if (value) url.searchParams.set(key, value); });
      return url;
    }

    function showErrors(found) {
      if (!errors) return;
      errors.replaceChildren();
      FIELDS.forEach((name) => {
        const input = form && form.elements[`sel_${name}`];
        const message = found[name];
        if (input) {
          if (message) {
            input.setAttribute("aria-invalid", "true");
            input.setAttribute("aria-describedby", `sel-${name}-error`);
          } else {
            input.removeAttribute("aria-invalid");
            input.removeAttribute("aria-describedby");
          }
        }
        if (!message) return;
        const line = document.createElement("p");
        line.className = "form-errors";
        line.id = `sel-${name}-error`;
        line.setAttribute("role", "alert");
        line.textContent = `${name} selection ignored: ${message}`;
        errors.append(line);
      });
    }

    function markGrid(cells) {
      const chosen = new Set((cells || []).map(([stage, replica]) => `${stage}-${replica}`));
      document.querySelectorAll(".pp-grid td[data-cell]").forEach((cell) => {
        cell.classList.toggle("selected", chosen.has(cell.dataset.cell));
      });
    }

    function follow(params) {
      const address = new URL(window.location.href);
      address.searchParams.set("rank_colour", params.colour);
      FIELDS.forEach((name) => {
        const value = params[`sel_${name}`];
        if (value) address.searchParams.set(`sel_${name}`, value); else address.searchParams.delete(`sel_${name}`);
      });
      window.history.replaceState(window.history.state, "", address);
    }

    async function draw(params) {
      first = true;
      if (controller) controller.abort();
      controller = new AbortController();
      element.setAttribute("aria-busy", "true");
      let body;
      try {
        const response = await fetch(urlFor(params), { headers: { Accept: "application/json" }, credentials: "same-origin",
                                                        signal: controller.signal });
        body = await response.json().catch(() => ({}));
        if (!response.ok) {
          const problem = (body.errors && body.errors[0] && body.errors[0].message) || body.detail || `${response.status} ${response.statusText}`;
          throw new Error(problem);
        }
        await plotly(element);
      } catch (error) {
        if (error.name === "AbortError") return;
        element.removeAttribute("aria-busy");
        if (element.dataset.rendered === "true") {
          if (note) note.textContent = `The rank map could not be redrawn: ${error.message}`;
        } else {
          status(`The rank map could not be loaded: ${error.message}`);
          element.setAttribute("data-rendered", "error");
        }
        return;
      }
      status("");
      await Plotly.react(element, body.figure.data, body.figure.layout, config);
      element.removeAttribute("aria-busy");
      element.setAttribute("data-rendered", "true");
      element.setAttribute("data-colour", body.colour);
      element.setAttribute("aria-label", `The job's nodes on the network, coloured by ${body.colour}`);
      showErrors(body.errors || {});
      if (count) count.textContent = body.selected_ranks === null ? "" : `${plural(body.selected_ranks, "rank")} selected`;
      if (note && body.note) note.textContent = body.note;
      markGrid(body.grid_selected);
      if (params) follow(params);
      element.dispatchEvent(new CustomEvent("rankmap:drawn", { detail: body }));
      if (!wired) {
        wired = true;
        element.on("plotly_click", (event) => {
          const point = event.points && event.points[0];
          const host = point && point.customdata && point.customdata[0];
          if (element.dataset.nodeUrl && host && !String(host).startsWith("switch")) {
            window.location.href = element.dataset.nodeUrl.replace("HOSTNAME", encodeURIComponent(host));
          }
        });
      }
    }

    if (form) {
      form.addEventListener("submit", (event) => { event.preventDefault(); draw(formParams()); });
      form.elements.rank_colour.addEventListener("change", () => draw(formParams()));
      document.querySelectorAll(".pp-grid a[data-select-dp]").forEach((link) => {
        link.addEventListener("click", (event) => {
          event.preventDefault();
          form.elements.sel_dp.value = link.dataset.selectDp;
          form.elements.sel_pp.value = link.dataset.selectPp;
          form.elements.sel_tp.value = "";
          draw(formParams());
        });
      });
    }
    // Load when near the viewport: the map is below the first screen, and its JSON is the biggest
    // thing the panel sends.
    const load = () => { if (!first) { first = true; draw(null); } };
    if ("IntersectionObserver" in window) {
      const observer = new IntersectionObserver((entries) => {
        if (entries.some((entry) => entry.isIntersecting)) { observer.disconnect(); load(); }
      }, { rootMargin: "300px 0px" });
      observer.observe(element);
    } else {
      load();
    }
    element.addEventListener("rankmap:load", load);
  }

  function start() {
    document.querySelectorAll("#rank-figure[data-figure-url]").forEach((element) => {
      if (element.dataset.rankMap) return;
      element.dataset.rankMap = "wired";
      init(element);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
