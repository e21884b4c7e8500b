"""The PDF job report (issue 20): a few A4 pages for proposals and post-mortems, drawn with matplotlib (Agg backend,
``PdfPages``) from plain dicts, so it is built the same way by a worker, a test or a script.

Plain Python: no Django. ``apps.appmetrics.reporting`` gathers the facts from the database and the telemetry store.

Pages: (1) the verdict (saturation score and limiter, MFU, tokens/s/GPU, energy per token, the top finding and what
to do) and the job's facts; (2) efficiency with its formula, the throughput dips with their causes and the
stragglers (continued on further pages when long); then the figures: throughput over time with the dips shaded and
GPU activity aligned below it, and the distribution of per-GPU saturation. Every page has a footer with the job id
and "page n of N". Whatever is missing is said where it would be ("not available: <why>"), so a job without
application metrics still gets a useful report.

The facts (every key optional unless said; numbers may be None):

``job``: {"id" (required, "cluster/job_id"), "name", "user", "account", "state", "partition", "gpus", "nodes",
"gpu_model", "start", "end", "elapsed", "environment"} (dates and durations as display strings);
``generated``: when the report was built (a string);
``saturation``: {"score" (0-100), "limiter", "labels", "idle_gpus", "compute", "memory", "link" (0-1 shares),
"per_gpu" (list of per-GPU scores 0-100), "straggler_scores" (the stragglers' scores), "stragglers" (list of
{"where", "start", "reason"}), "missing" (why there is no score)};
``efficiency``: the body of ``selectors.job_efficiency`` (``mfu``, ``tokens_per_s_per_gpu``, ``energy_per_token_j``,
``model_flops_per_token``, ``formula``, ``gap_words``, ``events``, ``missing``, ...) or None;
``throughput``: {"ts" (datetimes, UTC), "tokens_per_s", "source", "missing"};
``activity``: {"ts", "sm", "tensor", "idle_share" (shares 0-1 per telemetry bucket), "missing"};
``notes``: more lines for the facts page (e.g. the node vetting), each a string.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterable, Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from .efficiency import telemetry_starts_late  # noqa: E402

PAGE_W, PAGE_H = 8.27, 11.69  # A4 portrait, inches
MARGIN_X, MARGIN_TOP, MARGIN_BOTTOM = 0.7, 0.7, 0.85
TEXT_W = PAGE_W - 2 * MARGIN_X
CHAR_W = 0.53  # average glyph width of DejaVu Sans as a share of the font size: how many characters fit a line
BODY, SMALL, HEADING, TITLE = 10.0, 8.5, 13.0, 17.0
INK, MUTED, ACCENT, WARN, BAD, GOOD = "#1b1f24", "#5b6470", "#1f5fa8", "#b26a00", "#b3261e", "#2e7d32"
EVENT_COLOURS = {"checkpoint": "#1f77b4", "straggler": "#d62728", "throttling": "#ff7f0e", "evaluation": "#2ca02c",
                 "restart": "#9467bd", "pause": "#17becf", "host": "#8c564b", "unknown": "#7f7f7f"}
# What to do about the unit that limits a job's saturation (the saturation app's limiter keys).
LIMITER_ACTIONS = {
    "tensor": "The tensor pipes are the busiest unit: raise MFU with larger micro-batches, fused kernels (flash attention) "
              "and less activation recomputation.",
    "dram": "Memory bandwidth is the busiest unit: fuse kernels (fused optimizers, flash attention) and avoid needless copies.",
    "nvlink": "NVLink traffic is the busiest unit: a smaller tensor-parallel degree moves traffic off the links.",
    "pcie": "PCIe is the busiest unit: pin host memory and overlap host transfers with compute.",
    "c2c": "The Grace-Hopper link is the busiest unit: keep optimizer states on the GPU if they fit.",
}
EVENT_ACTIONS = {
    "checkpoint": "Checkpoint pauses stop every GPU: save asynchronously (Megatron-LM --async-save, torch.distributed.checkpoint "
                  "async_save) or less often.",
    "straggler": "A lagging GPU holds every rank back: resubmit with --exclude=<its node> and tell the centre's staff.",
    "throttling": "Power or thermal throttling slowed GPUs: tell the centre's staff (cooling, power capping); the cause is "
                  "the node's, not the code's.",
    "evaluation": "Evaluation phases pause training: evaluate less often or on fewer samples (--eval-interval, --eval-iters).",
    "restart": "The run restarted: check the job's output for the failure and keep checkpoints frequent enough to lose little.",
    "pause": "Every GPU stopped together for a short while: log checkpoint and evaluation markers to tell them apart from "
             "a data loader that starves the GPUs (more loader workers, data on faster storage).",
    "host": "The GPUs waited on their data loaders: give the loaders more CPU (more workers on each rank's NUMA domain, "
            "pre-tokenised data, prefetching).",
    "unknown": "A dip the hardware does not explain: look at the job's output around that time (data loading, I/O).",
}


# ---------------------------------------------------------------------------------------------------------------
# Numbers in words


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def fmt_number(value, digits: int = 0, unit: str = "") -> str:
    """1,234 / 1.2 k-free plain grouping; '—' for None."""
    if not _finite(value):
        return "—"
    text = f"{value:,.{digits}f}"
    return f"{text} {unit}".rstrip()


def fmt_percent(share, digits: int = 1) -> str:
    return "—" if not _finite(share) else f"{100 * share:.{digits}f} %"


def fmt_energy(joules) -> str:
    if not _finite(joules):
        return "—"
    if joules >= 1:
        return f"{joules:,.2f} J"
    return f"{joules * 1000:,.1f} mJ"


def fmt_time(value) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    text = str(value)
    return text.replace("T", " ")[:16] + " UTC" if len(text) >= 16 and text[4] == "-" else text


def _dip_words(dip) -> str:
    return f"{100 * dip:.0f} % below" if _finite(dip) else "—"


# ---------------------------------------------------------------------------------------------------------------
# The verdict


@dataclass(frozen=True)
class Finding:
    """The report's headline: what matters most about the job, and what to do about it."""

    title: str
    action: str
    severity: str = "warn"  # good, warn, bad, info


