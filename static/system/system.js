// The system page: after first paint, fetch the figures' JSON once and draw the dragonfly (every node
// coloured in the browser from compact arrays), the load per switch, the saturation histogram and the
// compute-vs-memory scatter. Colouring and histogram window switch in place (Plotly.restyle / react).
// <html data-system-page-ready="true"> marks the map drawn (the benchmark and browser tests wait for it).
(() => {
  const root = document.documentElement;
  root.dataset.systemPageReady = "false";
  const FREE = "#d5dbe1";
  const HIDDEN = "#8a939c";
  const VIRIDIS = [[0, [68, 1, 84]], [0.25, [59, 82, 139]], [0.5, [33, 145, 140]], [0.75, [94, 201, 98]], [1, [253, 231, 37]]];
  const CATEGORY = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"];
  const VETTING = { healthy: "#2e7d32", returned: "#66bb6a", suspect: "#f2a900", drain_recommended: "#ef6c00",
                    drained: "#c62828", in_repair: "#6a1b9a" };
  const config = { responsive: true, displaylogo: false };

  const viridis = (value) => {
    const t = Math.min(1, Math.max(0, value / 100));
    for (let i = 1; i < VIRIDIS.length; i += 1) {
      const [t1, c1] = VIRIDIS[i];
      const [t0, c0] = VIRIDIS[i - 1];
      if (t <= t1) {
        const f = (t - t0) / (t1 - t0);
        return `rgb(${c0.map((c, k) => Math.round(c + f * (c1[k] - c))).join(",")})`;
      }
    }
    return "rgb(253,231,37)";
  };
  const gradient = () => VIRIDIS.map(([t, c]) => `rgb(${c.join(",")}) ${t * 100}%`).join(", ");
  const plotlyReady = () => new Promise((resolve) => {
    if (typeof Plotly !== "undefined") { resolve(); return; }
    const wait = setInterval(() => { if (typeof Plotly !== "undefined") { clearInterval(wait); resolve(); } }, 20);
  });
  const esc = (text) => String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));

  // colouring -> {colours per node, legend html}
  function colouring(mode, data) {
    const { map, jobs } = data;
    const n = map.hosts.length;
    const colours = new Array(n);
    let legend = "";
    if (mode === "s") {
      for (let i = 0; i < n; i += 1) {
        const job = map.job[i] >= 0 ? jobs[map.job[i]] : null;
        colours[i] = !job ? FREE : (job.score === null ? HIDDEN : viridis(job.score));
      }
      legend = `<span class="scale"><span>S 0</span><span class="bar" style="background: linear-gradient(to right, ${gradient()})"></span><span>100</span></span>`
        + `<span class="swatch" style="background:${HIDDEN}"></span>running, not scored <span class="swatch" style="background:${FREE}"></span>free`;
    } else if (mode === "limiter") {
      const names = [...new Set(jobs.map((job) => job.limiter).filter(Boolean))].sort();
      const colour = Object.fromEntries(names.map((name, k) => [name, CATEGORY[k % CATEGORY.length]]));
      for (let i = 0; i < n; i += 1) {
        const job = map.job[i] >= 0 ? jobs[map.job[i]] : null;
        colours[i] = !job ? FREE : (job.limiter ? colour[job.limiter] : HIDDEN);
      }
      legend = names.map((name) => `<span class="swatch" style="background:${colour[name]}"></span>${esc(name)}`).join(" ")
        + ` <span class="swatch" style="background:${HIDDEN}"></span>running, not scored <span class="swatch" style="background:${FREE}"></span>free`;
    } else if (mode === "straggler") {
      for (let i = 0; i < n; i += 1) {
        colours[i] = map.straggler[i] ? "#d62728" : (map.job[i] >= 0 ? "#9ecae1" : FREE);
      }
      legend = `<span class="swatch" style="background:#d62728"></span>straggler node <span class="swatch" style="background:#9ecae1"></span>running, keeps pace or not scored <span class="swatch" style="background:${FREE}"></span>free`;
    } else {
      const states = map.vetting_states;
      for (let i = 0; i < n; i += 1) colours[i] = VETTING[states[map.vetting[i]]] || HIDDEN;
      legend = states.map((state) => `<span class="swatch" style="background:${VETTING[state] || HIDDEN}"></span>${esc(state.replace("_", " "))}`).join(" ");
    }
    return { colours, legend };
  }

  function hoverText(data) {
    const { map, jobs } = data;
    return map.hosts.map((host, i) => {
      const job = map.job[i] >= 0 ? jobs[map.job[i]] : null;
      const state = map.vetting_states[map.vetting[i]];
      let text = `<b>${host}</b>`;
      if (job) {
        text += `<br>${esc(job.label)}<br>S ${job.score === null ? "not scored" : job.score}`
          + (job.limiter ? ` · limiter ${esc(job.limiter)}` : "") + ` · ${job.gpus} GPUs`;
      } else text += "<br>free";
      if (map.straggler[i]) text += "<br>straggler";
      if (state !== "healthy") text += `<br>vetting: ${state.replace("_", " ")}`;
      return text;
    });
  }

  async function drawMap(element, data, mode) {
    const { map } = data;
    const { colours, legend } = colouring(mode, data);
    document.getElementById("system-legend").innerHTML = legend;
    const nodes = { type: "scatter", mode: "markers", x: map.x, y: map.y, name: "nodes", hoverinfo: "text",
                    text: hoverText(data), marker: { symbol: "square", size: 7, color: colours, line: { width: 0 } } };
    const switches = { type: "scatter", mode: "markers", x: map.switches.x, y: map.switches.y, name: "switches",
                       text: map.switches.names.map((name) => `switch ${name}`), hoverinfo: "text",
                       marker: { symbol: "diamond", size: 6, color: "#5a6472" } };
    const layout = {
      height: map.height, margin: { l: 10, r: 10, t: 10, b: 10 }, showlegend: false, hovermode: "closest", dragmode: "pan",
      xaxis: { visible: false }, yaxis: { visible: false, scaleanchor: "x", scaleratio: 1 },
      annotations: map.labels.map((label) => ({ x: label.x, y: label.y, text: label.text, showarrow: false, xanchor: "left",
                                                 font: { size: 11, color: "#1b2430" } })),
    };
    element.innerHTML = "";
    await Plotly.newPlot(element, [nodes, switches], layout, { ...config, scrollZoom: true });
    element.dataset.colour = mode;
  }

  async function recolour(element, data, mode) {
    const { colours, legend } = colouring(mode, data);
    await Plotly.restyle(element, { "marker.color": [colours] }, [0]);
    document.getElementById("system-legend").innerHTML = legend;
    element.dataset.colour = mode;
    element.setAttribute("aria-label", `Every node of the machine coloured by ${mode === "s" ? "the running job's saturation" : mode}`);
  }

  function drawLoad(element, data) {
    const rows = data.switches.filter((row) => row.gpus > 0);
    if (!rows.length) { element.innerHTML = '<p class="muted">No running job on any switch.</p>'; return; }
    const scored = rows.filter((row) => row.mean_s !== null);
    const unscored = rows.filter((row) => row.mean_s === null);
    const traces = [
      { type: "bar", name: "GPUs of scored jobs", x: scored.map((row) => row.switch), y: scored.map((row) => row.gpus),
        marker: { color: scored.map((row) => viridis(row.mean_s)) },
        customdata: scored.map((row) => [row.jobs, row.mean_s, row.idle_gpus]),
        hovertemplate: "switch %{x}<br>%{y} GPUs · %{customdata[0]} jobs<br>mean S %{customdata[1]}<br>idle GPUs %{customdata[2]}<extra></extra>" },
      { type: "bar", name: "GPUs of unscored jobs", x: unscored.map((row) => row.switch), y: unscored.map((row) => row.gpus),
        marker: { color: HIDDEN }, customdata: unscored.map((row) => [row.jobs]),
        hovertemplate: "switch %{x}<br>%{y} GPUs · %{customdata[0]} jobs, not scored<extra></extra>" },
    ];
    const order = rows.map((row) => row.switch);
    Plotly.newPlot(element, traces, {
      height: 260, margin: { l: 50, r: 10, t: 10, b: 40 }, barmode: "stack", legend: { orientation: "h", y: 1.15 },
      xaxis: { type: "category", categoryorder: "array", categoryarray: order, title: { text: "switch (group.switch), bar colour = mean S" }, showticklabels: rows.length <= 60 },
      yaxis: { title: { text: "GPUs" } },
    }, config);
  }

  function drawHistogram(element, data, window) {
    const histogram = data.histogram[window];
    const bins = histogram.bins;
    const colours = bins.map((bin) => bin.bin === "unscored" ? HIDDEN : viridis(parseInt(bin.bin, 10) + 5));
    element.dataset.window = window;
    return Plotly.react(element, [{ type: "bar", x: bins.map((bin) => bin.bin), y: bins.map((bin) => bin.gpu_hours),
      marker: { color: colours }, hovertemplate: "S %{x}: %{y:,.0f} GPU-hours<extra></extra>" }], {
      height: 260, margin: { l: 60, r: 10, t: 30, b: 40 },
      title: { text: `${histogram.gpu_hours.toLocaleString()} GPU-hours of ${histogram.jobs} jobs`, font: { size: 13 } },
      xaxis: { type: "category", title: { text: "saturation S" } }, yaxis: { title: { text: "GPU-hours" }, rangemode: "tozero" },
    }, config);
  }

  function drawScatter(element, data) {
    const scored = data.jobs.filter((job) => job.compute !== null && job.memory !== null);
    if (!scored.length) { element.innerHTML = '<p class="muted">No running job is scored yet.</p>'; return; }
    const size = (job) => 8 + 4 * Math.sqrt(job.gpus);
    const mine = scored.filter((job) => job.visible);
    const others = scored.filter((job) => !job.visible);
    const trace = (jobs, visible) => ({
      type: "scatter", mode: "markers", name: visible ? "jobs you may see" : "another project's job",
      x: jobs.map((job) => job.compute), y: jobs.map((job) => job.memory),
      customdata: jobs.map((job) => [job.label, job.score === null ? "not scored" : job.score, job.gpus, job.url || ""]),
      hovertemplate: "%{customdata[0]}<br>compute %{x} · memory %{y}<br>S %{customdata[1]} · %{customdata[2]} GPUs<extra></extra>",
      marker: { size: jobs.map(size), sizemode: "diameter", color: visible ? jobs.map((job) => (job.score === null ? FREE : viridis(job.score))) : HIDDEN,
                opacity: 0.8, line: { width: 1, color: "#1b2430" } },
    });
    Plotly.newPlot(element, [trace(others, false), trace(mine, true)], {
      height: 380, margin: { l: 60, r: 10, t: 10, b: 50 }, legend: { orientation: "h", y: 1.08 },
      xaxis: { title: { text: "compute saturation (0-100)" }, range: [-5, 105] },
      yaxis: { title: { text: "memory saturation (0-100)" }, range: [-5, 105] },
      shapes: [{ type: "line", x0: 0, y0: 0, x1: 100, y1: 100, line: { dash: "dot", color: "#8a939c", width: 1 } }],
    }, config);
    element.on("plotly_click", (event) => {
      const url = event.points && event.points[0] && event.points[0].customdata[3];
      if (url) window.location.href = url;
    });
  }

  async function start() {
    const mapElement = document.getElementById("system-map");
    if (!mapElement) return;
    let data;
    const t0 = performance.now();
    try {
      // The same request as the <link rel="preload"> in the page's head (same URL, mode and credentials), so the
      // browser hands over the answer it started fetching with the HTML.
      const response = await fetch(mapElement.dataset.url, { credentials: "same-origin" });
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      data = await response.json();
    } catch (error) {
      mapElement.innerHTML = `<p class="form-errors" role="alert">The map could not be loaded: ${esc(error.message)}</p>`;
      return;
    }
    const t1 = performance.now();
    await plotlyReady();
    const t2 = performance.now();
    await drawMap(mapElement, data, "s");
    root.dataset.systemPageReady = "true";
    // Where the first screen's time went (the benchmark prints it): data, waiting for Plotly, drawing the map.
    root.dataset.systemTiming = `start ${Math.round(t0)} ms, data ${Math.round(t1 - t0)} ms, Plotly ${Math.round(t2 - t1)} ms, map ${Math.round(performance.now() - t2)} ms`;
    document.querySelectorAll(".colour-mode").forEach((button) => button.addEventListener("click", async () => {
      document.querySelectorAll(".colour-mode").forEach((other) => other.setAttribute("aria-pressed", String(other === button)));
      await recolour(mapElement, data, button.dataset.colour);
    }));
    drawLoad(document.getElementById("system-load"), data);
    drawScatter(document.getElementById("system-scatter"), data);
    // The histogram reads a week of jobs: asked for once the first screen is drawn.
    const histogram = document.getElementById("system-histogram");
    try {
      const response = await fetch(histogram.dataset.url, { credentials: "same-origin" });
      if (!response.ok) throw new Error(`the server answered ${response.status}`);
      const week = await response.json();
      histogram.innerHTML = "";
      await drawHistogram(histogram, week, "24h");
      document.querySelectorAll(".histogram-window").forEach((button) => button.addEventListener("click", () => {
        document.querySelectorAll(".histogram-window").forEach((other) => other.setAttribute("aria-pressed", String(other === button)));
        drawHistogram(histogram, week, button.dataset.window);
      }));
    } catch (error) {
      histogram.innerHTML = `<p class="form-errors" role="alert">The histogram could not be loaded: ${esc(error.message)}</p>`;
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
