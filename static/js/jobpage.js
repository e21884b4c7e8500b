// The job page: figures load after the first paint and change in place.
//
// - Every `.figure--lazy` loads when it comes near the viewport: `[data-heatmap-url]` elements from the
//   compact heatmap API, `[data-figure-url]` elements as Plotly figure JSON.
// - Heatmap controls (`[data-heatmap-controls=<figure id>]`, selects with `data-param`) redraw with
//   Plotly.react: no navigation; the address bar follows with history.replaceState.
// - Zooming the time axis fetches finer bins for the visible window; `uirevision` keeps the zoom.
// - While the job runs, the first screen and the drawn figures update every `data-live-seconds`,
//   keeping zoom, selections and open tables.
// - Clicking a heatmap row shows that GPU's series against its peers.
(() => {
  "use strict";
  const page = document.querySelector("[data-job-page]");
  if (!page) return;
  const config = { responsive: true, displaylogo: false, scrollZoom: false };
  const state = new Map(); // element id -> {params, window, payload, etag, controller}

  const decode = (b64, rows, cols, zmin, zmax) => {
    if (!b64) return null;
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const span = (zmax - zmin) / 254;
    const out = new Array(rows);
    for (let r = 0; r < rows; r += 1) {
      const row = new Array(cols);
      for (let c = 0; c < cols; c += 1) {
        const q = bytes[r * cols + c];
        row[c] = q === 255 ? null : zmin + q * span;
      }
      out[r] = row;
    }
    return out;
  };

  const fmt = (value, unit) => {
    if (value === null || value === undefined || Number.isNaN(value)) return "–";
    const abs = Math.abs(value);
    const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
    const text = value.toLocaleString("en-US", { maximumFractionDigits: digits });
    return unit ? `${text} ${unit}` : text;
  };

  const plotlyReady = () => new Promise((resolve) => {
    if (typeof Plotly !== "undefined") { resolve(); return; }
    const wait = setInterval(() => { if (typeof Plotly !== "undefined") { clearInterval(wait); resolve(); } }, 20);
  });

  async function getJSON(url, entry) {
    if (entry && entry.controller) entry.controller.abort();
    const controller = new AbortController();
    if (entry) entry.controller = controller;
    const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-cache", signal: controller.signal,
                                        credentials: "same-origin" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      const detail = body.detail || `${response.status} ${response.statusText}`;
      throw new Error(detail);
    }
    return { body, etag: response.headers.get("ETag") };
  }

  function showProblem(element, message) {
    element.setAttribute("data-rendered", "error");
    const note = document.createElement("p");
    note.className = "empty";
    note.setAttribute("role", "status");
    note.textContent = `This figure could not be loaded: ${message}`;
    element.replaceChildren(note);
  }

  // ---------------------------------------------------------------- heatmaps
  function controlsFor(element) {
    return document.querySelector(`[data-heatmap-controls="${element.id}"]`);
  }

  function heatmapParams(element) {
    const params = {};
    const form = controlsFor(element);
    if (form) form.querySelectorAll("[data-param]").forEach((input) => { params[input.dataset.param] = input.value; });
    return params;
  }

  function heatmapUrl(element, entry) {
    const url = new URL(element.dataset.heatmapUrl, window.location.origin);
    const width = element.clientWidth || 900;
    // About one column per 4 pixels of the plot: finer than the eye separates; zooming fetches more.
    const bins = Math.max(60, Math.min(400, Math.floor((width - 160) / 4)));
    Object.entries(entry.params).forEach(([key, value]) => { if (value) url.searchParams.set(key, value); });
    url.searchParams.set("encoding", "u8");
    url.searchParams.set("rows", "auto");
    url.searchParams.set("bins", String(bins));
    if (entry.window) {
      url.searchParams.set("start", entry.window[0]);
      url.searchParams.set("end", entry.window[1]);
    }
    return url.toString();
  }

  function scaleWords(payload) {
    const scale = payload.scale || {};
    const unit = payload.unit || "";
    const range = `${fmt(scale.zmin, unit)} to ${fmt(scale.zmax, unit)}`;
    const rows = payload.rows.length.toLocaleString("en-US");
    let words = payload.mode === "deviation"
      ? `Colour: ${payload.title}, deviation from the median of its peers (${payload.peers || "peers"}), ${range}.`
      : `Colour: ${payload.title}, ${range}${scale.source ? ` (${scale.source})` : ""}; ${scale.bad === "high" ? "high" : "low"} is bad.`;
    words += payload.aggregated_by
      ? ` ${rows} rows, one per ${payload.aggregated_by === "pp" ? "pipeline stage" : payload.aggregated_by}: each cell shows its most extreme GPU; hover for the mean.`
      : ` ${rows} GPUs; click a row for its series against its peers.`;
    if (payload.coverage && payload.coverage.first) words += ` Data ${payload.coverage.first.slice(11, 16)}–${(payload.coverage.last || "").slice(11, 16)} UTC.`;
    return words;
  }

  function drawHeatmap(element, payload) {
    const rows = payload.rows.length;
    const cols = payload.times.length;
    const { zmin, zmax } = payload.scale;
    const z = decode(payload.z, rows, cols, zmin, zmax);
    const mean = payload.mean ? decode(payload.mean, rows, cols, zmin, zmax) : null;
    // Rows are categories named by their labels (the hover says which GPU), unique even if two labels repeat.
    const seen = new Map();
    const labels = payload.rows.map((row) => {
      const count = (seen.get(row.label) || 0) + 1;
      seen.set(row.label, count);
      return count > 1 ? `${row.label} #${count}` : row.label;
    });
    const every = Math.max(1, Math.ceil(rows / 40));
    const tickvals = [];
    for (let r = 0; r < rows; r += every) tickvals.push(labels[r]);
    const unit = payload.unit ? ` ${payload.unit}` : "";
    const trace = {
      type: "heatmap", z, x: payload.times, y: labels, zmin, zmax,
      colorscale: payload.scale.colorscale || "Viridis", reversescale: false, zauto: false,
      colorbar: { thickness: 12, len: 0.9, title: { text: payload.unit || "", side: "right" } },
      hovertemplate: mean
        ? `%{y}<br>%{x}<br>extreme %{z:.3~g}${unit}<br>mean %{customdata:.3~g}${unit}<extra></extra>`
        : `%{y}<br>%{x}<br>%{z:.3~g}${unit}<extra></extra>`,
      hoverongaps: false,
    };
    if (mean) trace.customdata = mean;
    const shapes = [];
    const annotations = [];
    (payload.separators || []).forEach((separator) => {
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: separator.row - 0.5, y1: separator.row - 0.5,
                    line: { color: "#ffffff", width: 1.5 } });
      if (annotations.length < 64) {
        annotations.push({ xref: "paper", x: 1.0, xanchor: "left", yref: "y", y: separator.row, yanchor: "top",
                           text: separator.label, showarrow: false, font: { size: 10, color: "#5a6472" } });
      }
    });
    (payload.shading || []).forEach((shade) => {
      shapes.push({ type: "rect", xref: "x", x0: shade.start, x1: shade.end, yref: "paper", y0: 0, y1: 1,
                    fillcolor: "rgba(255,255,255,0.35)", line: { width: 0 }, layer: "above" });
      annotations.push({ xref: "x", x: shade.start, xanchor: "left", yref: "paper", y: 1.02, yanchor: "bottom",
                         text: shade.label, showarrow: false, font: { size: 10, color: "#5a6472" } });
    });
    const hostRows = payload.host || [];
    const height = Math.max(320, Math.min(720, 140 + rows * 3)) + (hostRows.length ? 24 * hostRows.length + 16 : 0);
    const layout = {
      uirevision: element.id, height, margin: { l: 170, r: annotations.length ? 90 : 20, t: 24, b: 40 },
      xaxis: { type: "date", title: { text: "time (UTC)" } },
      yaxis: { type: "category", autorange: "reversed", tickmode: "array", tickvals, ticktext: tickvals,
               tickfont: { size: 10 }, automargin: true },
      shapes, annotations, plot_bgcolor: "#eceff3",
    };
    const traces = [trace];
    if (hostRows.length) {
      // Issue 39: the host under the GPUs, on the same bins: CPU busy, data-loader CPU, host memory (0-100 %).
      const strip = Math.min(0.3, (24 * hostRows.length) / height);
      layout.yaxis.domain = [strip + 0.03, 1];
      layout.xaxis.anchor = "y2";  // the time axis under the strip, not over it
      layout.yaxis2 = { type: "category", autorange: "reversed", domain: [0, strip], tickfont: { size: 10 },
                        automargin: true, fixedrange: true };
      trace.colorbar.len = 0.9 - strip;
      trace.colorbar.y = 1;
      trace.colorbar.yanchor = "top";
      traces.push({
        type: "heatmap", x: payload.times, y: hostRows.map((row) => row.label), z: hostRows.map((row) => row.values),
        yaxis: "y2", zmin: 0, zmax: 1, showscale: false, hoverongaps: false, name: "host",
        colorscale: [[0, "#f6efe7"], [1, "#b5651d"]], hovertemplate: "%{y}<br>%{x}<br>%{z:.0%}<extra></extra>",
      });
    }
    return Plotly.react(element, traces, layout, config);
  }

  async function loadHeatmap(element, { live = false } = {}) {
    const entry = state.get(element.id) || { params: heatmapParams(element), window: null };
    state.set(element.id, entry);
    entry.params = heatmapParams(element);
    const url = heatmapUrl(element, entry);
    const began = performance.now();
    let answer;
    try {
      answer = await getJSON(url, entry);
    } catch (error) {
      if (error.name === "AbortError") return;
      if (!live) showProblem(element, error.message);
      return;
    }
    if (live && answer.etag && answer.etag === entry.etag) return; // nothing new
    entry.etag = answer.etag;
    entry.payload = answer.body;
    await plotlyReady();
    if (element.querySelector(".skeleton, .empty")) element.replaceChildren();
    const fetched = performance.now();
    await drawHeatmap(element, answer.body);
    // Where the time of the last draw went (the bench prints it): fetch and parse, then decode and draw.
    element.dataset.timing = `fetch ${Math.round(fetched - began)} ms, draw ${Math.round(performance.now() - fetched)} ms`;
    const scale = document.getElementById(`${element.id}-scale`);
    if (scale) scale.textContent = scaleWords(answer.body);
    element.setAttribute("data-rendered", "true");
    element.setAttribute("data-rendered-metric", entry.params.metric || entry.params.field || "");
    element.setAttribute("data-rendered-mode", answer.body.mode || "value");
    element.setAttribute("data-rendered-sort", entry.params.sort || "");
    element.setAttribute("data-updated", String(Date.now()));
    if (!element.dataset.wired) wireHeatmap(element);
  }

  function wireHeatmap(element) {
    element.dataset.wired = "true";
    let timer = null;
    element.on("plotly_relayout", (event) => {
      const entry = state.get(element.id);
      if (!entry) return;
      let next = entry.window;
      if (event["xaxis.autorange"]) next = null;
      else if (event["xaxis.range[0]"] && event["xaxis.range[1]"]) next = [event["xaxis.range[0]"], event["xaxis.range[1]"]];
      else if (event["xaxis.range"]) next = event["xaxis.range"];
      else return;
      const toIso = (value) => new Date(String(value).replace(" ", "T") + (String(value).endsWith("Z") ? "" : "Z")).toISOString();
      next = next ? [toIso(next[0]), toIso(next[1])] : null;
      if (JSON.stringify(next) === JSON.stringify(entry.window)) return;
      entry.window = next;
      clearTimeout(timer);
      timer = setTimeout(() => loadHeatmap(element), 250); // finer bins for the visible window
    });
    element.on("plotly_click", (event) => {
      const entry = state.get(element.id);
      const point = event.points && event.points[0];
      if (!entry || !point || point.curveNumber > 0) return;  // the host strip (curve 1) has no GPU series
      const row = entry.payload.rows[point.pointIndex ? point.pointIndex[0] : -1];
      if (!row) return;
      if (row.gpu !== null && row.gpu !== undefined && element.dataset.seriesUrl) {
        showSeries(element, `${row.host}:${row.gpu}`);
      } else if (row.host && element.dataset.nodeUrl) {
        window.location.href = element.dataset.nodeUrl.replace("HOSTNAME", encodeURIComponent(row.host));
      }
    });
  }

  function wireControls() {
    document.querySelectorAll("[data-heatmap-controls]").forEach((form) => {
      const element = document.getElementById(form.dataset.heatmapControls);
      if (!element) return;
      form.addEventListener("submit", (event) => { event.preventDefault(); loadHeatmap(element); });
      form.querySelectorAll("select, input").forEach((input) => {
        input.addEventListener("change", () => {
          const address = new URL(window.location.href);
          address.searchParams.set(input.name, input.value);
          window.history.replaceState(window.history.state, "", address);
          loadHeatmap(element);
        });
      });
    });
  }

  // ---------------------------------------------------------------- one GPU against its peers
  async function showSeries(heatmap, gpu) {
    const holder = document.getElementById(heatmap.dataset.seriesTarget || "gpu-series");
    if (!holder) return;
    const entry = state.get(heatmap.id) || { params: heatmapParams(heatmap) };
    const url = new URL(heatmap.dataset.seriesUrl, window.location.origin);
    url.searchParams.set("gpus", gpu);
    url.searchParams.set("metric", entry.params.metric || "S");
    holder.hidden = false;
    const title = holder.querySelector(".gpu-series__title");
    const figure = holder.querySelector(".gpu-series__figure");
    const note = holder.querySelector(".gpu-series__note");
    title.textContent = `GPU ${gpu} against its peers`;
    let answer;
    try {
      answer = (await getJSON(url.toString())).body;
    } catch (error) {
      note.textContent = `The series could not be loaded: ${error.message}`;
      return;
    }
    const series = answer.gpus[0];
    const peers = answer.peers || {};
    const unit = answer.unit || "";
    const traces = [];
    if (peers.p90) {
      traces.push({ type: "scatter", x: answer.times, y: peers.p90, line: { width: 1, dash: "dot", color: "#5a6472" }, name: "peers 90th pct", hoverinfo: "skip" });
      traces.push({ type: "scatter", x: answer.times, y: peers.p10, line: { width: 1, dash: "dot", color: "#5a6472" }, fill: "tonexty",
                    fillcolor: "rgba(31,78,121,0.18)", name: "peers 10–90 %", hoverinfo: "skip" });
      traces.push({ type: "scatter", x: answer.times, y: peers.median, line: { width: 2, color: "#1f4e79" }, name: "peers' median" });
    }
    answer.gpus.forEach((item, index) => {
      traces.push({ type: "scatter", x: answer.times, y: item.values, line: { width: 2.5, color: index ? "#edae49" : "#d1495b" },
                    name: item.label || `${item.host}:${item.gpu}` });
    });
    await plotlyReady();
    await Plotly.react(figure, traces, {
      height: 280, margin: { l: 60, r: 20, t: 10, b: 40 }, uirevision: "series", plot_bgcolor: "white",
      yaxis: { title: { text: `${answer.title}${unit ? ` (${unit})` : ""}` } }, xaxis: { type: "date" },
      legend: { orientation: "h", y: -0.25, font: { size: 11 } }, hovermode: "x unified",
    }, config);
    figure.setAttribute("data-rendered", "true");
    title.textContent = `${series ? series.label || gpu : gpu} against its peers: ${answer.title}`;
    // The GPU's finding, when the straggler detector has one, next to its series.
    const button = document.querySelector(`[data-show-gpu="${CSS.escape(gpu)}"]`);
    const reason = button ? button.closest("li").querySelector(".straggler__reason") : null;
    const said = reason ? reason.textContent.trim() : "";
    note.textContent = `${said ? `Finding: ${said}. ` : ""}${peers.description ? `Peers: ${peers.description}.` : ""}`;
    holder.scrollIntoView({ behavior: "smooth", block: "nearest" });
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-show-gpu]");
    if (!button) return;
    const heatmap = document.querySelector("[data-series-url]");
    if (heatmap) showSeries(heatmap, button.dataset.showGpu);
  });

  // ---------------------------------------------------------------- Plotly figures as JSON
  async function loadFigure(element, { live = false } = {}) {
    const entry = state.get(element.id) || {};
    state.set(element.id, entry);
    let answer;
    try {
      answer = await getJSON(element.dataset.figureUrl, entry);
    } catch (error) {
      if (error.name === "AbortError") return;
      if (!live) showProblem(element, error.message);
      return;
    }
    if (live && answer.etag && answer.etag === entry.etag) return;
    entry.etag = answer.etag;
    const figure = answer.body;
    await plotlyReady();
    if (!figure || !figure.data) {
      element.replaceChildren();
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "No data for this figure.";
      element.append(empty);
      element.setAttribute("data-rendered", "empty");
      return;
    }
    if (element.querySelector(".skeleton")) element.replaceChildren();
    const layout = { ...(figure.layout || {}), uirevision: element.id };
    await Plotly.react(element, figure.data, layout, config);
    element.setAttribute("data-rendered", "true");
    if (!element.dataset.wired && element.dataset.nodeUrl) {
      element.dataset.wired = "true";
      element.on("plotly_click", (event) => {
        const point = event.points && event.points[0];
        const host = point && point.customdata && point.customdata[0];
        if (host && !String(host).startsWith("switch")) {
          window.location.href = element.dataset.nodeUrl.replace("HOSTNAME", encodeURIComponent(host));
        }
      });
    }
  }

  // ---------------------------------------------------------------- node x field table
  async function loadNodeTable(details) {
    if (details.dataset.loaded) return;
    details.dataset.loaded = "true";
    const holder = details.querySelector(".table-scroll");
    let answer;
    try {
      answer = (await getJSON(details.dataset.nodesUrl)).body;
    } catch (error) {
      holder.textContent = `The table could not be loaded: ${error.message}`;
      return;
    }
    const table = document.createElement("table");
    table.className = "table compact";
    const head = table.createTHead().insertRow();
    const th = (text, scope = "col") => { const cell = document.createElement("th"); cell.scope = scope; cell.textContent = text; return cell; };
    head.append(th("Node"), th("GPUs"));
    answer.fields.forEach((field) => head.append(th(`${field.name}${field.unit ? ` (${field.unit})` : ""} min / mean / max`)));
    const body = table.createTBody();
    answer.nodes.forEach((node) => {
      const row = body.insertRow();
      row.append(th(node.host, "row"));
      row.insertCell().textContent = String(node.gpus);
      answer.fields.forEach((field) => {
        const stats = node.stats[String(field.id)] || {};
        const cell = row.insertCell();
        cell.className = "num";
        cell.textContent = `${fmt(stats.min)} / ${fmt(stats.mean)} / ${fmt(stats.max)}`;
      });
    });
    holder.replaceChildren(table);
  }

  document.querySelectorAll("details[data-nodes-url]").forEach((details) => {
    details.addEventListener("toggle", () => { if (details.open) loadNodeTable(details); });
  });

  // PNG buttons are handled by topology.js, which the page loads too.

  // ---------------------------------------------------------------- loading and live updates
  const load = (element, options) => (element.dataset.heatmapUrl ? loadHeatmap(element, options) : loadFigure(element, options));
  const lazy = Array.from(document.querySelectorAll(".figure--lazy"));
  const inView = (element) => {
    const box = element.getBoundingClientRect();
    return box.top < window.innerHeight + 200 && box.bottom > -200;
  };
  const first = lazy.filter(inView);
  const observer = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
    entries.forEach((item) => {
      if (!item.isIntersecting) return;
      observer.unobserve(item.target);
      load(item.target);
    });
  }, { rootMargin: "300px 0px" }) : null;
  lazy.filter((element) => !first.includes(element)).forEach((element) => (observer ? observer.observe(element) : load(element)));
  wireControls();
  Promise.allSettled(first.map((element) => load(element))).then(() => {
    document.documentElement.dataset.jobPageReady = "true";
  });

  if (page.dataset.live === "true") {
    const seconds = Number(page.dataset.liveSeconds) || 30;
    const summary = document.getElementById("first-screen");
    setInterval(async () => {
      if (document.visibilityState !== "visible") return;
      if (summary && summary.dataset.summaryUrl) {
        try {
          const response = await fetch(summary.dataset.summaryUrl, { cache: "no-cache", credentials: "same-origin" });
          if (response.ok) summary.innerHTML = await response.text();
        } catch (error) { /* the next round tries again */ }
      }
      document.querySelectorAll(".figure--lazy[data-rendered='true']").forEach((element) => load(element, { live: true }));
    }, seconds * 1000);
  }

  window.BelvedereJobPage = { loadFigure, loadHeatmap, showSeries };
})();