def _event_seconds(event: dict, last) -> float:
    start, end = _as_datetime(event.get("start")), _as_datetime(event.get("end")) or last
    if start is None or end is None:
        return 0.0
    return max(0.0, (end - start).total_seconds())


def _as_datetime(value) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def top_finding(facts: dict) -> Finding:
    """The one thing to tell first, in this order: idle GPUs, stragglers, the costliest kind of throughput dip,
    a low saturation score (with its limiter), the gap between MFU and tensor activity; else that the job runs
    well. A job without application metrics gets that said, with how to send them."""
    saturation = facts.get("saturation") or {}
    efficiency = facts.get("efficiency") or {}
    job = facts.get("job") or {}
    gpus = job.get("gpus") or 0
    idle = saturation.get("idle_gpus") or 0
    if idle and gpus and idle / gpus >= 0.1:
        return Finding(f"{idle:,} of {gpus:,} GPUs sat idle", "If the job does not need them all, resubmit with fewer "
                       "(--gpus, --nodes); if it should use them, check that every rank started and sees its own GPU.", "bad")
    stragglers = saturation.get("stragglers") or []
    if stragglers:
        first = stragglers[0]
        more = f" (and {len(stragglers) - 1} more)" if len(stragglers) > 1 else ""
        return Finding(f"Straggler behind its peers: {first.get('where', '?')}{more}",
                       "A synchronous job runs at its slowest rank's pace: " + EVENT_ACTIONS["straggler"].split(": ", 1)[1],
                       "bad")
    events = efficiency.get("events") or []
    if events:
        ts = (facts.get("throughput") or {}).get("ts") or []
        last = _as_datetime(ts[-1]) if ts else None
        cost: dict[str, float] = {}
        for event in events:
            dip = event.get("dip") if _finite(event.get("dip")) else 0.0
            cost[event.get("kind", "unknown")] = cost.get(event.get("kind", "unknown"), 0.0) + dip * _event_seconds(event, last)
        kind = max(cost, key=lambda name: (cost[name], name))
        count = sum(1 for event in events if event.get("kind") == kind)
        lost = cost[kind] / 60.0
        return Finding(f"{count} throughput dip{'s' * (count != 1)} caused by {kind}" +
                       (f", about {lost:,.0f} min of training lost" if lost >= 1 else ""), EVENT_ACTIONS.get(kind, EVENT_ACTIONS["unknown"]))
    score = saturation.get("score")
    limiter = saturation.get("limiter") or ""
    if _finite(score) and score < 30:
        return Finding(f"GPU saturation only {score:.0f} of 100" + (f", limited by {limiter}" if limiter else ""),
                       LIMITER_ACTIONS.get(limiter, "Check the data loader first (more workers, pinned memory, prefetching), "
                                           "then the timeline for gaps between steps."), "bad")
    mfu, tensor = efficiency.get("mfu"), efficiency.get("tensor_active")
    if _finite(mfu) and _finite(tensor) and tensor > 0 and mfu / tensor < 0.75:
        return Finding(efficiency.get("gap_words") or f"MFU {fmt_percent(mfu)} well below tensor activity {fmt_percent(tensor)}",
                       "Tensor work beyond the model's FLOPs: reduce activation recomputation (selective instead of full), "
                       "avoid padding (sequence packing) and check the parallel layout.")
    if not efficiency.get("tokens_per_s_per_gpu"):
        return Finding("No throughput: MFU, tokens/s per GPU and energy per token are not available",
                       "Log tokens_per_s from the training loop (belvedere_client.log) or upload the Megatron-LM "
                       "output (POST .../metrics/?format=megatron-log).", "info")
    if _finite(score):
        return Finding(f"Runs well: GPU saturation {score:.0f} of 100" + (f", limited by {limiter}" if limiter else ""),
                       LIMITER_ACTIONS.get(limiter, "Nothing stands out; compare with other runs of the model to judge scaling."),
                       "good")
    return Finding("No hardware score yet", saturation.get("missing") or "The job's telemetry has not been scored.", "info")


