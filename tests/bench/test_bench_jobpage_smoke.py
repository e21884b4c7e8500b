"""Smoke tests of the page and load benchmarks (bench/bench_jobpage.py, bench/bench_load.py) with tiny
settings: a 32-GPU bench job instead of 4,096 GPUs, one cold load per page, 3 users for 3 s. They check
that each benchmark produces its numbers from a real gunicorn and a real browser, never the targets:
no wall-clock time is asserted."""
import math

import pytest

from bench import bench_jobpage, bench_load

NODES, HOURS = 8, 0.5


def in_own_process(function, *args, **kwargs):
    """Run a bench in a fresh process: Playwright's sync API and asyncio.run need a thread with no running
    event loop, and the suite's shared Chromium (tests/conftest.py) holds one in this thread."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args, **kwargs).result()


@pytest.fixture(scope="module")
def installation(tmp_path_factory):
    """A bench-owned embedded installation holding the (small) bench job with both products."""
    data_dir = tmp_path_factory.mktemp("bench-smoke") / "var"
    info = bench_jobpage.build(data_dir, NODES, HOURS)
    assert (info["saturation"], info["telemetry"]) == ("ready", "ready"), info
    return data_dir


@pytest.mark.browser
def test_job_page_bench_measures_bytes_requests_times_and_the_job_list(installation):
    if not bench_jobpage.chromium_available():
        pytest.skip(f"Chromium not found at {bench_jobpage.CHROMIUM} (apt-get install chromium)")
    report = in_own_process(bench_jobpage.measure, installation, NODES, HOURS, repeats=1)
    assert report.build["reused"] is True  # the fixture built it: measure() found it and did not rebuild
    numbers = report.numbers()
    (job,) = report.job
    (listing,) = report.job_list
    assert job.url.endswith(f"/jobs/{bench_jobpage.CLUSTER}/{bench_jobpage.JOB_ID}/") and listing.url.endswith("/jobs/")
    # The job page's own HTML is one of the counted transfers, and the page loads more than its HTML.
    assert 10_000 < job.html_bytes < job.bytes and job.requests >= 2
    assert listing.bytes > 1000 and listing.requests >= 1
    assert all(math.isfinite(v) and v > 0 for v in (job.load_s, job.interactive_s, listing.load_s))
    if job.marker == "absent":  # today's page: interactive falls back to the load event
        assert job.interactive_s == job.load_s
    switch = numbers["switch"]
    if switch["available"]:
        assert switch["from"] not in switch["to"][:1] and switch["seconds"] > 0 and switch["fetch_seconds"] > 0
    else:
        assert switch["why"]
    figures = report.figures()
    assert [f.name.split(": ")[-1] for f in figures[:2]] == ["load event", "interactive"]
    assert "target <= 2 MB" in figures[0].note and "job list" in figures[0].note
    assert "target <= 2 s" in figures[1].note
    assert ("metric switch" in figures[2].name) if switch["available"] else ("metric switch: not available" in figures[1].note)


def test_load_bench_reports_each_endpoint_with_the_same_request_alone_as_floor(installation):
    report = in_own_process(bench_load.measure, installation, users=3, seconds=3,
                            login=(bench_jobpage.USERNAME, bench_jobpage.PASSWORD), demo=False)
    assert (report.job["cluster"], report.job["job_id"]) == (bench_jobpage.CLUSTER, bench_jobpage.JOB_ID)
    names = [endpoint.name for endpoint in report.endpoints]
    assert names == ["job list", f"job page ({4 * NODES} GPUs)", "heatmap API"]
    for endpoint in report.endpoints:
        numbers = endpoint.numbers()
        assert numbers["requests"] >= 1, endpoint.name  # each user starts at another endpoint
        assert numbers["errors"] == 0, (endpoint.name, endpoint.errors[:3])
        assert numbers["bytes_per_answer"] > 0 or numbers["not_modified"] == numbers["requests"]
        assert 0 < numbers["p50_s"] <= numbers["p95_s"] <= numbers["max_s"]
        assert endpoint.floor_s > 0
    assert "saturation/heatmap/?metric=S" in report.endpoints[-1].path
    figures = report.figures()
    assert len(figures) == 3 and all("target p95 <= 1 s, 0 errors" in f.note for f in figures)
    assert "same 2-core machine" in figures[-1].note or "-core machine" in figures[-1].note
    assert "worker and beat not started" in figures[-1].note
