"""The job app's own panels on its page: timeline and steps, and how scripts in the job reach the portal."""
from django.urls import reverse
from django.utils import timezone

from apps.core.hang_verdicts import hang_verdict
from apps.core.numbers import clock, duration_words
from apps.core.panels import Fact, Finding, JobPanel, PanelSummary, register_job_panel

from .choices import JobStateChoices
from .endings import LEVELS as ENDED_BADLY, Step, ending


def timeline_context(job, request) -> dict:
    return {"steps": list(job.steps.all()[:200])}


def timeline_summary(job) -> PanelSummary | None:
    if job.start_time is None:
        return PanelSummary(facts=[Fact("State", job.get_state_display(), job.state_reason or "waiting to start", "info",
                                        "fact-state", rank=0)])
    if job.end_time:
        # the date where the start is not today: a job that ended two days ago must not read as this morning's
        words = (f"ran {duration_words(job.end_time - job.start_time)}, {clock(job.start_time, timezone.now())}–"
                 f"{clock(job.end_time, job.start_time)}")
    else:
        words = f"running for {duration_words(job.elapsed)} since {clock(job.start_time, timezone.now())}"
        if job.time_limit_minutes:
            words += f" of {duration_words(job.time_limit_minutes * 60)} allowed"
    level = "ok" if job.state in (JobStateChoices.RUNNING, JobStateChoices.COMPLETED) else "warning"
    part = PanelSummary()
    end = job_ending(job)
    if end is not None:  # how it ended comes first: the state tile and a finding at the top of the list
        level = end.level
        words = f"{', '.join(end.facts)}; {words}" if end.facts else words
        part.findings.append(Finding(end.level, f"{end.title} Likely cause: {end.cause}", end.action, "#panel-timeline",
                                     "timeline", rank=0))
    part.facts.append(Fact("State", job.get_state_display(), words, level, "fact-state", rank=0))
    return part


def job_ending(job):
    """How the job ended and the likely cause (apps/jobs/endings.py), from what Slurm recorded; None while it
    runs or when it completed cleanly."""
    if job.is_active or not job.end_time:
        return None
    elapsed = (job.end_time - job.start_time).total_seconds() if job.start_time else None
    steps = [Step(step.step_id, step.name, step.state, step.exit_code) for step in job.steps.all()[:50]]
    hang = hang_verdict(job) if job.state in ENDED_BADLY else None  # a completed job was not stuck
    return ending(state=job.state, exit_code=job.exit_code, signal=job.signal, reason=job.state_reason,
                  elapsed_s=elapsed, limit_minutes=job.time_limit_minutes, when=clock(job.end_time, job.start_time),
                  nodes=job.node_count, steps=steps, hang=hang)


def scripts_context(job, request) -> dict:
    return {"token_url": reverse("jobs-api:job-token", args=[job.cluster.name, job.job_id]),
            "api_url": reverse("jobs-api:job-detail", args=[job.cluster.name, job.job_id])}


def register() -> None:
    register_job_panel(JobPanel(key="timeline", title="Timeline and steps", order=60, template="jobs/_timeline_panel.html",
                                context=timeline_context, summary=timeline_summary))
    register_job_panel(JobPanel(key="scripts", title="For scripts in this job", order=90, template="jobs/_scripts_panel.html",
                                context=scripts_context))