# ---------------------------------------------------------------------------------------------------------------
# Text pages: a cursor down A4 figures, continued on a new page when full


def _chars(width_in: float, size: float) -> int:
    return max(8, int(width_in * 72 / (size * CHAR_W)))


def wrap(text: str, width_in: float, size: float) -> list[str]:
    lines: list[str] = []
    for paragraph in str(text).split("\n"):
        lines.extend(textwrap.wrap(paragraph, _chars(width_in, size), break_long_words=True, break_on_hyphens=False) or [""])
    return lines


def _line_h(size: float) -> float:
    return size * 1.38 / 72


@dataclass
class TextPages:
    """Figures being written top to bottom; ``need(h)`` starts a new page ("<title>, continued") when h inches do
    not fit."""

    title: str
    figures: list[Figure] = field(default_factory=list)
    y: float = 0.0  # inches from the top of the current page

    def __post_init__(self):
        self.new_page()

    @property
    def fig(self) -> Figure:
        return self.figures[-1]

    def new_page(self, continued: bool = False) -> None:
        self.figures.append(Figure(figsize=(PAGE_W, PAGE_H)))
        self.y = MARGIN_TOP
        if continued:
            self.text(f"{self.title} (continued)", size=SMALL, colour=MUTED)
            self.y += 0.08

    def need(self, height: float) -> None:
        if self.y + height > PAGE_H - MARGIN_BOTTOM:
            self.new_page(continued=True)

    def _fy(self, y_in: float) -> float:
        return 1 - y_in / PAGE_H

    def text(self, text: str, *, size: float = BODY, x: float = MARGIN_X, width: float | None = None, colour: str = INK,
             weight: str = "normal", gap: float = 0.0) -> None:
        width = width if width is not None else PAGE_W - MARGIN_X - x
        for line in wrap(text, width, size):
            self.need(_line_h(size))
            self.fig.text(x / PAGE_W, self._fy(self.y), line, fontsize=size, color=colour, fontweight=weight, va="top", ha="left")
            self.y += _line_h(size)
        self.y += gap

    def heading(self, text: str) -> None:
        self.need(_line_h(HEADING) + 3 * _line_h(BODY))  # never a heading alone at the foot of a page
        self.y += 0.12
        self.text(text, size=HEADING, weight="bold", colour=ACCENT)
        self.fig.add_artist(plt.Line2D([MARGIN_X / PAGE_W, 1 - MARGIN_X / PAGE_W], [self._fy(self.y)] * 2, color=ACCENT,
                                       linewidth=0.6, transform=self.fig.transFigure))
        self.y += 0.1

    def missing(self, why: str) -> None:
        self.text(f"not available: {why}", size=BODY, colour=WARN, gap=0.05)

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[str]], widths: Sequence[float], *, size: float = SMALL) -> None:
        """Columns of ``widths`` inches (scaled to the text width); cells wrap; the header repeats on each page."""
        scale = TEXT_W / sum(widths)
        widths = [w * scale for w in widths]
        lefts = [MARGIN_X + sum(widths[:i]) for i in range(len(widths))]

        def draw(cells, weight, colour):
            wrapped = [wrap(str(cell), max(0.3, w - 0.08), size) for cell, w in zip(cells, widths)]
            height = max(len(lines) for lines in wrapped) * _line_h(size) + 0.05
            return wrapped, height, weight, colour

        def put(wrapped, height, weight, colour):
            for lines, left in zip(wrapped, lefts):
                for number, line in enumerate(lines):
                    self.fig.text(left / PAGE_W, self._fy(self.y + number * _line_h(size)), line, fontsize=size,
                                  fontweight=weight, color=colour, va="top", ha="left")
            self.y += height

        header = draw(headers, "bold", MUTED)
        self.need(header[1] + _line_h(size) * 2)
        put(*header)
        for cells in rows:
            body = draw(cells, "normal", INK)
            if self.y + body[1] > PAGE_H - MARGIN_BOTTOM:
                self.new_page(continued=True)
                put(*header)
            put(*body)
        self.y += 0.08

    def pairs(self, items: Sequence[tuple[str, str]], *, key_w: float = 1.9, size: float = BODY) -> None:
        """Label / value lines (the job's facts)."""
        for key, value in items:
            lines = wrap(value, TEXT_W - key_w, size)
            self.need(_line_h(size) * len(lines))
            self.fig.text(MARGIN_X / PAGE_W, self._fy(self.y), key, fontsize=size, color=MUTED, va="top")
            for number, line in enumerate(lines):
                self.fig.text((MARGIN_X + key_w) / PAGE_W, self._fy(self.y + number * _line_h(size)), line, fontsize=size,
                              color=INK, va="top")
            self.y += _line_h(size) * len(lines) + 0.02


# ---------------------------------------------------------------------------------------------------------------
# Page 1: verdict and facts


