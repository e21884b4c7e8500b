"""A limited score, not a failure (issue 18, acceptance 4): GPUs that report utilisation only.

Many sites' GPUs (or a collector whose DCGM host engine refuses the profiling counters) send GPU_UTIL
(203), the SM clock (100) and its maximum (113), temperature (150) and power (155), and none of the
DCGM profiling fields the saturation score S needs. Such a job gets what can be said — busy time,
clocks, throttling, energy, idle GPUs — labelled as a limited score, on the row, the first screen and
the panel; a fully profiled job is never labelled limited.
"""
import io
import re
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from django.utils import timezone

from apps.saturation.models import JobSaturation
from apps.saturation.products import score_samples
from apps.saturation.scoring import GPU_LIMITED_LABEL, LIMITED_LABEL, PROFILING_FIELDS, score, summarize
from apps.saturation.services import job_saturation_refresh
from apps.telemetry.synthetic_jobs import job_chunks

UTILISATION_ONLY = (203, 100, 113, 150, 155)
HOSTS = [f"nid{n:06d}" for n in range(1, 5)]
START = pd.Timestamp("2026-03-02 08:00", tz="UTC")
S_FIELDS = (1004, 1005, 1006, 1007, 1008, 1009, 1010, 1011, 1012, 1076, 1078)  # every field behind S


def utilisation_only(frame: pd.DataFrame, fields=UTILISATION_ONLY) -> pd.DataFrame:
    return frame[frame["field"].isin(fields)].reset_index(drop=True)


def idle_gpus_frame(seconds=1800, seed=3, hosts=HOSTS) -> pd.DataFrame:
    """The synthetic job whose GPU 0 on each node works (GPU_UTIL ~96 %) and GPUs 1-3 sit idle."""
    return pd.concat(list(job_chunks("idle_gpus", hosts, START, seconds, seed=seed)), ignore_index=True)


# ---------------------------------------------------------------------------------------------
# The summary


def test_hand_worked_utilisation_only_gpus_give_busy_clocks_throttling_energy_and_idle():
    T = 40
    full = lambda a, b: np.stack([np.full(T, a, dtype=float), np.full(T, b, dtype=float)])  # noqa: E731 - GPU 0, GPU 1
    reasons = np.zeros((2, T))
    reasons[0, :10] = 0x4  # GPU 0 power-capped a quarter of the time
    values = {203: full(80, 2), 100: full(1485, 300), 113: full(1980, 1980), 150: full(61, 33), 155: full(400, 80), 112: reasons}
    summary = summarize(score(values), interval_s=10, power_w=values[155])

    assert summary.limited and summary.limited_gpus == 2 and summary.labels[0] == LIMITED_LABEL
    assert np.isnan(summary.score) and summary.limiter == "" and summary.limiter_share == {}
    assert summary.window == slice(0, T)  # the median GPU never exceeds 0.5 busy: the whole run
    assert [g.busy for g in summary.gpus] == pytest.approx([0.8, 0.02])
    assert summary.busy == pytest.approx(0.41) and summary.idle_gpus == 1 and "1 idle GPU" in summary.labels
    assert summary.gpus[0].clock_factor == pytest.approx(0.75) and summary.gpus[0].throttled == pytest.approx(0.25)
    assert summary.gpus[0].labels == ["clock-limited (power/thermal)"] and summary.gpus[1].labels == ["idle"]
    assert summary.energy_j == pytest.approx((400 + 80) * T * 10)
    assert summary.energy_low_j is None  # no S: "energy at low saturation" is unknown, not all of it
    assert set(S_FIELDS) | {1002, 1003} == set(summary.missing_fields) and set(summary.missing_fields) <= set(PROFILING_FIELDS)
    assert "no data" not in summary.labels and not any("saturation" in label for label in summary.labels)


def test_the_synthetic_idle_gpus_job_with_utilisation_only_is_a_limited_score():
    frame = utilisation_only(idle_gpus_frame())
    assert set(frame["field"].unique()) == set(UTILISATION_ONLY)
    scored = score_samples(frame, hosts_order=HOSTS)
    summary = scored.summary
    util = frame[frame["field"] == 203].groupby(["host", "gpu"])["value"].mean() / 100  # the whole run is the steady state
    assert summary.window == slice(0, len(scored.times))
    assert summary.limited and summary.labels[:2] == [LIMITED_LABEL, "12 idle GPUs"] and summary.idle_gpus == 12
    assert summary.busy == pytest.approx(util.mean(), abs=1e-4)
    assert [g.busy for g in summary.gpus] == pytest.approx(util.to_list(), abs=1e-4)
    assert [g.labels[0] for g in summary.gpus] == [GPU_LIMITED_LABEL, "idle", "idle", "idle"] * 4
    power = frame[frame["field"] == 155]["value"]
    assert summary.energy_j == pytest.approx(power.sum() * 10, rel=1e-6) and summary.energy_low_j is None
    working = [g.clock_factor for g in summary.gpus[::4]]
    assert working == pytest.approx([0.975] * 4, abs=0.01)
    # The product carries what the panel's heatmaps fall back to; S and its components are empty.
    assert all(np.isfinite(scored.cube.values[name]).any() for name in ("busy", "clock_factor", "sm_clock", "power", "temperature"))
    assert not any(np.isfinite(scored.cube.values[name]).any() for name in ("S", "C", "M", "L"))


