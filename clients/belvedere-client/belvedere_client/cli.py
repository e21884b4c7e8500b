"""``belvedere report CLUSTER JOB_ID``: a job's report from a login node, through the portal's API.

Plain Python: no Django, standard library only. It needs no portal database, only the user's API token
(``--token``, else ``$BELVEDERE_TOKEN``, else the first line of ``~/.config/belvedere/token``) and the portal's
address (``--url``, else ``$BELVEDERE_URL``). It reads four answers of ``/api/v1/jobs/<cluster>/<id>/``: the job
itself, ``saturation/``, ``stragglers/`` and ``efficiency/``, and prints the verdict first (in the spirit of
jobstats), or with ``--json`` one object holding all four. An answer the portal does not have is said in words,
never guessed. Errors (no token, 401/403/404, unreachable) are one line on stderr and exit status 2.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import __version__

TOKEN_FILE = os.path.join("~", ".config", "belvedere", "token")
TIMEOUT_S = 30.0
EXIT_ERROR = 2
PARTS = ("saturation", "stragglers", "efficiency")
LIMITER_WORDS = {"tensor": "tensor cores", "fp64": "FP64 pipes", "fp32": "FP32 pipes", "fp16": "FP16 pipes",
                 "dram": "memory bandwidth (HBM)", "nvlink": "NVLink", "pcie": "PCIe", "c2c": "NVLink-C2C"}
NO_APP_METRICS = "no application metrics: log them with belvedere_client.log"


class Failure(Exception):
    """One line for stderr; the command exits with status 2."""


# -- settings -----------------------------------------------------------------------------------------------------------
def find_token(given: Optional[str], environ=os.environ) -> str:
    """The user's API token: --token, $BELVEDERE_TOKEN, or the token file (first line)."""
    if given and given.strip():
        return given.strip()
    if environ.get("BELVEDERE_TOKEN", "").strip():
        return environ["BELVEDERE_TOKEN"].strip()
    home = environ.get("HOME") or os.path.expanduser("~")
    path = os.path.join(home, ".config", "belvedere", "token")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as handle:
                token = handle.readline().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise Failure("cannot read the token file {}: {}".format(path, error)) from None
        if token:
            return token
        raise Failure("the token file {} is empty: put your API token (from the portal's account page) on its first line"
                      .format(path))
    raise Failure("no API token: give --token, set BELVEDERE_TOKEN, or put it in {} (your token is on the portal's "
                  "account page)".format(TOKEN_FILE))


def find_url(given: Optional[str], environ=os.environ) -> str:
    url = (given or environ.get("BELVEDERE_URL", "")).strip().rstrip("/")
    if not url:
        raise Failure("no portal address: give --url https://belvedere.example.org or set BELVEDERE_URL")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise Failure("the portal address {!r} is not an http(s) URL such as https://belvedere.example.org".format(url[:120]))
    return url