def _tile(fig: Figure, x: float, y: float, w: float, h: float, value: str, label: str, note: str = "") -> None:
    """A number tile: big value, label under it, a small note (the limiter, or why the number is missing)."""
    fx, fy = x / PAGE_W, 1 - (y + h) / PAGE_H
    fig.add_artist(FancyBboxPatch((fx, fy), w / PAGE_W, h / PAGE_H, boxstyle="round,pad=0,rounding_size=0.008",
                                  transform=fig.transFigure, facecolor="#f3f6fa", edgecolor="#c9d3df", linewidth=0.8))
    centre = (x + w / 2) / PAGE_W
    fig.text(centre, 1 - (y + 0.16) / PAGE_H, value, fontsize=18 if len(value) < 10 else 14, fontweight="bold",
             color=INK if value != "—" else MUTED, ha="center", va="top")
    fig.text(centre, 1 - (y + 0.62) / PAGE_H, label, fontsize=SMALL, color=MUTED, ha="center", va="top")
    for number, line in enumerate(wrap(note, w - 0.2, 7.0)[:3]):
        fig.text(centre, 1 - (y + 0.82 + number * _line_h(7.0)) / PAGE_H, line, fontsize=7.0,
                 color=WARN if note.startswith("not available") else MUTED, ha="center", va="top")


def _first_missing(efficiency: dict, words: tuple[str, ...]) -> str:
    for why in efficiency.get("missing") or []:
        if any(word in why for word in words):
            return f"not available: {why.split(':')[0]}"  # the whole reason is on the efficiency page
    return "not available"


def _verdict_page(doc: TextPages, facts: dict, finding: Finding) -> None:
    job = facts.get("job") or {}
    saturation = facts.get("saturation") or {}
    efficiency = facts.get("efficiency") or {}
    doc.text("Belvedere job report", size=SMALL, colour=MUTED)
    doc.text(f"Job {job.get('id', '?')}" + (f" — {job['name']}" if job.get("name") else ""), size=TITLE, weight="bold")
    doc.text(" · ".join(part for part in (job.get("user"), job.get("account"), job.get("state"),
                                           f"{job['gpus']:,} GPUs" if job.get("gpus") else "",
                                           f"built {facts['generated']}" if facts.get("generated") else "") if part),
             size=SMALL, colour=MUTED, gap=0.15)

    score = saturation.get("score")
    tiles = [
        (f"{score:.0f} / 100" if _finite(score) else "—", "GPU saturation",
         f"limited by {saturation['limiter']}" if _finite(score) and saturation.get("limiter") else
         (f"not available: {saturation.get('missing')}" if not _finite(score) else "")),
        (fmt_percent(efficiency.get("mfu")), "MFU",
         f"against {fmt_number(efficiency.get('gpu_peak_tflops'))} TFLOP/s peak" if _finite(efficiency.get("mfu"))
         else _first_missing(efficiency, ("model config", "throughput", "peak", "series"))),
        (fmt_number(efficiency.get("tokens_per_s_per_gpu")), "tokens/s per GPU",
         f"{fmt_number(efficiency.get('tokens_per_s'))} tokens/s in all" if _finite(efficiency.get("tokens_per_s_per_gpu"))
         else _first_missing(efficiency, ("throughput", "series"))),
        (fmt_energy(efficiency.get("energy_per_token_j")), "energy per token",
         "DCGM energy counters / tokens trained" if _finite(efficiency.get("energy_per_token_j"))
         else _first_missing(efficiency, ("energy", "telemetry", "throughput"))),
    ]
    gap, w, h = 0.15, (TEXT_W - 3 * 0.15) / 4, 1.25
    for number, (value, label, note) in enumerate(tiles):
        _tile(doc.fig, MARGIN_X + number * (w + gap), doc.y, w, h, value, label, note)
    doc.y += h + 0.25

    colour = {"good": GOOD, "bad": BAD, "warn": WARN}.get(finding.severity, ACCENT)
    box_top = doc.y
    doc.y += 0.12
    doc.text("Top finding", size=SMALL, x=MARGIN_X + 0.2, colour=MUTED)
    doc.text(finding.title, size=HEADING - 1, x=MARGIN_X + 0.2, width=TEXT_W - 0.4, weight="bold", colour=colour, gap=0.06)
    doc.text("What to do", size=SMALL, x=MARGIN_X + 0.2, colour=MUTED)
    doc.text(finding.action, size=BODY, x=MARGIN_X + 0.2, width=TEXT_W - 0.4)
    doc.fig.add_artist(plt.Rectangle((MARGIN_X / PAGE_W, 1 - doc.y / PAGE_H), 0.06 / PAGE_W, (doc.y - box_top) / PAGE_H,
                                     transform=doc.fig.transFigure, color=colour, linewidth=0))
    doc.y += 0.15
    if efficiency.get("gap_words") and finding.title != efficiency.get("gap_words"):
        doc.text(f"MFU against the hardware: {efficiency['gap_words']}.", size=SMALL, colour=MUTED, gap=0.05)

    doc.heading("The job")
    items = [("Job", job.get("id", "?")), ("Name", job.get("name") or "—"), ("User / project", f"{job.get('user') or '—'} / "
             f"{job.get('account') or '—'}"), ("State", job.get("state") or "—"), ("Partition", job.get("partition") or "—"),
             ("Nodes / GPUs", f"{fmt_number(job.get('nodes'))} / {fmt_number(job.get('gpus'))}"),
             ("GPU model", job.get("gpu_model") or "—"), ("Started", fmt_time(job.get("start"))),
             ("Ended", fmt_time(job.get("end")) if job.get("end") else
              ("still running" if job.get("state") in ("RUNNING", "COMPLETING", "SUSPENDED") else "—")), ("Run time", job.get("elapsed") or "—")]
    if job.get("environment"):
        items.append(("Environment", job["environment"]))
    model = efficiency.get("model") or {}
    if model:
        shape = ", ".join(f"{key} {model[key]:,}" if isinstance(model[key], int) and not isinstance(model[key], bool) else f"{key} {model[key]}"
                          for key in ("params", "layers", "hidden", "heads", "seq_len", "global_batch", "moe_experts", "moe_topk")
                          if model.get(key) not in (None, False))
        items.append(("Model", shape + (f" (from {model['source']})" if model.get("source") else "")))
    coverage = efficiency.get("coverage") or {}
    if coverage.get("rows"):
        items.append(("Application metrics", f"{coverage['rows']:,} points of {len(coverage.get('names') or [])} series, "
                      f"{fmt_time(coverage.get('first'))} to {fmt_time(coverage.get('last'))}"))
    else:
        items.append(("Application metrics", "none: the job sent no tokens/s, iteration time or loss"))
    if saturation.get("labels"):
        items.append(("Saturation labels", ", ".join(saturation["labels"])))
    doc.pairs(items)
    for note in facts.get("notes") or []:
        doc.text(note, size=SMALL, colour=MUTED)


