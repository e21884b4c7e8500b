// The job comparison (/jobs/compare/?jobs=c/1,c/2): the first answer comes embedded in the page (#compare-data), its
// verdict already written by the server; render() draws the side-by-side table, the notes and the scaling chart.
// Adding or removing a job fetches /api/v1/jobs/compare/ and redraws in place (no navigation); the address bar
// follows with history.replaceState so the comparison can be shared. A refused job (unknown, not visible, badly
// written) leaves the comparison as it was and says why.
(() => {
  "use strict";

  const form = document.getElementById("compare-form");
  const input = document.getElementById("add-job");
  const status = document.getElementById("compare-status");
  const errors = document.getElementById("compare-errors");
  const MAX = Number(form.dataset.max);
  const REF = /^[^/\s,]+\/[0-9]{1,19}$/;
  let answer = JSON.parse(document.getElementById("compare-data").textContent);
  let pending = null;

  const el = (tag, attributes = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "class") node.className = value; else node.setAttribute(name, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  };
  const sig = (value, digits = 3) => {
    if (value === 0) return "0";
    const magnitude = Math.floor(Math.log10(Math.abs(value)));
    const decimals = Math.max(0, digits - 1 - magnitude);
    return Number(value).toLocaleString("en", { maximumFractionDigits: decimals, minimumFractionDigits: 0 });
  };
  const FORMATS = {
    text: (value) => (value === true ? "yes" : value === false ? "no" : String(value)),
    int: (value) => Number(value).toLocaleString("en", { maximumFractionDigits: 0 }),
    float: (value) => sig(value),
    percent: (value) => `${sig(100 * value, 2)} %`,
    score: (value) => Number(value).toFixed(0),
    joule: (value) => `${sig(value)} J`,
  };
  const shown = (value, format) => (value === null || value === undefined || value === "" ? "–" : (FORMATS[format] || FORMATS.text)(value));
  const refs = () => answer.jobs.map((job) => job.ref);
  const pageUrl = (list) => (list.length ? `${form.action}?jobs=${list.map((ref) => encodeURIComponent(ref).replace(/%2F/gi, "/")).join(",")}` : form.action);

  function showErrors(messages) {
    errors.replaceChildren(...messages.map((message) => el("p", {}, message)));
    errors.hidden = messages.length === 0;
  }

  function renderState() {
    const state = document.getElementById("compare-state");
    const count = answer.jobs.length;
    if (count === 0) {
      state.replaceChildren(el("p", { id: "state-empty" },
        "Name the jobs to compare below (as cluster/job_id), or follow a job page's “compare with other runs of this model” link. " +
        "With two or more jobs you see them side by side with the differences marked; with runs of one model at different GPU counts, how it scales."));
    } else if (count === 1) {
      state.replaceChildren(el("p", { id: "state-one" }, "One job alone has nothing to be compared with: add another run below."));
    } else {
      state.replaceChildren();
    }
    document.getElementById("verdict-line").textContent = answer.verdict;
  }

  function renderChips() {
    const chips = document.getElementById("compare-chips");
    chips.replaceChildren(...answer.jobs.map((job) => {
      const remove = el("button", { type: "button", class: "chip-remove", "aria-label": `Remove ${job.ref}`, title: `Remove ${job.ref}` }, "×");
      remove.addEventListener("click", () => update(refs().filter((ref) => ref !== job.ref)));
      return el("li", { "data-ref": job.ref }, el("a", { href: job.link }, job.ref), remove);
    }));
  }

  function renderTable() {
    const side = document.getElementById("compare-side");
    side.hidden = answer.jobs.length === 0;
    const table = document.getElementById("compare-table");
    const head = el("tr", {}, el("th", { scope: "col" }, el("span", { class: "visually-hidden" }, "Fact")));
    for (const job of answer.jobs) {
      head.append(el("th", { scope: "col", class: "num" }, el("a", { href: job.link }, job.ref),
        el("span", { class: "job-name" }, job.name || "")));
    }
    table.tHead.replaceChildren(head);
    const body = [];
    let section = null;
    const several = answer.jobs.length > 1;
    for (const row of answer.rows) {
      if (row.section !== section) {
        section = row.section;
        body.push(el("tr", { class: "section" }, el("th", { scope: "colgroup", colspan: String(answer.jobs.length + 1) }, section)));
      }
      const differs = several && row.differs;
      const label = el("th", { scope: "row" }, row.label);
      if (differs) label.append(" ", el("span", { class: "differs-marker", title: "the jobs differ here" }, "≠"), el("span", { class: "visually-hidden" }, " (differs)"));
      const tr = el("tr", { "data-key": row.key, class: differs ? "differs" : "" }, label);
      for (const value of row.values) tr.append(el("td", { class: row.format === "text" ? "" : "num" }, shown(value, row.format)));
      body.push(tr);
    }
    table.tBodies[0].replaceChildren(...body);
    const missing = answer.jobs.filter((job) => job.missing.length);
    const notes = document.getElementById("compare-missing");
    if (!missing.length) {
      notes.replaceChildren();
      return;
    }
    notes.replaceChildren(el("details", {}, el("summary", {}, `Why some numbers are missing (${missing.length} job${missing.length === 1 ? "" : "s"})`),
      el("ul", {}, ...missing.map((job) => el("li", {}, el("strong", {}, job.ref), `: ${job.missing.join("; ")}`)))));
  }

  // "baseline" (the smallest run), "strong" (its global batch), "weak" (another one); the batch may be unknown.
  const scalingLabel = (run) => run.kind || "batch unknown";

  function renderScaling() {
    const section = document.getElementById("compare-scaling");
    const scaling = answer.scaling;
    section.hidden = answer.jobs.length === 0;
    document.getElementById("scaling-note").textContent = scaling.note;
    const chart = document.getElementById("scaling-chart");
    const table = document.getElementById("scaling-table");
    const runs = scaling.runs;
    chart.hidden = table.hidden = runs.length === 0;
    table.tBodies[0].replaceChildren(...runs.map((run) => el("tr", { "data-job": run.job },
      el("td", {}, run.job), el("td", { class: "num" }, FORMATS.int(run.gpus)), el("td", { class: "num" }, shown(run.global_batch, "int")),
      el("td", { class: "num" }, shown(run.tokens_per_s_per_gpu, "float")), el("td", { class: "num" }, `${shown(run.speedup, "float")}×`),
      el("td", { class: "num" }, `${sig(run.ideal_speedup)}×`), el("td", { class: "num" }, shown(run.efficiency, "percent")),
      el("td", {}, scalingLabel(run)))));
    chart.dataset.rendered = "false";
    if (!runs.length || !window.Plotly) {
      if (window.Plotly) Plotly.purge(chart);
      return;
    }
    const gpus = runs.map((run) => run.gpus);
    const base = runs[0].tokens_per_s_per_gpu;
    const labels = runs.map(scalingLabel);
    const symbols = labels.map((label) => ({ baseline: "square", strong: "circle", weak: "diamond" })[label] || "circle");
    const hover = runs.map((run, index) => `${run.job}<br>${run.gpus} GPUs, global batch ${run.global_batch ?? "unknown"}<br>${labels[index]}`);
    const span = [gpus[0], gpus[gpus.length - 1]];
    // Several runs at one GPU count (another placement, another layout) are all shown; the line joins the best of each.
    const best = new Map();
    for (const run of runs) if (!best.has(run.gpus) || best.get(run.gpus).tokens_per_s_per_gpu < run.tokens_per_s_per_gpu) best.set(run.gpus, run);
    const bestRuns = [...best.values()];
    const points = (yaxis, values, color, name, text, hovertemplate) => ({
      // a label above a point over the ideal line, below one under it: never on the dashed line itself
      x: gpus, y: values, name, mode: "markers+text", text, cliponaxis: false, xaxis: yaxis === "y" ? "x" : "x2", yaxis,
      textposition: runs.map((run) => (run.efficiency > 1.001 ? "top center" : "bottom center")),
      marker: { size: 10, symbol: symbols, color }, customdata: hover, hovertemplate });
    const line = (yaxis, values, color, name) => ({ x: bestRuns.map((run) => run.gpus), y: values, name, mode: "lines",
      xaxis: yaxis === "y" ? "x" : "x2", yaxis, line: { color, width: 2 }, hoverinfo: "skip", showlegend: false });
    const traces = [
      points("y", runs.map((run) => run.tokens_per_s_per_gpu), "#1f4e79", "tokens/s per GPU", labels,
        "%{customdata}<br>%{y:,.0f} tokens/s per GPU<extra></extra>"),
      { x: span, y: [base, base], name: "ideal (no loss per GPU)", mode: "lines", line: { dash: "dash", color: "#5a6472" }, hoverinfo: "skip" },
      points("y2", runs.map((run) => 100 * run.efficiency), "#b85c00", "scaling efficiency", runs.map((run) => `${sig(100 * run.efficiency, 2)} %`),
        "%{customdata}<br>efficiency %{y:.1f} %<extra></extra>"),
      { x: span, y: [100, 100], name: "ideal (100 %)", mode: "lines", xaxis: "x2", yaxis: "y2", line: { dash: "dash", color: "#5a6472" },
        hoverinfo: "skip", showlegend: false },
      line("y", bestRuns.map((run) => run.tokens_per_s_per_gpu), "#1f4e79", "best tokens/s per GPU at each GPU count"),
      line("y2", bestRuns.map((run) => 100 * run.efficiency), "#b85c00", "best efficiency at each GPU count"),
    ];
    const perGpu = runs.map((run) => run.tokens_per_s_per_gpu);
    const efficiencies = runs.map((run) => 100 * run.efficiency);
    const xaxis = { type: "log", tickvals: gpus, ticktext: gpus.map(String), title: { text: "GPUs" }, range: [Math.log10(gpus[0]) - 0.12, Math.log10(gpus[gpus.length - 1]) + 0.12] };
    Plotly.react(chart, traces, {
      height: 520, margin: { l: 70, r: 20, t: 30, b: 50 }, hovermode: "closest",
      legend: { orientation: "h", x: 0, y: 1.08 },
      grid: { rows: 2, columns: 1, pattern: "independent", roworder: "top to bottom" },
      xaxis: { ...xaxis, anchor: "y", title: { text: "" } }, xaxis2: { ...xaxis, anchor: "y2" },
      yaxis: { domain: [0.56, 1], title: { text: "tokens/s per GPU" }, rangemode: "tozero", range: [0, 1.2 * Math.max(base, ...perGpu)] },
      yaxis2: { domain: [0, 0.42], title: { text: "efficiency %" }, range: [0, Math.max(115, 1.15 * Math.max(...efficiencies))] },
    }, { displaylogo: false, responsive: true }).then(() => { chart.dataset.rendered = "true"; });
  }

  function render() {
    renderState();
    renderChips();
    renderTable();
    renderScaling();
  }

  function emptyAnswer() {
    return { jobs: [], rows: [], same_model: false, verdict: "Name two or more jobs to compare them.",
      scaling: { runs: [], model: null, note: "Scaling needs at least two runs of one model at different GPU counts.", left_out: [] } };
  }

  async function update(list) {
    if (pending) pending.abort();
    showErrors([]);
    document.documentElement.dataset.compareReady = "false";
    if (!list.length) {
      answer = emptyAnswer();
      history.replaceState(null, "", pageUrl(list));
      render();
      document.documentElement.dataset.compareReady = "true";
      return;
    }
    pending = new AbortController();
    status.textContent = "Comparing…";
    try {
      const query = list.map((ref) => encodeURIComponent(ref).replace(/%2F/gi, "/")).join(",");
      const response = await fetch(`${form.dataset.api}?jobs=${query}`, { headers: { Accept: "application/json" }, credentials: "same-origin", signal: pending.signal });
      const body = await response.json().catch(() => ({ detail: `The server answered ${response.status}.` }));
      if (!response.ok) {
        showErrors([`${body.detail || `The server answered ${response.status}.`} The comparison is unchanged.`]);
      } else {
        answer = body;
        history.replaceState(null, "", pageUrl(refs()));
        render();
      }
      status.textContent = "";
    } catch (error) {
      if (error.name === "AbortError") return;
      status.textContent = "";
      showErrors([`Could not reach the server (${error.message}); the comparison is unchanged.`]);
    }
    document.documentElement.dataset.compareReady = "true";
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const asked = input.value.split(/[\s,]+/).map((ref) => ref.trim()).filter(Boolean);
    if (!asked.length) {
      showErrors(["Give a job as cluster/job_id, e.g. alps/1234."]);
      return;
    }
    const bad = asked.filter((ref) => !REF.test(ref));
    if (bad.length) {
      showErrors([`${bad.join(", ")}: give a job as cluster/job_id, e.g. alps/1234; the job id is a whole number.`]);
      return;
    }
    const list = refs();
    for (const ref of asked) if (!list.includes(ref)) list.push(ref);
    if (list.length > MAX) {
      showErrors([`At most ${MAX} jobs can be compared at once; remove one first.`]);
      return;
    }
    if (list.length === refs().length) {
      showErrors([`${asked.join(", ")} ${asked.length === 1 ? "is" : "are"} already compared.`]);
      return;
    }
    input.value = "";
    update(list);
  });

  if (answer.jobs.length) history.replaceState(null, "", pageUrl(refs()));
  render();
  document.documentElement.dataset.compareReady = "true";
})();
