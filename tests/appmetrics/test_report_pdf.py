"""The PDF report renderer (plain: no Django, no database): pages drawn from plain facts, read back with pypdfium2
(text and pixels), the verdict's choice of the top finding, and a job with nothing measured still gets a report
that says what is missing."""
from datetime import datetime, timedelta, timezone

import pypdfium2 as pdfium
import pytest

from apps.appmetrics.report_pdf import render_report, top_finding

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)


def _facts(**over) -> dict:
    ts = [T0 + timedelta(seconds=30 * i) for i in range(240)]
    tps = [300_000.0 * (0.45 if i % 80 < 3 else 1.0) for i in range(240)]
    events = [{"start": (T0 + timedelta(seconds=30 * i)).isoformat(), "end": (T0 + timedelta(seconds=30 * (i + 3))).isoformat(),
               "kind": "checkpoint", "dip": 0.55, "reason": "all GPUs idle together while a checkpoint was written"}
              for i in range(0, 240, 80)]
    facts = {
        "job": {"id": "alps/424242", "name": "gpt-test", "user": "alice", "account": "a-llm01", "state": "COMPLETED",
                "gpus": 64, "nodes": 16, "gpu_model": "GH200", "start": T0.isoformat(), "end": ts[-1].isoformat(), "elapsed": "2 h"},
        "generated": "2026-03-02 10:00 UTC",
        "saturation": {"score": 58.0, "limiter": "tensor", "labels": ["compute-bound"], "idle_gpus": 0,
                       "per_gpu": [55.0 + (i % 7) for i in range(64)], "straggler_scores": [], "stragglers": []},
        "efficiency": {"gpus": 64, "tokens_per_s": 300_000.0, "tokens_per_s_per_gpu": 4687.5, "model_flops_per_token": 4.2e10,
                       "gpu_peak_tflops": 989.0, "mfu": 0.199, "tensor_active": 0.55, "energy_per_token_j": 0.21,
                       "gap_words": "tensor pipes 55 % busy, MFU 20 %: 64 % of tensor work is recomputation, padding or below-peak rate",
                       "formula": "6 x 7.0 B active parameters + 12 x 32 layers x 4096 hidden x 4096 tokens = 42.0 GFLOP per token",
                       "events": events, "missing": []},
        "throughput": {"ts": ts, "tokens_per_s": tps, "source": "logged tokens_per_s"},
        "activity": {"ts": ts[::2], "sm": [0.8] * 120, "tensor": [0.55] * 120, "idle_share": [0.0] * 120},
    }
    facts.update(over)
    return facts


def _read(path):
    pdf = pdfium.PdfDocument(str(path))
    texts = [" ".join(page.get_textpage().get_text_range().split()) for page in pdf]  # wrapped lines joined
    return pdf, texts


def test_a_full_report_has_its_numbers_in_extractable_text_and_a_footer_on_every_page(tmp_path):
    path = tmp_path / "r.pdf"
    seen = []
    pages = render_report(_facts(), path, progress=lambda percent, words: seen.append(percent))
    pdf, texts = _read(path)
    assert pages == len(pdf) == 4
    first = texts[0]
    assert "alps/424242" in first and "MFU" in first and "19.9 %" in first and "58 / 100" in first
    assert "4,688" in first and "210.0 mJ" in first  # tokens/s per GPU (rounded), energy per token
    assert "checkpoint" in first  # the top finding: the checkpoint dips
    for number, text in enumerate(texts, 1):
        assert f"page {number} of {pages}" in text and "job alps/424242" in text
    assert "6 x 7.0 B active parameters" in texts[1] and "55 % below" in texts[1]
    assert seen == sorted(seen) and seen[-1] >= 90


def test_a_job_without_any_measurement_still_gets_a_report_that_says_what_is_missing(tmp_path):
    facts = {"job": {"id": "alps/7", "gpus": 8},
             "saturation": {"missing": "the job's GPU telemetry has not been scored yet (never scored)", "stragglers": None},
             "efficiency": {"events": [], "missing": ["no throughput: log tokens_per_s from the job",
                                                      "no model config: PUT it to .../model/"]},
             "throughput": {"missing": "the job logged no application metrics (tokens_per_s or iteration_s)"},
             "activity": {"missing": "no GPU telemetry product for this job yet"}}
    render_report(facts, tmp_path / "bare.pdf")
    pdf, texts = _read(tmp_path / "bare.pdf")
    everything = "\n".join(texts)
    assert "not available: no throughput" in texts[0]
    assert "the job logged no application metrics" in everything
    assert "no GPU telemetry product for this job yet" in everything
    assert "no model config: PUT it to .../model/" in everything
    assert "No throughput" in texts[0]  # the verdict says what to send