# ---------------------------------------------------------------------------------------------------------------
# Page 2: efficiency, events, stragglers


def _details(doc: TextPages, facts: dict) -> None:
    efficiency = facts.get("efficiency")
    saturation = facts.get("saturation") or {}
    doc.new_page()
    doc.heading("Efficiency")
    if not efficiency:
        doc.missing(facts.get("efficiency_missing") or "the efficiency could not be computed")
    else:
        rows = [("Tokens/s (steady)", fmt_number(efficiency.get("tokens_per_s")),
                 efficiency.get("tokens_per_s_source") or "median after the warm-up"),
                ("Tokens/s per GPU", fmt_number(efficiency.get("tokens_per_s_per_gpu"), 1), f"over {fmt_number(efficiency.get('gpus'))} GPUs"),
                ("Model FLOPs per token", fmt_number((efficiency.get("model_flops_per_token") or math.nan) / 1e9, 1, "GFLOP"),
                 "from the model config"),
                ("GPU peak", fmt_number(efficiency.get("gpu_peak_tflops"), 0, "TFLOP/s"),
                 f"dense BF16{', ' + efficiency['gpu_model'] if efficiency.get('gpu_model') else ''}"),
                ("MFU", fmt_percent(efficiency.get("mfu")), "tokens/s/GPU x FLOPs per token / peak"),
                ("Tensor pipes busy", fmt_percent(efficiency.get("tensor_active")), "DCGM tensor-active (1004), mean"),
                ("Energy per token", fmt_energy(efficiency.get("energy_per_token_j")), "DCGM energy counter (156) rise / tokens")]
        doc.table(["Number", "Value", "How"], rows, [1.8, 1.3, 3.8], size=BODY - 0.5)
        if efficiency.get("formula"):
            doc.text("FLOPs per token: " + efficiency["formula"], size=SMALL, gap=0.05)
        doc.text("MFU = tokens/s per GPU x model FLOPs per token / the GPU's dense BF16 peak.", size=SMALL, colour=MUTED)
        if efficiency.get("gap_words"):
            doc.text("Against the hardware: " + efficiency["gap_words"] + ".", size=SMALL, gap=0.05)
        for why in efficiency.get("missing") or []:
            doc.missing(why)

    doc.heading("Throughput dips and their causes")
    events = (efficiency or {}).get("events")
    if events is None:
        doc.missing("no efficiency reading, so no dips")
    elif not events:
        throughput = facts.get("throughput") or {}
        if throughput.get("ts"):
            doc.text("None found: no dip in throughput was attributed to a cause.", gap=0.05)
        else:
            doc.missing(throughput.get("missing") or "no throughput series to find dips in")
    else:
        doc.table(["Start", "End", "Cause", "Dip", "Why"],
                  [(fmt_time(e.get("start")), fmt_time(e.get("end")) if e.get("end") else "to the end", e.get("kind", "?"),
                    _dip_words(e.get("dip")), e.get("reason") or "") for e in events],
                  [1.25, 1.25, 0.85, 0.8, 2.85])

    doc.heading("Stragglers")
    stragglers = saturation.get("stragglers")
    if stragglers is None:
        doc.missing(saturation.get("missing") or "the job has no saturation score")
    elif not stragglers:
        doc.text("None: no GPU, node or switch lagged its peers.", gap=0.05)
    else:
        doc.table(["Where", "Since", "Why"], [(s.get("where", "?"), fmt_time(s.get("start")), s.get("reason") or "") for s in stragglers],
                  [2.0, 1.3, 3.7])


