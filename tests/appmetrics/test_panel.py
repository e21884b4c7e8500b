"""The job page's "Training throughput" panel: first-screen facts from hand-built rows (stored through the real
ingest service into a real embedded telemetry store), the page and its figure JSON, how to send metrics when there
are none, one finding per kind of dip, and the efficiency cache moving on when what it depends on changes."""
from datetime import datetime, timedelta, timezone

import pytest
from django.core.cache import cache
from django.utils import timezone as dj_timezone

from apps.appmetrics import panel
from apps.appmetrics.services import mark_series_written, metrics_ingest, model_config_set
from apps.core.panels import job_panels
from apps.jobs.models import Cluster, Job

NOW = dj_timezone.now().replace(microsecond=0)
T0 = NOW - timedelta(hours=1)
# Two layers, hidden 1024, 16 heads, sequence 2048, vocabulary 32,000, FFN 4 x hidden, no GQA/SwiGLU/MoE.
# By hand (flops.py's count): per layer attention 4 h^2 = 4,194,304 and FFN 2 h f = 8,388,608 -> 12,582,912;
# two layers 25,165,824, logits h V = 32,768,000 -> N_active 57,933,824; 6 N = 347,602,944; attention
# 12 L h s = 50,331,648 -> 397,934,592 FLOPs per token. At 96,000 tokens/s on 32 GPUs = 3,000 per GPU against a
# 10 TFLOP/s peak: MFU = 3,000 x 397,934,592 / 1e13 = 11.94 % -> "12 %".
MODEL = {"layers": 2, "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 32000, "global_batch": 64,
         "gpu_peak_tflops": 10.0}


@pytest.fixture
def job(db, store):
    cache.clear()  # the efficiency is cached by job row and stamps: a job of an earlier test looks the same
    cluster = Cluster.objects.create(name="alps")
    return Job.objects.create(cluster=cluster, job_id=1, name="gpt-small", user_name="alice", account="a-llm01",
                              state="RUNNING", node_list=[f"nid{n:06d}" for n in range(1, 9)], node_count=8, gpus=32,
                              start_time=T0)


@pytest.fixture
def alice(client, make_user):
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    return client


def rows(n=60, every=60.0, tps=96_000.0, end=NOW - timedelta(seconds=60)):
    """``n`` rows a minute apart ending at ``end``: tokens/s, iteration time and a falling loss."""
    first = end.timestamp() - (n - 1) * every
    return [{"ts": first + i * every, "step": 10 * (i + 1), "tokens_per_s": tps, "iteration_s": 64 * 2048 / tps,
             "loss": 4.0 - 0.02 * i} for i in range(n)]


def facts_by_label(part):
    return {fact.label: fact for fact in part.facts}


def test_a_job_without_metrics_has_no_first_screen_part_and_the_panel_says_how_to_send_them(job, alice):
    assert panel.summary(job) is None  # not every GPU job trains a model: nothing on the first screen
    page = alice.get("/jobs/alps/1/").content.decode()
    assert 'id="panel-appmetrics"' in page and "Training throughput" in page
    section = page[page.index('id="panel-appmetrics"'):]
    assert "No application metrics for this job" in section
    assert "bv.log(step=it, tokens_per_s=" in section  # the client helper
    assert "/api/v1/jobs/alps/1/metrics/?format=megatron-log" in section  # the job's own address
    assert "?format=tensorboard" in section
    assert 'id="appmetrics-figure"' not in section  # no empty plot


def test_summary_says_tokens_per_gpu_mfu_and_freshness_from_stored_rows(job):
    assert metrics_ingest(job, rows(), source="test") == 180
    model_config_set(job, MODEL, source="api")
    part = panel.summary(job)
    facts = facts_by_label(part)
    assert facts["Tokens/s per GPU"].value == "3,000"
    assert "96,000 tokens/s over 32 GPUs" in facts["Tokens/s per GPU"].detail
    assert facts["MFU"].value == "12 %"
    assert facts["Energy per token"].value == "–"  # no telemetry product: the reason instead of a number
    assert "energ" in facts["Energy per token"].detail or "telemetry" in facts["Energy per token"].detail
    fresh = part.freshness[0]
    assert fresh.source == "Application metrics" and fresh.state == "live"
    assert fresh.first == NOW - timedelta(seconds=60 + 59 * 60) and fresh.last == NOW - timedelta(seconds=60)
    assert "60 rows" not in fresh.words and "180 rows" in fresh.words and "ago" in fresh.words
    assert part.findings == []  # a steady job: no dip, nothing to look at


def test_a_job_whose_rows_stopped_long_ago_is_stale_and_one_that_ended_early_says_so(job):
    metrics_ingest(job, rows(n=10, end=NOW - timedelta(minutes=45)), source="test")
    assert panel.summary(job).freshness[0].state == "stale"
    Job.objects.filter(pk=job.pk).update(state="COMPLETED", end_time=NOW - timedelta(minutes=5))
    job.refresh_from_db()
    fresh = panel.summary(job).freshness[0]
    assert fresh.state == "ends early" and "40 min before the job ended" in fresh.words


