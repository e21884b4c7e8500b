// The usage and efficiency report (/reports/): the first report comes embedded in the page (#report-data), its verdict
// already written by the server (read without JavaScript); render() redraws it with the facts;
// changing a filter fetches /api/v1/reports/usage/ and redraws in place (no navigation), and the address bar
// follows with history.replaceState so the view can be shared. Sorting the table is local.
(() => {
  "use strict";

  const PRESETS = { "24h": 24 * 3600e3, "7d": 7 * 24 * 3600e3, "30d": 30 * 24 * 3600e3 };
  const form = document.getElementById("report-filters");
  const LOW_S = Number(form.dataset.lowS); // settings.WASTE_SCORE_BELOW: where triage calls a job wasteful
  const tableBody = document.querySelector("#usage-table tbody");
  let report = JSON.parse(document.getElementById("report-data").textContent);
  let sort = { key: "gpu_hours", dir: -1 };
  let pending = null;

  const number = (value, digits = 0) =>
    value === null || value === undefined ? "–" : Number(value).toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const hours = (value) => number(value, value !== null && value !== 0 && Math.abs(value) < 10 ? 1 : 0);
  const percent = (share) => (share === null || share === undefined ? "–" : `${number(100 * share, 0)} %`);
  const utc = (iso) => iso.replace("T", " ").replace(/:\d\d(\.\d+)?(Z|[+-]00:00)$/, "") + " UTC";
  const el = (tag, attributes = {}, ...children) => {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "class") node.className = value; else node.setAttribute(name, value);
    }
    for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    return node;
  };
  const groupWord = (group) => ({ project: "project", user: "user", partition: "partition" })[group] || group;

  function sLevel(s) {
    if (s === null || s === undefined) return "info";
    return s < LOW_S ? "critical" : s < 60 ? "warning" : "ok";
  }

  function renderVerdict() {
    const t = report.totals;
    const since = utc(report.window.since), until = utc(report.window.until);
    const line = document.getElementById("verdict-line");
    if (!t.jobs) {
      line.textContent = `No job ran in this window (${since} to ${until}) among the jobs you may report on.`;
    } else {
      const parts = [`${hours(t.gpu_hours)} GPU-hours by ${number(t.jobs)} job${t.jobs === 1 ? "" : "s"} from ${since} to ${until}`];
      parts.push(t.mean_saturation === null ? "no job has a saturation score yet"
        : `mean saturation S ${number(t.mean_saturation)} of 100 over the ${percent(t.scored_share)} of GPU-hours that have a score`);
      let lost = `${hours(t.gpu_hours_lost)} GPU-hours lost`;
      if (report.biggest) lost += `, most by ${groupWord(report.group_by)} ${report.biggest.key || "(none)"} (${hours(report.biggest.gpu_hours_lost)} GPU-h, ${percent(report.biggest.share)} of the loss)`;
      parts.push(lost);
      line.textContent = parts.join("; ") + ".";
    }
    const facts = document.getElementById("report-facts");
    const lostShare = t.gpu_hours ? t.gpu_hours_lost / t.gpu_hours : null;
    const items = [
      ["GPU-hours", hours(t.gpu_hours), `${number(t.jobs)} jobs`, "info", "fact-gpu-hours"],
      ["Mean saturation", t.mean_saturation === null ? "–" : number(t.mean_saturation), `over ${percent(t.scored_share)} of GPU-hours scored`, sLevel(t.mean_saturation), "fact-saturation"],
      ["GPU-hours lost", hours(t.gpu_hours_lost), `${percent(lostShare)} of all; ${hours(t.idle_gpu_hours)} on idle GPUs; loss known for ${percent(t.lost_known_share)}`,
        lostShare === null ? "info" : lostShare > 0.5 ? "critical" : lostShare > 0.25 ? "warning" : "ok", "fact-lost"],
      ["Headroom", hours(t.headroom_gpu_hours || 0), "GPU-hours tuning could gain against each GPU model's typical good jobs: not a loss", "info", "fact-headroom"],
      ["Biggest loss", report.biggest ? (report.biggest.key || "(none)") : "–", report.biggest ? `${hours(report.biggest.gpu_hours_lost)} GPU-h, ${percent(report.biggest.share)}` : "nothing lost that is known", "info", "fact-biggest"],
      ["Energy", t.energy_kwh === null ? "–" : `${number(t.energy_kwh)} kWh`, `measured for ${percent(t.energy_share)} of GPU-hours`, "info", "fact-energy"],
    ];
    facts.replaceChildren(...items.map(([label, value, detail, level, id]) =>
      el("div", { class: `fact fact--${level}`, role: "listitem", id },
        el("span", { class: "fact__label" }, label), el("span", { class: "fact__value" }, value), el("span", { class: "fact__detail" }, detail))));
    document.getElementById("report-coverage").textContent = t.jobs
      ? `Coverage: ${percent(t.scored_share)} of the GPU-hours have a saturation score, ${percent(t.energy_share)} a measured energy; ` +
        "the rest is left out of the means and sums, never guessed. Running jobs count until " + utc(report.window.until < report.window.now ? report.window.until : report.window.now) + "." +
        gpuCountWords(report.gpu_counts)
      : "";
  }

  // Jobs whose GPU count Slurm did not give: where it was taken from instead, and those nobody gives (0 GPU-hours).
  const GPU_SOURCES = { tres: "Slurm's TRES (gres/gpu)", topology: "the GPUs of their nodes in the topology", telemetry: "the GPUs seen in their telemetry" };
  function gpuCountWords(counts) {
    if (!counts) return "";
    const parts = Object.entries(counts.inferred || {}).map(([source, entry]) =>
      `${number(entry.jobs)} job${entry.jobs === 1 ? "" : "s"} (${hours(entry.gpu_hours)} GPU-h) from ${GPU_SOURCES[source] || source}`);
    let words = parts.length ? ` GPU counts not given by Slurm were taken for ${parts.join(", ")}.` : "";
    if (counts.unknown_jobs) {
      words += ` ${number(counts.unknown_jobs)} job${counts.unknown_jobs === 1 ? " has" : "s have"} no GPU count from any source ` +
        `(${counts.unknown.join(", ")}${counts.unknown_jobs > counts.unknown.length ? ", …" : ""}) and count${counts.unknown_jobs === 1 ? "s" : ""} no GPU-hours.`;
    }
    return words;
  }

  function rowValue(row, key) {
    if (key === "lost_share") return row.gpu_hours ? row.gpu_hours_lost / row.gpu_hours : null;
    return row[key];
  }

  function renderTable() {
    document.getElementById("table-group").textContent = groupWord(report.group_by);
    const rows = [...report.rows].sort((a, b) => {
      const x = rowValue(a, sort.key), y = rowValue(b, sort.key);
      if (x === y) return String(a.key).localeCompare(String(b.key));
      if (x === null || x === undefined) return 1; // unknowns last, whichever the direction
      if (y === null || y === undefined) return -1;
      return (typeof x === "string" ? x.localeCompare(y) : x - y) * sort.dir;
    });
    const maxLost = Math.max(0, ...rows.map((r) => r.gpu_hours_lost));
    document.querySelectorAll("#usage-table th[data-sort]").forEach((th) => {
      if (th.dataset.sort === sort.key) th.setAttribute("aria-sort", sort.dir < 0 ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
    if (!rows.length) {
      tableBody.replaceChildren(el("tr", {}, el("td", { colspan: "9", class: "empty" }, "No jobs in this window.")));
      return;
    }
    tableBody.replaceChildren(...rows.map((row) => {
      const low = row.mean_saturation !== null && row.mean_saturation < LOW_S;
      const lostShare = rowValue(row, "lost_share");
      const bar = el("span", { class: "lost-bar", style: `--share: ${maxLost ? (100 * row.gpu_hours_lost) / maxLost : 0}%` });
      return el("tr", low ? { class: "row--warn", "data-key": row.key } : { "data-key": row.key },
        el("th", { scope: "row" }, row.key || "(none)"),
        el("td", { class: "num" }, number(row.jobs)),
        el("td", { class: "num" }, hours(row.gpu_hours)),
        el("td", { class: `num s-${sLevel(row.mean_saturation)}` }, row.mean_saturation === null ? "–" : number(row.mean_saturation)),
        el("td", { class: "num" }, percent(row.scored_share)),
        el("td", { class: "num" }, hours(row.idle_gpu_hours)),
        el("td", { class: "num" }, bar, hours(row.gpu_hours_lost)),
        el("td", { class: "num" }, percent(lostShare)),
        el("td", { class: "num", title: `energy measured for ${percent(row.energy_share)} of GPU-hours` },
          row.energy_kwh === null ? "–" : hours(row.energy_kwh)));
    }));
  }

  function renderTopJobs() {
    const body = document.querySelector("#top-jobs tbody");
    if (!report.top_jobs.length) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: "8", class: "empty" }, "No GPU-hours lost that are known.")));
      return;
    }
    body.replaceChildren(...report.top_jobs.map((job) => el("tr", {},
      el("td", {}, el("a", { href: job.url }, `${job.cluster}/${job.job_id}`), " ", el("span", { class: "small muted" }, job.name || ""),
        job.running ? el("span", { class: "badge badge--info" }, "running") : "",
        job.wasteful ? el("span", { class: "badge badge--warning" }, "wasteful") : ""),
      el("td", {}, job.user), el("td", {}, job.account), el("td", { class: "num" }, number(job.gpus)),
      el("td", { class: `num s-${sLevel(job.score)}` }, job.score === null ? "–" : number(job.score)),
      el("td", { class: "num" }, hours(job.gpu_hours)),
      el("td", { class: "num" }, hours(job.gpu_hours_lost_by_job ?? job.gpu_hours_lost),
        job.idle_gpus ? el("span", { class: "small muted" }, ` (${job.idle_gpus} idle GPU${job.idle_gpus === 1 ? "" : "s"})`) : "",
        job.gpu_hours_lost_to_hardware >= 0.05 ? el("span", { class: "small muted", title: "lost to faulty hardware: counted against the node" },
          ` + ${hours(job.gpu_hours_lost_to_hardware)} to hardware`) : ""),
      el("td", { class: "num" }, job.headroom_gpu_hours === null || job.headroom_gpu_hours === undefined ? "–" : hours(job.headroom_gpu_hours)))));
  }

  function renderHistogram() {
    const h = report.histogram;
    const figure = document.getElementById("score-histogram");
    const labels = h.jobs.map((_, i) => `${h.edges[i]}–${h.edges[i + 1]}`);
    const colours = h.jobs.map((_, i) => (h.edges[i] < LOW_S ? "#b3261e" : h.edges[i] < 60 ? "#c98a00" : "#1e7b34"));
    const scored = h.jobs.reduce((a, b) => a + b, 0);
    document.getElementById("histogram-note").textContent = `${number(scored)} of ${number(report.totals.jobs)} jobs have a score; ` +
      `the bars count jobs, hover for their GPU-hours in the window. Red: under S ${number(LOW_S)}, where triage calls a job wasteful.`;
    figure.dataset.rendered = "false";
    if (!window.Plotly) return;
    Plotly.react(figure, [{
      type: "bar", x: labels, y: h.jobs, marker: { color: colours }, customdata: h.gpu_hours,
      hovertemplate: "S %{x}: %{y} jobs, %{customdata:,.0f} GPU-h<extra></extra>",
    }], {
      margin: { l: 48, r: 12, t: 8, b: 44 }, height: 300, bargap: 0.08,
      xaxis: { title: { text: "job saturation score S (0–100)" }, type: "category" },
      yaxis: { title: { text: "jobs" }, rangemode: "tozero", tickformat: "d", dtick: Math.max(1, Math.ceil(Math.max(...h.jobs) / 5)) },
    }, { displaylogo: false, responsive: true }).then(() => { figure.dataset.rendered = "true"; });
  }

  function renderDownloads() {
    document.getElementById("download-csv").href = report.downloads.csv;
    document.getElementById("download-parquet").href = report.downloads.parquet;
  }

  function render() {
    renderVerdict();
    renderTable();
    renderTopJobs();
    renderHistogram();
    renderDownloads();
  }

  function localInput(iso) { return iso.slice(0, 16); }

  function params() {
    const data = new FormData(form);
    const page = new URLSearchParams(), api = new URLSearchParams();
    for (const name of ["project", "user", "partition", "group_by"]) {
      const value = (data.get(name) || "").trim();
      if (value && !(name === "group_by" && value === "project")) { page.set(name, value); api.set(name, value); }
    }
    const preset = data.get("window") || "7d";
    page.set("window", preset);
    if (preset === "custom") {
      for (const name of ["since", "until"]) {
        const value = data.get(name);
        if (value) { page.set(name, value); api.set(name, `${value}:00Z`); }
      }
    } else {
      api.set("since", new Date(Date.now() - PRESETS[preset]).toISOString());
    }
    return { page, api };
  }

  async function update() {
    const { page, api } = params();
    form.querySelector(".report-window__custom").hidden = page.get("window") !== "custom";
    history.replaceState(null, "", `${form.action}?${page}`);
    const errors = document.getElementById("report-errors");
    const status = document.getElementById("report-status");
    if (pending) pending.abort();
    pending = new AbortController();
    status.textContent = "Updating…";
    document.documentElement.dataset.reportReady = "false";
    try {
      const response = await fetch(`${form.dataset.api}?${api}`, { headers: { Accept: "application/json" }, credentials: "same-origin", signal: pending.signal });
      const body = await response.json();
      if (!response.ok) {
        errors.replaceChildren(...(body.errors && body.errors.length ? body.errors : [{ message: body.detail }])
          .map((item) => el("p", {}, item.field ? `${item.field}: ${item.message}` : item.message)));
        errors.hidden = false;
        status.textContent = "";
        return;
      }
      errors.hidden = true;
      report = body;
      if (page.get("window") !== "custom") {
        form.elements.since.value = localInput(report.window.since);
        form.elements.until.value = localInput(report.window.until);
      }
      render();
      status.textContent = `Updated ${new Date().toISOString().slice(11, 16)} UTC.`;
    } catch (error) {
      if (error.name !== "AbortError") { status.textContent = `Could not update: ${error.message}`; }
    } finally {
      document.documentElement.dataset.reportReady = "true";
    }
  }

  let typing = null;
  form.addEventListener("change", (event) => { if (event.target.name !== "user") update(); });
  form.addEventListener("input", (event) => {
    if (event.target.name === "user") { clearTimeout(typing); typing = setTimeout(update, 400); }
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(typing); update(); });
  document.querySelectorAll("#usage-table th[data-sort] button").forEach((button) => button.addEventListener("click", () => {
    const key = button.parentElement.dataset.sort;
    sort = sort.key === key ? { key, dir: -sort.dir } : { key, dir: key === "key" ? 1 : -1 };
    renderTable();
  }));

  render();
  document.documentElement.dataset.reportReady = "true";
})();