# ---------------------------------------------------------------------------------------------------------------
# Figures


def _sections(doc: TextPages, sections: list[dict]) -> None:
    """Pages other apps add (``facts["sections"]``: {"title", "lines", "pairs", "table": {"headers", "rows"}}), each on
    a page of its own."""
    for section in sections:
        doc.new_page()
        doc.heading(str(section.get("title") or ""))
        for line in section.get("lines") or []:
            doc.text(str(line))
        if section.get("pairs"):
            doc.pairs([(str(k), str(v)) for k, v in section["pairs"]])
        table = section.get("table") or {}
        if table.get("rows"):
            headers = [str(h) for h in table.get("headers") or []]
            width = (PAGE_W - 2 * MARGIN_X) / max(1, len(headers))
            widths = [width * 0.8] * (len(headers) - 1) + [width * (1 + 0.2 * (len(headers) - 1))] if headers else []
            doc.table(headers, [[str(cell) for cell in row] for row in table["rows"]], widths)


def _no_data(ax, why: str) -> None:
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_color("#dddddd")
    ax.text(0.5, 0.5, "\n".join(wrap(f"not available: {why}", 5.0, BODY)), transform=ax.transAxes, ha="center", va="center",
            fontsize=BODY, color=WARN)


def _figure_page(title: str, subtitle: str) -> Figure:
    fig = Figure(figsize=(PAGE_W, PAGE_H))
    fig.text(MARGIN_X / PAGE_W, 1 - MARGIN_TOP / PAGE_H, title, fontsize=HEADING, fontweight="bold", color=ACCENT, va="top")
    for number, line in enumerate(wrap(subtitle, TEXT_W, SMALL)):
        fig.text(MARGIN_X / PAGE_W, 1 - (MARGIN_TOP + 0.3 + number * _line_h(SMALL)) / PAGE_H, line, fontsize=SMALL,
                 color=MUTED, va="top")
    return fig


def _shade_events(ax, events: list[dict], end) -> set[str]:
    kinds = set()
    for event in events:
        start = _as_datetime(event.get("start"))
        stop = _as_datetime(event.get("end")) or end
        if start is None or stop is None:
            continue
        kind = event.get("kind", "unknown")
        ax.axvspan(start, stop, color=EVENT_COLOURS.get(kind, EVENT_COLOURS["unknown"]), alpha=0.18, linewidth=0)
        kinds.add(kind)
    return kinds