def test_a_fully_profiled_job_is_not_limited_and_a_mixed_one_says_which_gpus_lack_the_fields():
    frame = idle_gpus_frame()
    profiled = score_samples(frame, hosts_order=HOSTS).summary
    assert not profiled.limited and profiled.limited_gpus == 0 and profiled.missing_fields == ()
    assert LIMITED_LABEL not in profiled.labels and profiled.labels == ["12 idle GPUs", "idle"]
    assert profiled.energy_low_j is not None and np.isfinite(profiled.score)

    # One node's collector without the profiling permission: the rest are scored, that node's GPUs said.
    lacking = frame["host"] == HOSTS[0]
    mixed = pd.concat([frame[~lacking], utilisation_only(frame[lacking])], ignore_index=True)
    summary = score_samples(mixed, hosts_order=HOSTS).summary
    assert not summary.limited and summary.limited_gpus == 4 and "4 GPUs report utilisation only" in summary.labels
    assert np.isfinite(summary.score) and LIMITED_LABEL not in summary.labels and summary.missing_fields == ()
    assert summary.gpus[0].limited and summary.gpus[0].labels == [GPU_LIMITED_LABEL] and not summary.gpus[4].limited
    # GPUs without S do not count as "low saturation" energy.
    power = mixed[(mixed["field"] == 155)]
    assert summary.energy_low_j < power[power["host"] != HOSTS[0]]["value"].sum() * 10


# ---------------------------------------------------------------------------------------------
# End to end: store -> scoring service -> row -> job page, API and figures


@pytest.fixture
def limited_job(db, store):
    """alice's running job on four nodes whose collectors send utilisation, clocks, power and temperature only."""
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(minutes=40)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start - timedelta(minutes=2), start_time=start, node_list=HOSTS,
                             node_count=4, gpus=16)
    for chunk in job_chunks("idle_gpus", HOSTS, start, 2340, seed=4):
        store.write(utilisation_only(chunk))
    return job


def first_screen_text(page: str) -> str:
    facts = page[page.index('aria-label="The job at a glance"'):page.index("first-screen__stamp")]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", facts))


def saturation_panel(page: str) -> str:
    return page[page.index('id="saturation-heading"'):page.index('id="saturation-downloads"')]


def test_the_service_stores_a_limited_score_and_the_job_page_says_so(limited_job, client, make_user):
    from apps.telemetry.services import job_telemetry_refresh

    job_telemetry_refresh(limited_job)
    record = job_saturation_refresh(limited_job)
    assert record.status == "ready" and record.message == ""  # never "failed", never "empty"
    assert record.score is None and record.labels[0] == LIMITED_LABEL and record.idle_gpus == 12
    assert record.energy_j > 0 and record.energy_low_j is None and record.limiter == ""
    busy = [g["busy"] for g in record.per_gpu]
    assert len(busy) == 16 and all(b is not None for b in busy) and all(g["score"] is None for g in record.per_gpu)
    headline = f"{100 * sum(busy) / len(busy):.0f} %"

    client.force_login(make_user("alice"))
    response = client.get("/jobs/alps/31/")
    assert response.status_code == 200
    page = response.content.decode()
    first = first_screen_text(page)
    assert f"Busy time (limited score) {headline} Limited score: these GPUs report utilisation only (no DCGM profiling fields)" in first
    assert "Idle GPUs 12 of 16" in first and "SM clock 98 % of max" in first  # the working GPUs' clock, not the idle ones'
    assert "Enable the DCGM profiling metrics" in page and "deploy/collector/README.md" in page
    assert "whether compute, memory bandwidth or the links limit the job cannot be told" in page
    for words in ("failed", "Failed", "not scored", "Not scored", "no score", "no data"):
        assert words not in first and words not in saturation_panel(page), words

    panel = saturation_panel(page)
    assert 'id="saturation-limited"' in panel and f'<dd id="saturation-busy">{headline} ' in panel
    assert 'id="saturation-score"' not in panel and "of 100" not in panel
    assert '<option value="busy" selected>' in panel and '<option value="S"' not in panel and '<option value="score"' not in panel
    assert "the 4 working ones 96 %" in panel
    # A stale choice of the S heatmap in the address falls back to busy.
    assert '<option value="busy" selected>' in client.get("/jobs/alps/31/?smetric=S&ssort=score").content.decode()

    # The job list has no score to show, but says why: the flag, next to the dash.
    assert "utilisation only" in record.flags
    listing = client.get("/jobs/").content.decode()
    cell = listing[listing.index('saturation-cell', listing.index("/jobs/alps/31/")):]
    cell = cell[:cell.index("</td>")]
    assert "–" in cell and 'title="utilisation only"' in cell