# -- the API --------------------------------------------------------------------------------------------------------------
class Api:
    def __init__(self, url: str, token: str, timeout: float = TIMEOUT_S):
        self.url, self.token, self.timeout = url, token, timeout

    def get(self, path: str) -> Tuple[int, Any]:
        """(status, body) of GET url+path; 404 answers come back (the caller says what is missing), other errors
        raise Failure."""
        request = urllib.request.Request(self.url + path, headers={
            "Authorization": "Token " + self.token, "Accept": "application/json",
            "User-Agent": "belvedere-client/" + __version__})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.status, json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as error:
            detail = _detail(error)
            if error.code == 404:
                return 404, {"detail": detail}
            if error.code == 401:
                raise Failure("the portal refused the token (401 {}): check --token / BELVEDERE_TOKEN / {}"
                              .format(detail, TOKEN_FILE)) from None
            if error.code == 403:
                raise Failure("not allowed (403 {}) for {}".format(detail, self.url + path)) from None
            raise Failure("the portal answered {} for {}: {}".format(error.code, self.url + path, detail)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise Failure("cannot reach the portal at {}: {}".format(self.url, reason)) from None
        except ValueError as error:
            raise Failure("the portal's answer for {} is not JSON: {}".format(self.url + path, error)) from None


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(error.read(65536).decode("utf-8", "replace"))
        return str(body.get("detail") or body)[:300] if isinstance(body, dict) else str(body)[:300]
    except Exception:
        return str(error.reason)[:300]


def collect(api: Api, cluster: str, job_id: str) -> Dict[str, Any]:
    """The job and its three products; a product the portal does not have is None, with the reason in "missing"."""
    base = "/api/v1/jobs/{}/{}/".format(urllib.parse.quote(cluster, safe=""), urllib.parse.quote(str(job_id), safe=""))
    status, job = api.get(base)
    if status == 404:
        raise Failure("job {}/{} not found, or not visible to you ({})".format(cluster, job_id, job.get("detail", "")))
    report: Dict[str, Any] = {"job": job, "missing": {}}
    for part in PARTS:
        status, body = api.get(base + part + "/")
        if status == 404:
            report[part] = None
            report["missing"][part] = body.get("detail") or "not available"
        else:
            report[part] = body
    return report


# -- words ----------------------------------------------------------------------------------------------------------------
def _num(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _percent(fraction: Any) -> str:
    number = _num(fraction)
    return "?" if number is None else "{:.0f} %".format(100 * number)


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return "{:.3g} {}{}".format(value / factor, prefix, unit)
    return "{:.3g} {}".format(value, unit)


def _when(text: Any) -> str:
    if not isinstance(text, str) or not text:
        return "?"
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)
    except ValueError:
        return text
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _duration(seconds: Optional[float]) -> str:
    if seconds is None or seconds < 0:
        return "?"
    minutes = int(round(seconds / 60))
    return "{} h {:02d} min".format(minutes // 60, minutes % 60) if minutes >= 60 else "{} min".format(minutes)


def _elapsed(job: Dict[str, Any]) -> Optional[float]:
    try:
        start = datetime.fromisoformat(job["start_time"].replace("Z", "+00:00"))
        end = (datetime.fromisoformat(job["end_time"].replace("Z", "+00:00")) if job.get("end_time")
               else datetime.now(timezone.utc))
        return (end - start).total_seconds()
    except (KeyError, AttributeError, TypeError, ValueError):
        return None


def advice(report: Dict[str, Any]) -> List[str]:
    """What to do, from the saturation result and the stragglers: a few lines, most important first."""
    saturation, stragglers = report.get("saturation") or {}, report.get("stragglers") or []
    efficiency = report.get("efficiency") or {}
    lines = []
    idle = saturation.get("idle_gpus") or 0
    if idle:
        lines.append("{} GPU(s) sat idle: check that every rank gets a GPU (ranks per node, CUDA_VISIBLE_DEVICES)".format(idle))
    if stragglers:
        hosts = sorted({host for item in stragglers for host in (item.get("hosts") or [item.get("host")]) if host})
        lines.append("the whole job waits for its stragglers ({}): resubmit with --exclude={} and tell the operators"
                     .format(", ".join(hosts[:5]) or "see below", ",".join(hosts[:5]) or "<node>"))
    score, limiter = _num(saturation.get("job_score")), saturation.get("limiter") or ""
    if score is not None:
        if score < 30:
            lines.append("the GPUs are mostly waiting: profile the input pipeline and communication (nsys) before "
                         "scaling up")
        elif limiter in ("dram",):
            lines.append("memory-bound: larger micro-batches or fused kernels raise arithmetic intensity")
        elif limiter in ("nvlink", "pcie", "c2c"):
            lines.append("communication-bound: keep tensor parallelism inside a node and overlap gradient reduction")
        elif limiter == "tensor" and score < 70:
            lines.append("tensor-bound but well below the ceiling: try larger micro-batches, fewer pipeline bubbles "
                         "(more micro-batches per step) or less activation recomputation")
    if efficiency and efficiency.get("mfu") is None and "model_flops_per_token" in efficiency \
            and efficiency.get("model_flops_per_token") is None:
        lines.append("give the model config (PUT .../model/ or upload the Megatron-LM log) to get MFU")
    if not lines:
        lines.append("nothing stands out")
    return lines


def render_text(report: Dict[str, Any]) -> str:
    job, saturation, stragglers = report["job"], report.get("saturation"), report.get("stragglers")
    efficiency, missing = report.get("efficiency"), report.get("missing", {})
    out: List[str] = []
    title = "Job {}/{}".format(job.get("cluster"), job.get("display_id") or job.get("job_id"))
    out.append("{}  {}  ({}, {})  {}".format(title, job.get("name") or "", job.get("user_name") or "?",
                                            job.get("account") or "?", job.get("state") or "?"))
    out.append("  {} nodes, {} GPUs; started {}, {} {}".format(
        job.get("node_count", "?"), job.get("gpus", "?"), _when(job.get("start_time")),
        "ran" if job.get("end_time") else "running for", _duration(_elapsed(job))))

    out += ["", "Verdict"]
    if saturation:
        score = _num(saturation.get("job_score"))
        limiter = saturation.get("limiter") or ""
        comps = saturation.get("components") or {}
        labels = ", ".join(saturation.get("labels") or [])
        out.append("  Saturation      {}{}{}".format(
            "{:.0f}/100".format(score) if score is not None else "not scored",
            " ({})".format(labels) if labels else "",
            ", limited by {}".format(LIMITER_WORDS.get(limiter, limiter)) if limiter else ""))
        out.append("                  compute {}, memory {}, link {}".format(
            _percent(comps.get("compute")), _percent(comps.get("memory")), _percent(comps.get("link"))))
    else:
        out.append("  Saturation      {}".format(missing.get("saturation", "not available")))
    eff = efficiency or {}
    mfu, peak = _num(eff.get("mfu")), _num(eff.get("gpu_peak_tflops"))
    tps_gpu, tps = _num(eff.get("tokens_per_s_per_gpu")), _num(eff.get("tokens_per_s"))
    reasons = [str(reason) for reason in eff.get("missing") or []]
    if efficiency is None:
        unknown = "unknown ({})".format(missing.get("efficiency", "the portal has no efficiency answer"))
        out.append("  MFU             " + unknown)
        out.append("  Tokens/s/GPU    " + unknown)
    else:
        out.append("  MFU             " + ("{:.1f} % of {:.0f} TFLOP/s per GPU{}".format(
            100 * mfu, peak or 0, " ({})".format(eff["gpu_model"]) if eff.get("gpu_model") else "")
            if mfu is not None else "unknown" + _why(reasons, ("throughput", "model config", "peak", "mfu"))))
        out.append("  Tokens/s/GPU    " + ("{:,.0f} ({:,.0f} tokens/s for the job)".format(tps_gpu, tps or 0)
                                          if tps_gpu is not None else "unknown: " + NO_APP_METRICS))
    if eff.get("gap_words"):
        out.append("  Gap             " + str(eff["gap_words"]))
    out.append("  What to do")
    out += ["    - " + line for line in advice(report)]

    out += ["", "Efficiency"]
    if efficiency is None:
        out.append("  " + missing.get("efficiency", "not available"))
    else:
        flops = _num(eff.get("model_flops_per_token"))
        out.append("  Model FLOPs/token  " + (_si(flops, "FLOP") if flops is not None
                                              else "unknown" + _why(reasons, ("model config", "flops"))))
        if eff.get("formula"):
            out.append("                     " + str(eff["formula"]))
        energy = _num(eff.get("energy_per_token_j"))
        out.append("  Energy/token       " + ("{:.3g} J".format(energy) if energy is not None
                                              else "unknown" + _why(reasons, ("energy",))))
        if energy is None and not _why(reasons, ("energy",)) and (tps is None or saturation is None):
            out[-1] += ": it needs the throughput and the job's energy"
        if saturation and _num(saturation.get("energy_j")) is not None:
            out.append("  Energy (job)       {:.1f} kWh".format(saturation["energy_j"] / 3.6e6))
        for reason in reasons:
            out.append("  Missing: " + reason)

    out += ["", "Events (throughput dips)"]
    events = eff.get("events") if efficiency is not None else None
    if efficiency is None:
        out.append("  unknown: " + missing.get("efficiency", "not available"))
    elif tps is None and not events:
        out.append("  " + NO_APP_METRICS)
    elif not events:
        out.append("  none: throughput was steady")
    else:
        for item in events:
            dip = _num(item.get("dip"))
            out.append("  {} - {}  {:<10}  {}  {}".format(
                _when(item.get("start")), _when(item.get("end")) if item.get("end") else "now",
                item.get("kind", "?"), "-{:.0f} %".format(100 * dip) if dip is not None else "   ?", item.get("reason", "")))

    out += ["", "Stragglers"]
    if stragglers is None:
        out.append("  unknown: " + missing.get("stragglers", "not available"))
    elif not stragglers:
        out.append("  none: every GPU kept pace with its peers")
    else:
        for item in stragglers:
            out.append("  - " + str(item.get("reason") or item))

    if job.get("url"):
        out += ["", "Job page: " + str(job["url"])]
    return "\n".join(out) + "\n"


def _why(reasons: Sequence[str], words: Sequence[str]) -> str:
    for reason in reasons:
        if any(word in reason.lower() for word in words):
            return ": " + reason
    return ""


def report_json(report: Dict[str, Any]) -> Dict[str, Any]:
    return {"job": report["job"], "saturation": report.get("saturation"), "stragglers": report.get("stragglers"),
            "efficiency": report.get("efficiency"), "missing": report.get("missing", {}), "advice": advice(report)}


# -- the command ------------------------------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="belvedere", description="Belvedere from the command line.")
    top.add_argument("--version", action="version", version="belvedere-client " + __version__)
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    report = commands.add_parser("report", help="a job's report: saturation, MFU, tokens/s/GPU, events, stragglers",
                                 description="A job's report from the portal's API (jobstats-style).")
    report.add_argument("cluster", metavar="CLUSTER")
    report.add_argument("job_id", metavar="JOB_ID")
    report.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    report.add_argument("--url", help="the portal (default $BELVEDERE_URL)")
    report.add_argument("--token", help="your API token (default $BELVEDERE_TOKEN, else {})".format(TOKEN_FILE))
    report.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per request (default 30)")
    return top


def main(argv: Optional[Sequence[str]] = None) -> int:
    options = parser().parse_args(argv)
    try:
        job_id = options.job_id.strip()
        if not job_id.isdigit():
            raise Failure("JOB_ID {!r} is not a job number".format(options.job_id))
        api = Api(find_url(options.url), find_token(options.token), timeout=options.timeout)
        report = collect(api, options.cluster, job_id)
    except Failure as failure:
        print("belvedere: " + str(failure), file=sys.stderr)
        return EXIT_ERROR
    if options.json:
        sys.stdout.write(json.dumps(report_json(report), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