def _time_axis(ax) -> None:
    locator = mdates.AutoDateLocator(minticks=4, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _clean(values) -> list[float]:
    return [float(v) if _finite(v) else math.nan for v in values]


def throughput_figure(facts: dict) -> Figure:
    """Throughput over time with the dips shaded by cause; GPU activity (SM and tensor active, idle share) below on
    the same time axis, straggler onsets marked."""
    throughput = facts.get("throughput") or {}
    activity = facts.get("activity") or {}
    events = (facts.get("efficiency") or {}).get("events") or []
    fig = _figure_page("Throughput and GPU activity over time",
                       "Top: the job's tokens/s as it logged them, dips shaded by their cause. Bottom: what the GPUs did at "
                       "the same moments (DCGM means over the job's GPUs, per telemetry bucket); dashed lines mark straggler onsets.")
    grid = fig.add_gridspec(2, 1, left=0.11, right=0.95, top=1 - (MARGIN_TOP + 0.85) / PAGE_H, bottom=0.36,
                            height_ratios=[3, 2], hspace=0.12)
    top = fig.add_subplot(grid[0])
    bottom = fig.add_subplot(grid[1], sharex=top)
    ts = [_as_datetime(t) for t in throughput.get("ts") or []]
    values = _clean(throughput.get("tokens_per_s") or [])
    a_ts = [_as_datetime(t) for t in activity.get("ts") or []]
    ends = [t for t in (ts[-1:] + a_ts[-1:]) if t is not None]
    end = max(ends) if ends else None
    shaded: set[str] = set()
    if ts and values:
        top.plot(ts, values, color=INK, linewidth=0.9, label="tokens/s")
        shaded = _shade_events(top, events, end)
        top.set_ylabel("tokens/s", fontsize=BODY)
        finite = [v for v in values if math.isfinite(v)]
        top.set_ylim(0, 1.22 * max(finite) if finite and max(finite) > 0 else 1)  # headroom for the legend
        top.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1e3:,.0f} k" if v >= 1e4 else f"{v:,.0f}"))
        top.grid(alpha=0.3, linewidth=0.5)
    else:
        _no_data(top, throughput.get("missing") or "the job logged no tokens/s (nor iteration time with a global batch)")
    if a_ts:
        for key, label, colour in (("sm", "SM active", "#1f77b4"), ("tensor", "tensor active", "#9467bd"),
                                   ("idle_share", "share of GPUs idle", "#d62728")):
            series = activity.get(key)
            if series is not None and any(_finite(v) for v in series):
                bottom.plot(a_ts, [100 * v for v in _clean(series)], label=label, color=colour, linewidth=0.9)
        _shade_events(bottom, events, end)
        for item in (facts.get("saturation") or {}).get("stragglers") or []:
            onset = _as_datetime(item.get("start"))
            if onset is not None:
                bottom.axvline(onset, color=EVENT_COLOURS["straggler"], linestyle="--", linewidth=0.9)
                top.axvline(onset, color=EVENT_COLOURS["straggler"], linestyle="--", linewidth=0.9) if ts else None
        if ts and None not in (a_ts[0], ts[0], end) and telemetry_starts_late(ts[0], a_ts[0], end):
            # say where the GPUs' side starts, so an empty left part does not read as idle GPUs
            bottom.text(0.01, 0.04, f"GPU telemetry only from {a_ts[0]:%Y-%m-%d %H:%M} UTC", transform=bottom.transAxes,
                        fontsize=SMALL, color=MUTED, va="bottom")
        bottom.set_ylim(0, 128)  # headroom for the legend
        bottom.set_yticks([0, 25, 50, 75, 100])
        bottom.set_ylabel("% (GPU activity)", fontsize=BODY)
        bottom.legend(loc="upper left", fontsize=SMALL, ncol=3, framealpha=0.9)
        bottom.grid(alpha=0.3, linewidth=0.5)
        _time_axis(bottom)
    else:
        _no_data(bottom, activity.get("missing") or "no GPU telemetry for this job")
        if ts:
            _time_axis(top)
    if ts and values:
        from matplotlib.patches import Patch

        handles = [plt.Line2D([], [], color=INK, linewidth=0.9, label="tokens/s")]
        handles += [Patch(color=EVENT_COLOURS.get(kind, "#7f7f7f"), alpha=0.35, label=f"dip: {kind}") for kind in sorted(shaded)]
        top.legend(handles=handles, loc="upper left", fontsize=SMALL, ncol=min(4, len(handles)), framealpha=0.9)
    if ts and a_ts:
        top.tick_params(labelbottom=False)
        top.xaxis.get_offset_text().set_visible(False)
    for ax in (top, bottom):
        ax.tick_params(labelsize=SMALL)
    # What the shading means, in words, under the plots.
    y = 0.36 * PAGE_H - 0.55
    lines = []
    kinds: dict[str, list[dict]] = {}
    for event in events:
        kinds.setdefault(event.get("kind", "unknown"), []).append(event)
    for kind, group in sorted(kinds.items(), key=lambda item: -len(item[1])):
        dips = sorted(e["dip"] for e in group if _finite(e.get("dip")))
        spread = (f"{100 * dips[0]:.0f} %" if dips[0] == dips[-1] else f"{100 * dips[0]:.0f}-{100 * dips[-1]:.0f} %") if dips else "?"
        lines.append(f"{len(group)} dip{'s' * (len(group) != 1)} caused by {kind} ({spread} below the baseline), first at "
                     f"{fmt_time(group[0].get('start'))}: {group[0].get('reason') or ''}")
    if events:
        lines.append("Every dip with its reason is listed on the efficiency pages.")
    if not events and ts:
        lines.append("No throughput dip was attributed to a cause (see the efficiency page).")
    parts = [part for line in lines for part in wrap(line, TEXT_W, SMALL)]
    room = int((y - MARGIN_BOTTOM - 0.1) / _line_h(SMALL))
    if len(parts) > room:  # never into the footer
        parts = parts[:max(0, room - 1)] + ["... (the rest on the efficiency pages)"]
    for part in parts:
        fig.text(MARGIN_X / PAGE_W, y / PAGE_H, part, fontsize=SMALL, color=INK, va="top")
        y -= _line_h(SMALL)
    return fig


