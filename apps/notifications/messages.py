"""The mails of the notifications app, written from plain data: to a job's user when the running job wastes its
GPUs or has a persistent straggler, and the staff digest of the triage inbox.

Each mail says what was seen (with the numbers), what it costs (GPU-hours lost so far, the rule of
``apps.saturation.waste``), where to look (the job's page) and what to do about it, concretely: cancel an idle
allocation, check the data loader, resubmit with ``--exclude``. Every mail ends with why it came and how to
stop it.

Plain Python: no Django. Tested in tests/notifications/test_messages.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from apps.saturation.waste import IDLE_BUSY, LOSS_WORDS, Waste

SUBJECT_PREFIX = "[Belvedere]"
# What a unit that limits a *low* score says about the job (the saturation app's limiter keys).
LIMITER_ADVICE = {
    "tensor": "The tensor cores are the busiest unit, yet far from their roof: the GPUs spend most of the time waiting. "
              "Larger micro-batches keep them fed once the input keeps up.",
    "dram": "Memory bandwidth is the busiest unit: fuse kernels (e.g. fused optimizers, flash attention) and check for "
            "needless copies.",
    "nvlink": "NVLink traffic is the busiest unit: a smaller tensor-parallel degree moves traffic off the links.",
    "pcie": "PCIe is the busiest unit: the GPUs wait for host transfers. Pin host memory (pin_memory=True) and overlap "
            "copies with compute.",
    "c2c": "The Grace-Hopper link is the busiest unit: host offload traffic. Keep optimizer states on the GPU if they fit.",
}
WAITING_ADVICE = ("Check the data loader first: more DataLoader workers (num_workers), pin_memory=True, prefetching, and "
                  "data on a fast file system; then look at the job page's timeline for gaps between steps "
                  "(checkpoints, evaluation, communication).")


@dataclass(frozen=True)
class JobFacts:
    """What a mail says about one running job."""

    cluster: str
    job_id: str  # the display id (array and het jobs: 123_4, 123+1)
    name: str
    user_name: str
    account: str
    link: str  # the job page: SITE_URL + /jobs/<cluster>/<job_id>/
    gpus: int
    hours: float  # how long it has run
    score: float | None = None  # 0-100
    idle_gpus: int = 0
    limiter: str = ""
    settings_link: str = ""  # where the project switches these mails


@dataclass(frozen=True)
class Message:
    subject: str
    body: str


@dataclass(frozen=True)
class Thresholds:
    score_below: float
    idle_share: float
    rate_limit_hours: float
    straggler_minutes: float = 0.0


def duration_words(hours: float) -> str:
    """3 min, 45 min, 2 h 05 min, 26 h."""
    minutes = int(round(max(0.0, hours) * 60))
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes % 60 else f"{minutes // 60} h"


def _gpus(count: int) -> str:
    return f"{count:,} GPU{'s' * (count != 1)}"


def _job_words(job: JobFacts) -> str:
    return f"job {job.cluster}/{job.job_id}" + (f" ({job.name})" if job.name else "")


def _footer(job: JobFacts, thresholds: Thresholds, why: str) -> str:
    lines = ["", "--",
             f"You get this because project {job.account} asked to be told {why}. You get at most one such mail per job "
             f"every {duration_words(thresholds.rate_limit_hours)}; if the job is meant to run like this (a debugging or "
             f"interactive session), ignore it."]
    if job.settings_link:
        lines.append(f"Your project's managers switch these mails on and off at {job.settings_link}")
    return "\n".join(lines) + "\n"


def wasteful_message(job: JobFacts, waste: Waste, thresholds: Thresholds) -> Message:
    """The mail for a running job that wastes its GPUs: scored under the threshold, or many of its GPUs idle."""
    idle = max(0, min(int(job.idle_gpus or 0), job.gpus)) if job.gpus else max(0, int(job.idle_gpus or 0))
    mostly_idle = bool(job.gpus) and idle / job.gpus >= thresholds.idle_share
    if mostly_idle:
        headline = f"{idle:,} of {_gpus(job.gpus)} idle"
    else:
        headline = f"saturation {job.score:.0f} of 100" if job.score is not None else "GPUs far from saturation"
    subject = f"{SUBJECT_PREFIX} {_job_words(job)} wastes GPUs: {headline}"
    lines = [f"Hello {job.user_name},", "",
             f"your running {_job_words(job)} on {_gpus(job.gpus)} "
             + ("is losing much of what it holds." if mostly_idle or (waste.own_share or 0) >= thresholds.idle_share else
                "runs far from what its GPUs can do in its steady state."), ""]
    lines.append("What we see:")
    if job.score is not None:
        lines.append(f"  - GPU saturation {job.score:.0f} of 100 in its steady state (a job is flagged under "
                     f"{thresholds.score_below:.0f}): how close the GPUs run to what their busiest unit can do, averaged "
                     "over all GPUs.")
    if idle:
        lines.append(f"  - {idle:,} of {_gpus(job.gpus)} idle (busy less than {IDLE_BUSY:.0%} of the time).")
    lost = f"{waste.own:,.1f}"
    lines.append(f"  - {lost} GPU-hours lost by the job so far of {waste.gpu_hours:,.1f} held in {duration_words(job.hours)}"
                 + (f" (idle GPUs count whole: {waste.idle_gpu_hours:,.1f})" if waste.idle_gpu_hours else "")
                 + (f"; {waste.hardware_gpu_hours:,.1f} more lost to faulty hardware, which staff have been told of"
                    if waste.hardware_gpu_hours >= 0.05 else "")
                 + (f"; {waste.unknown_gpus:,} GPUs without a busy share are not counted" if waste.unknown_gpus else "") + ".")
    if waste.headroom:
        lines.append(f"  - {waste.headroom:,.1f} GPU-hours of headroom: what reaching the typical score of good jobs on "
                     "the same GPU model would gain (not a loss).")
    lines.append(f"    ({LOSS_WORDS})")
    lines += ["", f"The job's page: {job.link}", "", "What to do:"]
    steps = []
    if idle:
        steps.append(f"If the job does not need all its GPUs, cancel it (scancel {job.job_id}) and resubmit with fewer "
                     "(--gpus, --nodes): an idle allocation keeps others waiting. If it should use them, check that every "
                     "rank started and sees its own GPU (srun --ntasks-per-node / torchrun --nproc-per-node, "
                     "CUDA_VISIBLE_DEVICES).")
    if job.score is not None and job.score < thresholds.score_below:
        steps.append(WAITING_ADVICE)
        if job.limiter in LIMITER_ADVICE:
            steps.append(LIMITER_ADVICE[job.limiter])
    if not steps:
        steps.append(WAITING_ADVICE)
    lines += [f"  {number}. {step}" for number, step in enumerate(steps, 1)]
    lines.append(_footer(job, thresholds, "when a running job wastes its GPUs"))
    return Message(subject=subject, body="\n".join(lines))


def _straggler_where(item: Mapping) -> str:
    level = item.get("level") or "gpu"
    rank = f" (rank {item['rank']})" if item.get("rank") is not None else ""
    if level == "gpu":
        return f"GPU {item.get('gpu')} of node {item.get('host')}{rank}"
    if level == "node":
        return f"node {item.get('host')}, all its GPUs{rank}"
    if level == "switch":
        return f"switch {item.get('switch')}"
    return f"dragonfly group {item.get('group')}"


def excluded_hosts(stragglers: Iterable[Mapping]) -> list[str]:
    """The nodes to leave out of the next run: the hosts of GPU and node findings, in order, once each."""
    hosts: list[str] = []
    for item in stragglers:
        if (item.get("level") or "gpu") in ("gpu", "node"):
            for host in item.get("hosts") or ([item["host"]] if item.get("host") else []):
                if host not in hosts:
                    hosts.append(host)
    return hosts


@dataclass(frozen=True)
class Lasting:
    """A straggler finding and how long it has lasted (the longer of the detector's measure and this app's sweeps)."""

    finding: Mapping
    hours: float


def straggler_message(job: JobFacts, stragglers: Sequence[Lasting], thresholds: Thresholds) -> Message:
    """The mail for a running job with stragglers that persisted ``thresholds.straggler_minutes``."""
    first = stragglers[0]
    more = f" and {len(stragglers) - 1} more" if len(stragglers) > 1 else ""
    subject = f"{SUBJECT_PREFIX} {_job_words(job)}: {_straggler_where(first.finding)} slows it down{more}"
    lines = [f"Hello {job.user_name},", "",
             f"your running {_job_words(job)} on {_gpus(job.gpus)} has hardware that lags its peers. A synchronous "
             "training job runs at the speed of its slowest rank, so every GPU waits for it.", "", "What we see:"]
    for item in stragglers:
        finding = item.finding
        reason = finding.get("reason") or ""
        lines.append(f"  - {_straggler_where(finding)}: lagging for {duration_words(item.hours)}"
                     + (f" — {reason}" if reason else "") + ".")
    lines += ["", f"The job's page (section Stragglers): {job.link}", "", "What to do:"]
    hosts = excluded_hosts(item.finding for item in stragglers)
    steps = []
    if hosts:
        shown = ",".join(hosts[:16])
        steps.append(f"Resubmit without the lagging node{'s' * (len(hosts) > 1)}: sbatch --exclude={shown} ... "
                     f"(or restart from the last checkpoint with it), and tell the centre's staff so the node is checked.")
        if any((item.finding.get("cause") or "").strip() for item in stragglers):
            steps.append("The cause above (clocks held down by power or temperature) is the node's, not your code's.")
    if any((item.finding.get("level") or "gpu") in ("switch", "group") for item in stragglers):
        steps.append("A switch or group finding points at the network: tell the centre's staff; a resubmission placed "
                     "elsewhere avoids it.")
    lines += [f"  {number}. {step}" for number, step in enumerate(steps, 1)]
    lines.append(_footer(job, thresholds, f"when a straggler slows a running job for more than "
                                          f"{duration_words(thresholds.straggler_minutes / 60)}"))
    return Message(subject=subject, body="\n".join(lines))


@dataclass(frozen=True)
class DigestItem:
    """One entry of the triage inbox as the digest shows it (see ``apps.notifications.selectors.digest_items``)."""

    kind: str  # the triage inbox's kinds: wasteful_job, straggler, failing_node, bad_switch, namespace_request, catalog_incident
    title: str
    url: str = ""
    detail: str = ""
    owner: str = ""
    state: str = "new"
    lost_gpu_hours: float | None = None
    extra: dict = field(default_factory=dict)


KIND_WORDS = {"wasteful_job": "Wasteful running jobs", "straggler": "Stragglers", "failing_node": "Failing nodes",
              "bad_switch": "Bad switches", "namespace_request": "Namespace approvals", "catalog_incident": "Catalogue incidents"}


def digest_message(items: Sequence[DigestItem], *, inbox_link: str, period_hours: float, when: str,
                   synced: str | None = "") -> Message:
    """The staff digest: counts first, then each kind's items (wasteful jobs by GPU-hours lost, most first).
    ``synced``: when the inbox was last rebuilt from its sources (None: never, said so)."""
    open_items = [item for item in items if item.state not in ("resolved", "muted")]
    kinds: dict[str, list[DigestItem]] = {}
    for item in open_items:
        kinds.setdefault(item.kind, []).append(item)
    counts = ", ".join(f"{len(group)} {KIND_WORDS.get(kind, kind).lower()}" for kind, group in kinds.items())
    subject = (f"{SUBJECT_PREFIX} triage: {len(open_items)} item{'s' * (len(open_items) != 1)} need a person"
               if open_items else f"{SUBJECT_PREFIX} triage: nothing needs a person")
    lines = [f"The staff triage inbox at {when}: " + (counts if open_items else "empty") + "."]
    if synced is None:
        lines.append("The inbox was never rebuilt from its sources (is beat running triage.sync_inbox?): it may miss things.")
    elif synced:
        lines.append(f"Rebuilt from its sources at {synced}.")
    lines += [f"Inbox: {inbox_link}", ""]
    order = list(KIND_WORDS) + sorted(set(kinds) - set(KIND_WORDS))
    for kind in order:
        group = kinds.get(kind)
        if not group:
            continue
        if any(item.lost_gpu_hours is not None for item in group):
            group = sorted(group, key=lambda item: -(item.lost_gpu_hours or 0.0))
        lines.append(f"{KIND_WORDS.get(kind, kind)} ({len(group)}):")
        for item in group[:20]:
            lost = f" — {item.lost_gpu_hours:,.1f} GPU-hours lost" if item.lost_gpu_hours is not None else ""
            who = f" [{item.owner}]" if item.owner else ""
            state = f" ({item.state})" if item.state and item.state != "new" else ""
            lines.append(f"  - {item.title}{lost}{who}{state}")
            if item.detail:
                lines.append(f"    {item.detail[:200]}")
            if item.url:
                lines.append(f"    {item.url}")
        if len(group) > 20:
            lines.append(f"  … and {len(group) - 20} more in the inbox")
        lines.append("")
    lines.append(f"-- Sent every {duration_words(period_hours)} to NOTIFY_STAFF_DIGEST_EMAILS.")
    return Message(subject=subject, body="\n".join(lines) + "\n")


@dataclass(frozen=True)
class JobEndSummary:
    """What the job-end mail says about a job that ended (numbers None when not known; ``missing`` says why)."""

    cluster: str
    job_id: str
    name: str
    user_name: str
    state: str  # Slurm's final state, e.g. COMPLETED, FAILED, TIMEOUT
    link: str  # the job page
    gpus: int = 0
    hours: float = 0.0  # how long it ran
    score: float | None = None
    limiter: str = ""
    idle_gpus: int = 0
    stragglers: Sequence[str] = ()  # where each straggler was, in words
    mfu: float | None = None
    tokens_per_s_per_gpu: float | None = None
    energy_per_token_j: float | None = None
    dips: Mapping[str, int] = field(default_factory=dict)  # throughput dips by cause
    missing: Sequence[str] = ()
    report_link: str = ""  # where the PDF report is asked for
    settings_link: str = ""


def _energy_words(joules: float) -> str:
    return f"{joules:,.2f} J" if joules >= 1 else f"{joules * 1000:,.1f} mJ"


def job_end_message(job: JobEndSummary) -> Message:
    """The summary mailed once when a job of a user who asked for it ends: how it ended, how well it used its GPUs
    (saturation, MFU, tokens/s per GPU, energy per token), what slowed it, and where to read more."""
    words = f"job {job.cluster}/{job.job_id}" + (f" ({job.name})" if job.name else "")
    headline = f"saturation {job.score:.0f}/100" if job.score is not None else "not scored"
    if job.mfu is not None:
        headline += f", MFU {job.mfu * 100:.0f} %"
    subject = f"{SUBJECT_PREFIX} {words} ended {job.state}: {headline}"
    lines = [f"Hello {job.user_name},", "", f"your {words} ended ({job.state}) after {duration_words(job.hours)} on "
             f"{_gpus(job.gpus) if job.gpus else 'its GPUs'}" + (f": {job.gpus * job.hours:,.1f} GPU-hours." if job.gpus else "."), "",
             "How it used its GPUs:"]
    if job.score is not None:
        lines.append(f"  - GPU saturation {job.score:.0f} of 100" + (f", limited by {job.limiter}" if job.limiter else "") + ".")
    if job.idle_gpus:
        lines.append(f"  - {job.idle_gpus:,} GPU{'s' * (job.idle_gpus != 1)} idle.")
    if job.mfu is not None:
        lines.append(f"  - MFU {job.mfu * 100:.1f} % (model FLOPs against the GPUs' dense BF16 peak).")
    if job.tokens_per_s_per_gpu is not None:
        lines.append(f"  - {job.tokens_per_s_per_gpu:,.0f} tokens/s per GPU.")
    if job.energy_per_token_j is not None:
        lines.append(f"  - {_energy_words(job.energy_per_token_j)} per token.")
    for why in job.missing:
        lines.append(f"  - not available: {why}")
    if job.dips or job.stragglers:
        lines += ["", "What slowed it:"]
        for kind, count in sorted(job.dips.items(), key=lambda item: -item[1]):
            lines.append(f"  - {count} throughput dip{'s' * (count != 1)} caused by {kind}")
        for where in job.stragglers[:5]:
            lines.append(f"  - straggler: {where}")
        if len(job.stragglers) > 5:
            lines.append(f"  - and {len(job.stragglers) - 5} more stragglers")
    lines += ["", f"The job's page: {job.link}"]
    if job.report_link:
        lines.append(f"A PDF report for a proposal or a post-mortem: POST {job.report_link} (or the job page's report button).")
    lines += ["", "--", "You get this because you asked for a summary when your jobs end: one mail per job."]
    if job.settings_link:
        lines.append(f"Switch it off at {job.settings_link}")
    return Message(subject=subject, body="\n".join(lines) + "\n")