def test_the_panel_json_endpoints_answer_for_a_limited_score(limited_job, client, make_user):
    record = job_saturation_refresh(limited_job)
    client.force_login(make_user("alice"))
    body = client.get("/api/v1/jobs/alps/31/saturation/").json()
    assert body["job_score"] is None and body["labels"][0] == LIMITED_LABEL and body["idle_gpus"] == 12
    heat = client.get("/api/v1/jobs/alps/31/saturation/heatmap/", {"metric": "busy", "bins": "20"})
    assert heat.status_code == 200
    rows = heat.json()
    assert len(rows["rows"]) == 16 and rows["title"] == "busy (utilisation)"
    medians = [np.nanmedian(np.array(v, dtype=float)) * rows["scale"] for v in rows["values"]]
    assert sum(m > 0.9 for m in medians) == 4 and sum(m < 0.05 for m in medians) == 12
    for metric in ("clock_factor", "power", "temperature"):
        compact = client.get("/api/v1/jobs/alps/31/saturation/heatmap/", {"metric": metric, "mode": "deviation"})
        assert compact.status_code == 200, metric
    bands = client.get("/jobs/alps/31/panels/saturation/bands.json")
    assert bands.status_code == 200
    traces = bands.json()["data"]
    names = {trace.get("name") for trace in traces}
    assert "busy (utilisation): median" in names and not any(str(name).startswith("saturation") for name in names)
    median = next(trace for trace in traces if trace.get("name") == "busy (utilisation): median")
    assert median.get("visible", True) is True and all(0 <= y <= 1 for y in median["y"] if y is not None)
    assert client.get("/api/v1/jobs/alps/31/stragglers/").status_code == 200
    table = client.get("/api/v1/jobs/alps/31/saturation/gpus.csv")
    assert table.status_code == 200 and len(pd.read_csv(io.BytesIO(table.content))) == 16
    assert JobSaturation.objects.get(pk=record.pk).status == "ready"


def test_a_row_scored_before_limited_scores_existed_reads_as_limited(limited_job, client, make_user):
    """Rows written before the label: a ready result without a score is a limited one, not a crash."""
    job_saturation_refresh(limited_job)
    JobSaturation.objects.filter(job=limited_job).update(labels=["12 idle GPUs", "idle"])
    client.force_login(make_user("alice"))
    response = client.get("/jobs/alps/31/")
    assert response.status_code == 200 and "Busy time (limited score)" in first_screen_text(response.content.decode())


def test_a_fully_profiled_job_page_is_not_labelled_limited(megatron_job, client, make_user):
    job = megatron_job(job_id=32, hosts=HOSTS[:2], minutes=30, seconds=1500, seed=6)
    record = job_saturation_refresh(job)
    assert record.score is not None and LIMITED_LABEL not in record.labels
    client.force_login(make_user("alice"))
    page = client.get("/jobs/alps/32/").content.decode()
    assert "Limited score" not in page and "Busy time (limited score)" not in page
    assert f'<dd id="saturation-score">{record.score:.0f} ' in page and '<option value="S" selected>' in page


def test_the_terminal_report_of_a_limited_score_gives_busy_time_not_a_crash(limited_job):
    import io

    from django.core.management import call_command

    from apps.saturation.models import JobSaturation

    job = limited_job
    out = io.StringIO()
    call_command("job_report", job.cluster.name, str(job.job_id), "--score", stdout=out)
    text = out.getvalue()
    record = JobSaturation.objects.get(job=job)
    busy = [g["busy"] for g in record.per_gpu if g.get("busy") is not None]
    assert record.score is None and busy
    assert "Limited score: these GPUs report utilisation only" in text
    assert f"busy {100 * sum(busy) / len(busy):.0f} % of the time" in text