def saturation_figure(facts: dict) -> Figure:
    """How saturated each GPU was: the histogram of per-GPU scores (stragglers stacked in red, the job's score as a
    line) and the scores sorted, so a tail of slow GPUs shows."""
    saturation = facts.get("saturation") or {}
    fig = _figure_page("Per-GPU saturation",
                       "Each GPU's saturation score (0-100: how close it ran to what its busiest unit can do, over the steady "
                       "state). A narrow peak means the GPUs worked alike; a tail to the left is GPUs that lag.")
    grid = fig.add_gridspec(2, 1, left=0.11, right=0.95, top=1 - (MARGIN_TOP + 0.85) / PAGE_H, bottom=0.3, hspace=0.35)
    hist = fig.add_subplot(grid[0])
    ranked = fig.add_subplot(grid[1])
    scores = [v for v in _clean(saturation.get("per_gpu") or []) if math.isfinite(v)]
    if not scores:
        why = saturation.get("missing") or "the job has no per-GPU scores"
        _no_data(hist, why)
        _no_data(ranked, why)
        return fig
    slow = [v for v in _clean(saturation.get("straggler_scores") or []) if math.isfinite(v)]
    rest = list(scores)
    for value in slow:
        if value in rest:
            rest.remove(value)
    low, high = max(0.0, math.floor(min(scores)) - 2.0), min(100.0, math.ceil(max(scores)) + 2.0)
    if high - low >= 40:
        low, high = 0.0, 100.0
    bins = [low + (high - low) * i / 30 for i in range(31)]  # zoomed to the GPUs' range: a narrow spread still shows
    hist.hist([rest, slow], bins=bins, stacked=True, color=["#4c78a8", EVENT_COLOURS["straggler"]],
              label=["GPUs", "straggler GPUs"] if slow else ["GPUs", "_"], edgecolor="white", linewidth=0.4)
    score = saturation.get("score")
    if _finite(score):
        hist.axvline(score, color=INK, linestyle="--", linewidth=1.0, label=f"job score {score:.0f}")
    hist.set_xlim(low, high)
    hist.set_xlabel("saturation score of the GPU", fontsize=BODY)
    counts = np.histogram(scores, bins=bins)[0]
    if counts.max() >= 20 * counts[counts > 0].min():  # a bin of a few GPUs beside hundreds: on a linear axis it vanishes
        hist.set_yscale("log")
        hist.set_ylim(0.7, max(counts) * 3)
        hist.set_ylabel("GPUs (log scale)", fontsize=BODY)
    else:
        hist.set_ylabel("GPUs", fontsize=BODY)
    hist.legend(fontsize=SMALL, loc="upper left")
    hist.grid(alpha=0.3, linewidth=0.5, axis="y")
    ordered = sorted(scores)
    ranked.plot(range(1, len(ordered) + 1), ordered, color="#4c78a8", linewidth=1.2)
    if slow:
        places = [ordered.index(value) + 1 for value in slow]
        ranked.scatter(places, slow, color=EVENT_COLOURS["straggler"], s=18, zorder=3, label="straggler GPUs")
        ranked.legend(fontsize=SMALL, loc="lower right")
    ranked.set_xlabel("GPUs, lowest score first", fontsize=BODY)
    ranked.set_ylabel("saturation score", fontsize=BODY)
    ranked.set_ylim(low, high)  # the same range as the histogram
    ranked.set_xlim(1, max(2, len(ordered)))
    ranked.grid(alpha=0.3, linewidth=0.5)
    for ax in (hist, ranked):
        ax.tick_params(labelsize=SMALL)
    median = ordered[len(ordered) // 2]
    words = (f"{len(scores):,} GPUs scored: lowest {ordered[0]:.0f}, median {median:.0f}, highest {ordered[-1]:.0f}"
             + (f"; {len(slow)} straggler GPU{'s' * (len(slow) != 1)} shown in red" if slow else "") + ".")
    fig.text(MARGIN_X / PAGE_W, (0.3 * PAGE_H - 0.55) / PAGE_H, words, fontsize=BODY, color=INK, va="top")
    return fig


# ---------------------------------------------------------------------------------------------------------------
# The document


def _footer(fig: Figure, job_id: str, number: int, total: int) -> None:
    y = (MARGIN_BOTTOM - 0.4) / PAGE_H
    fig.add_artist(plt.Line2D([MARGIN_X / PAGE_W, 1 - MARGIN_X / PAGE_W], [y + 0.18 / PAGE_H] * 2, color="#c9d3df",
                              linewidth=0.5, transform=fig.transFigure))
    fig.text(MARGIN_X / PAGE_W, y, f"Belvedere job report · job {job_id}", fontsize=7.5, color=MUTED, va="bottom")
    fig.text(1 - MARGIN_X / PAGE_W, y, f"page {number} of {total}", fontsize=7.5, color=MUTED, va="bottom", ha="right")


def render_report(facts: dict, path: str | Path, progress: Callable[[int, str], None] | None = None) -> int:
    """Write the report of ``facts`` (see the module's docstring) to ``path`` as PDF; returns the number of pages.

    ``progress(percent, words)`` is told as pages are drawn. Raises ValueError when ``facts`` lack the job's id."""
    job_id = str(((facts.get("job") or {}).get("id")) or "")
    if not job_id:
        raise ValueError("render_report: facts['job']['id'] is required (\"cluster/job_id\")")
    tell = progress or (lambda percent, words: None)
    finding = top_finding(facts)
    with matplotlib.rc_context({"pdf.fonttype": 42, "font.family": "DejaVu Sans", "axes.titlesize": BODY,
                                "axes.labelcolor": INK, "xtick.color": MUTED, "ytick.color": MUTED}):
        doc = TextPages(title=f"Job {job_id}")
        _verdict_page(doc, facts, finding)
        tell(20, "verdict and facts drawn")
        _details(doc, facts)
        _sections(doc, facts.get("sections") or [])
        tell(40, "efficiency, events and stragglers drawn")
        figures = list(doc.figures)
        figures.append(throughput_figure(facts))
        tell(60, "throughput figure drawn")
        figures.append(saturation_figure(facts))
        tell(75, "saturation figure drawn")
        path = Path(path)
        with PdfPages(path, metadata={"Title": f"Belvedere job report {job_id}", "Subject": "job efficiency report",
                                      "Creator": "Belvedere (apps.appmetrics.report_pdf)"}) as pdf:
            for number, fig in enumerate(figures, 1):
                _footer(fig, job_id, number, len(figures))
                pdf.savefig(fig)
                tell(75 + int(20 * number / len(figures)), f"page {number} of {len(figures)} written")
    return len(figures)