def test_the_page_renders_the_panel_after_saturation_and_its_figure_draws_the_series(job, alice):
    metrics_ingest(job, rows(), source="test")
    model_config_set(job, MODEL, source="api")
    keys = [p.key for p in job_panels()]
    assert keys.index("appmetrics") == keys.index("saturation") + 1
    page = alice.get("/jobs/alps/1/").content.decode()
    assert 'id="fact-tokens-per-gpu"' in page and 'id="fact-mfu"' in page  # on the first screen
    section = page[page.index('id="panel-appmetrics"'):]
    assert 'id="appmetrics-figure"' in section and "/jobs/alps/1/panels/appmetrics/throughput.json" in section
    assert "No dip in throughput so far" in section
    answer = alice.get("/jobs/alps/1/panels/appmetrics/throughput.json")
    assert answer.status_code == 200
    body = answer.json()
    names = [trace["name"] for trace in body["data"]]
    assert names[:2] == ["tokens/s", "steady 96,000 tokens/s"] and "s / iteration" in names and "loss" in names
    tokens = body["data"][0]
    assert len(tokens["x"]) == 60 and tokens["y"][0] == 96000.0 and tokens["x"][-1].endswith("Z")
    # every subplot shares the first one's time axis
    assert all(body["layout"][f"xaxis{n}"]["matches"] == "x" for n in (2, 3))
    assert body["coverage"]["rows"] == 180 and body["events"] == []


def test_one_finding_per_kind_of_dip_the_largest_in_words_a_straggler_as_a_warning():
    at = datetime(2026, 11, 24, 10, 30, tzinfo=timezone.utc)
    def event(kind, minutes, seconds, dip, reason):
        start = at + timedelta(minutes=minutes)
        return {"start": start.isoformat(), "end": (start + timedelta(seconds=seconds)).isoformat(), "kind": kind,
                "dip": dip, "reason": reason}
    events = [event("checkpoint", 0, 90, 0.42, "all 512 GPUs idle together"),
              event("checkpoint", 20, 60, 0.30, "all 512 GPUs idle together"),
              event("checkpoint", 40, 75, 0.35, "all 512 GPUs idle together"),
              {**event("straggler", 50, 0, 0.12, "nid001234 GPU 2 lags its peers from 11:20"), "end": None}]
    findings = panel.event_findings(events, reference=at)
    assert [f.level for f in findings] == ["warning", "info"]  # the straggler first
    straggler, checkpoint = findings
    assert straggler.title.startswith("Throughput fell 12 % from 11:20 UTC to the end of the data (straggler: nid001234")
    assert "--exclude" in straggler.action
    assert checkpoint.title == ("Throughput fell 42 % for 90 s at 10:30 UTC (checkpoint: all 512 GPUs idle together); "
                                "2 more like it.")
    assert "async" in checkpoint.action


def test_the_cached_efficiency_moves_on_when_series_are_written_or_the_model_changes(job):
    metrics_ingest(job, rows(tps=96_000.0), source="test")
    assert panel.efficiency(job)["tokens_per_s"] == 96_000.0
    assert panel.efficiency(job)["mfu"] is None  # no model yet
    model_config_set(job, MODEL, source="api")
    assert panel.efficiency(job)["mfu"] == pytest.approx(0.1194, abs=5e-4)  # the model config is in the key
    # The same times, half the rate, written to the store behind the services' back: the cache cannot know...
    from apps.appmetrics.services import rows_frame
    from apps.telemetry.store import telemetry_store

    telemetry_store().write_job_series(rows_frame(job, rows(tps=48_000.0)))
    assert panel.efficiency(job)["tokens_per_s"] == 96_000.0
    mark_series_written(job)  # ...until told
    assert panel.efficiency(job)["tokens_per_s"] == 48_000.0
    metrics_ingest(job, rows(tps=24_000.0), source="test")  # the services tell it themselves
    assert panel.efficiency(job)["tokens_per_s"] == 24_000.0


def test_the_figure_breaks_its_lines_where_nothing_was_logged(job):
    """An evaluation that held the log for 20 minutes: the curve must not draw a slope across time nothing was
    logged (the live demo drew a ramp from 166,000 to 13,000 tokens/s over the 16 silent minutes)."""
    early = rows(n=30, end=NOW - timedelta(minutes=40))
    late = rows(n=10, end=NOW - timedelta(seconds=60))
    metrics_ingest(job, early + late, source="test")
    body = panel.throughput_figure(job, {})
    tokens = next(trace for trace in body["data"] if trace.get("name") == "tokens/s")
    assert tokens["y"].count(None) == 1  # one break, at the gap
    gap = tokens["y"].index(None)
    assert tokens["x"][gap] == tokens["x"][gap - 1]  # the break sits at the last row before the silence
    assert len(tokens["customdata"]) == len(tokens["x"]) == len(tokens["y"]) == 41


def test_gpu_telemetry_that_starts_well_after_the_first_row_is_said_on_the_gpu_row():
    from apps.appmetrics.panel import _late_telemetry_words

    coverage = {"first": "2026-11-24T01:00:00+00:00", "last": "2026-11-24T07:00:00+00:00"}
    assert _late_telemetry_words(coverage, ["2026-11-24T06:40:00Z"]) == "GPU telemetry only from 06:40 UTC"
    assert _late_telemetry_words(coverage, ["2026-11-24T01:05:00Z"]) is None  # within the first ten minutes
    assert _late_telemetry_words(coverage, ["2026-11-24T01:15:00Z"]) is None  # within a twentieth of six hours
    across = {"first": "2026-11-23T20:00:00+00:00", "last": "2026-11-24T07:00:00+00:00"}
    assert _late_telemetry_words(across, ["2026-11-24T06:40:00Z"]) == "GPU telemetry only from 2026-11-24 06:40 UTC"
    assert _late_telemetry_words({"first": None, "last": None}, ["2026-11-24T06:40:00Z"]) is None