def test_pages_are_drawn_not_blank(tmp_path):
    render_report(_facts(), tmp_path / "r.pdf")
    pdf = pdfium.PdfDocument(str(tmp_path / "r.pdf"))
    for page in pdf:
        image = page.render(scale=0.5).to_pil().convert("L")
        dark = sum(count for value, count in enumerate(image.histogram()) if value < 200)
        assert dark > 0.005 * image.width * image.height


def test_long_tables_continue_on_another_page(tmp_path):
    events = [{"start": (T0 + timedelta(minutes=i)).isoformat(), "end": (T0 + timedelta(minutes=i, seconds=30)).isoformat(),
               "kind": "unknown", "dip": 0.3, "reason": f"dip number {i} with a long reason that wraps over more than one line of the table"}
              for i in range(80)]
    facts = _facts()
    facts["efficiency"]["events"] = events
    pages = render_report(facts, tmp_path / "long.pdf")
    pdf, texts = _read(tmp_path / "long.pdf")
    assert pages > 4
    assert any("(continued)" in text for text in texts)
    assert "dip number 79" in "\n".join(texts)


@pytest.mark.parametrize("change, words", [
    ({"saturation": {"idle_gpus": 16, "score": 40.0, "stragglers": []}}, "16 of 64 GPUs sat idle"),
    ({"saturation": {"score": 40.0, "stragglers": [{"where": "GPU 2 of nid001", "reason": "slow"}]}}, "Straggler behind its peers: GPU 2 of nid001"),
    ({"saturation": {"score": 20.0, "limiter": "pcie", "stragglers": []}, "efficiency": {"events": []}}, "only 20 of 100, limited by pcie"),
    ({"efficiency": {"events": [], "missing": ["no throughput"]}, "saturation": {"score": 70.0, "stragglers": []}}, "No throughput"),
])
def test_the_top_finding_is_the_costliest_thing(change, words):
    facts = _facts()
    facts.update(change)
    assert words in top_finding(facts).title


def test_without_a_job_id_it_refuses(tmp_path):
    with pytest.raises(ValueError, match="job"):
        render_report({"job": {}}, tmp_path / "x.pdf")
    assert not (tmp_path / "x.pdf").exists()


def test_a_few_straggler_gpus_beside_hundreds_of_alike_ones_get_a_log_axis_so_their_bar_shows():
    from apps.appmetrics.report_pdf import saturation_figure

    crowd = [60.0 + (i % 10) / 10 for i in range(500)]
    lagging = _facts(saturation={"score": 60.0, "per_gpu": crowd + [52.0, 52.1, 57.8], "straggler_scores": [52.0, 52.1, 57.8]})
    hist = saturation_figure(lagging).axes[0]
    assert hist.get_yscale() == "log" and hist.get_ylim()[0] < 1  # one GPU's bar rises above the axis
    assert "log scale" in hist.get_ylabel()
    alike = saturation_figure(_facts()).axes[0]  # 64 GPUs spread evenly over 55-61: counts of the same order
    assert alike.get_yscale() == "linear"


def test_gpu_telemetry_that_starts_late_is_said_under_the_plot():
    from apps.appmetrics.report_pdf import throughput_figure

    ts = [T0 + timedelta(seconds=30 * i) for i in range(240)]
    late = _facts(activity={"ts": ts[200:], "sm": [0.8] * 40, "tensor": [0.55] * 40, "idle_share": [0.0] * 40})
    words = [text.get_text() for ax in throughput_figure(late).axes for text in ax.texts]
    assert f"GPU telemetry only from {ts[200]:%Y-%m-%d %H:%M} UTC" in words
    whole = [text.get_text() for ax in throughput_figure(_facts()).axes for text in ax.texts]
    assert not any("only from" in word for word in whole)
