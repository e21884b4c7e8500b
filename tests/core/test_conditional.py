"""Conditional answers and the rendered-payload cache (apps/core/api/conditional.py), through the real
saturation endpoints: ETag / Last-Modified, 304, a new answer after a refresh, access checked before the
cache, and a second caller served from the cache without reading the product again."""
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.cache import caches
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.http import http_date

from apps.core.api.conditional import ProductVersion, invalidate_job_products, product_response
from apps.saturation.models import JobSaturation
from apps.saturation.products import SaturationCube
from apps.saturation.services import product_path

HOSTS = ["nid000001", "nid000002"]
BASE = "/api/v1/jobs/alps/31/"


@pytest.fixture(autouse=True)
def empty_products_cache():
    caches["products"].clear()
    yield
    caches["products"].clear()


def _write_product(job, stamp: str, level: float) -> str:
    """A real product file: 8 GPUs x 30 bins of S and busy, GPU nid000002:3 at half the others' S."""
    starts = np.datetime64("2025-03-01T10:00:00", "ns") + np.arange(30) * np.timedelta64(10, "s")
    s = np.full((8, 30), level, dtype="float32")
    s[7] *= 0.5
    cube = SaturationCube(hosts=np.array([h for h in HOSTS for _ in range(4)], dtype=object), gpus=np.array([0, 1, 2, 3] * 2),
                          bin_starts=starts, bin_seconds=10.0, values={"S": s, "busy": np.full((8, 30), 0.9, dtype="float32")},
                          warmup_end=None, steady_end=None)
    path = product_path(job, stamp)
    cube.save(path)
    return str(path.relative_to(settings.DATA_DIR))


def _refresh(job, *, score: float, level: float, stamp: str, computed):
    """What a scoring writes: a new product file and the row naming it, with a new computed time."""
    per_gpu = [{"host": h, "gpu": g, "rank": r, "score": score} for r, (h, g) in enumerate((h, g) for h in HOSTS for g in range(4))]
    JobSaturation.objects.update_or_create(job=job, defaults=dict(
        status="ready", score=score, computed=computed, per_gpu=per_gpu, product=_write_product(job, stamp, level),
        stragglers=[{"level": "gpu", "host": "nid000002", "gpu": 3, "signal": "saturation", "score": score}]))


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    start = timezone.now() - timedelta(hours=1)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=31, user_name="alice", account="a-llm01",
                             state="RUNNING", submit_time=start, start_time=start, node_list=HOSTS)
    _refresh(job, score=61.0, level=0.6, stamp="20250301T110000", computed=timezone.now().replace(microsecond=0) - timedelta(minutes=5))
    return job


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


@pytest.mark.parametrize("endpoint", ["saturation/", "stragglers/", "saturation/series/?metric=S&bins=10"])
def test_an_answer_carries_validators_and_a_repeat_gets_304_with_an_empty_body(job, alice, endpoint):
    first = alice.get(BASE + endpoint)
    assert first.status_code == 200 and first.content
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 10
    record = JobSaturation.objects.get(job=job)
    assert first["Last-Modified"] == http_date(record.computed.timestamp())
    assert set(first["Cache-Control"].replace(" ", "").split(",")) == {"private", "no-cache"}
    assert {"Cookie", "Authorization"} <= {part.strip() for part in first["Vary"].split(",")}

    again = alice.get(BASE + endpoint, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag
    # gzip in front makes the tag weak; a list of tags with ours among them matches too
    assert alice.get(BASE + endpoint, HTTP_IF_NONE_MATCH=f'"other", W/{etag}').status_code == 304
    assert alice.get(BASE + endpoint, HTTP_IF_NONE_MATCH='"other"').status_code == 200
    # without a tag: the date decides
    assert alice.get(BASE + endpoint, HTTP_IF_MODIFIED_SINCE=first["Last-Modified"]).status_code == 304
    earlier = http_date(record.computed.timestamp() - 60)
    assert alice.get(BASE + endpoint, HTTP_IF_MODIFIED_SINCE=earlier).status_code == 200


def test_a_refreshed_product_gets_a_new_etag_and_the_new_numbers(job, alice):
    first = alice.get(BASE + "saturation/")
    series = alice.get(BASE + "saturation/series/", {"gpus": "nid000002:3", "bins": "10"})
    assert first.json()["job_score"] == 61.0 and series.json()["gpus"][0]["values"][0] == 0.3
    later = JobSaturation.objects.get(job=job).computed + timedelta(minutes=10)
    _refresh(job, score=72.0, level=0.8, stamp="20250301T112000", computed=later)

    refreshed = alice.get(BASE + "saturation/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert refreshed.status_code == 200 and refreshed["ETag"] != first["ETag"]
    assert refreshed.json()["job_score"] == 72.0 and refreshed["Last-Modified"] == http_date(later.timestamp())
    new_series = alice.get(BASE + "saturation/series/", {"gpus": "nid000002:3", "bins": "10"}, HTTP_IF_NONE_MATCH=series["ETag"])
    assert new_series.status_code == 200 and new_series.json()["gpus"][0]["values"][0] == 0.4
    assert new_series.json()["peers"]["median"][0] == 0.8


def test_a_scoring_in_progress_changes_the_score_answer_but_not_the_product_answers(job, alice):
    """The score's answer shows the scoring state; the stragglers and series come from the product only."""
    score, stragglers = alice.get(BASE + "saturation/"), alice.get(BASE + "stragglers/")
    JobSaturation.objects.filter(job=job).update(scoring_since=timezone.now())
    now_scoring = alice.get(BASE + "saturation/", HTTP_IF_NONE_MATCH=score["ETag"])
    assert now_scoring.status_code == 200 and now_scoring.json()["scoring_since"] is not None
    assert alice.get(BASE + "stragglers/", HTTP_IF_NONE_MATCH=stragglers["ETag"]).status_code == 304


def test_a_caller_without_access_gets_404_although_the_answer_is_cached(job, alice, api_client, make_user):
    first = alice.get(BASE + "saturation/series/", {"bins": "10"})
    assert first.status_code == 200
    for endpoint in ("saturation/", "stragglers/"):
        assert alice.get(BASE + endpoint).status_code == 200
    api_client.force_authenticate(make_user("bob", accounts=["a-other"]))
    for endpoint in ("saturation/", "stragglers/", "saturation/series/?bins=10"):
        assert api_client.get(BASE + endpoint).status_code == 404
        # not even a 304 to someone who learnt the tag
        assert api_client.get(BASE + endpoint, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 404
    api_client.force_authenticate(None)
    assert api_client.get(BASE + "saturation/series/?bins=10").status_code in (401, 403)
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))  # a member of the job's account
    shared = api_client.get(BASE + "saturation/series/", {"bins": "10"})
    assert shared.status_code == 200 and shared.content == first.content


def test_a_second_answer_comes_from_the_cache_without_the_big_fields_or_the_product_file(job, alice, api_client, make_user):
    with CaptureQueriesContext(connection) as cold:
        first = alice.get(BASE + "saturation/")
    cold = [query["sql"] for query in cold.captured_queries]  # read now: the next request resets the log
    assert any("per_gpu" in sql for sql in cold)
    series = alice.get(BASE + "saturation/series/", {"metric": "S", "bins": "10", "gpus": "nid000002:3"})
    assert series.status_code == 200

    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))  # another caller, no copy of her own
    with CaptureQueriesContext(connection) as warm:
        second = api_client.get(BASE + "saturation/")
    warm = [query["sql"] for query in warm.captured_queries]
    assert second.status_code == 200 and second.content == first.content and second["ETag"] == first["ETag"]
    assert not any("per_gpu" in sql or "stragglers" in sql for sql in warm)
    assert len(warm) == len(cold) - 1  # the access check and the version, not the row's big fields

    product = Path(settings.DATA_DIR) / JobSaturation.objects.get(job=job).product
    product.unlink()  # a served answer no longer needs its file
    again = api_client.get(BASE + "saturation/series/", {"metric": "S", "bins": "10", "gpus": "nid000002:3"})
    assert again.status_code == 200 and again.content == series.content
    # the same parameters in another order or spelling are the same answer
    same = api_client.get(BASE + "saturation/series/?gpus=nid000002:3&bins=10")
    assert same.status_code == 200 and same.content == series.content
    other = api_client.get(BASE + "saturation/series/", {"metric": "S", "bins": "11", "gpus": "nid000002:3"})
    assert other.status_code == 404 and "product file is missing" in other.json()["detail"]


def test_invalidating_a_job_drops_its_cached_answers_and_tags(job, alice):
    first = alice.get(BASE + "saturation/series/", {"bins": "10"})
    (Path(settings.DATA_DIR) / JobSaturation.objects.get(job=job).product).unlink()
    assert alice.get(BASE + "saturation/series/", {"bins": "10"}, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    invalidate_job_products(job.pk)
    after = alice.get(BASE + "saturation/series/", {"bins": "10"}, HTTP_IF_NONE_MATCH=first["ETag"])
    assert after.status_code == 404 and "product file is missing" in after.json()["detail"]  # rendered again


def test_bad_parameters_are_400s_before_any_cache(job, alice):
    assert alice.get(BASE + "saturation/series/", {"bins": "10"}).status_code == 200
    bad = alice.get(BASE + "saturation/series/", {"bins": "0"})
    assert bad.status_code == 400 and [e["field"] for e in bad.json()["errors"]] == ["bins"]
    assert "ETag" not in bad


def test_a_plain_django_view_renders_once_for_every_caller(job, make_user, django_user_model):
    """``product_response`` without DRF: the render runs on the first request only; a copy gets 304."""
    renders = []

    def view(request):
        return product_response(request, name="test:figure", version=ProductVersion("v1", job=job.pk), params=request.GET,
                                render=lambda: renders.append(1) or b'{"figure": 1}')

    factory = RequestFactory()
    alice, mia = make_user("alice"), make_user("mia", accounts=["a-llm01"])
    first = view(_as(factory.get("/f.json", {"b": "2", "a": "1"}), alice))
    second = view(_as(factory.get("/f.json", {"a": "1", "b": "2"}), mia))
    assert first.content == second.content == b'{"figure": 1}' and len(renders) == 1
    assert view(_as(factory.get("/f.json", {"a": "1", "b": "2"}, HTTP_IF_NONE_MATCH=first["ETag"]), mia)).status_code == 304
    assert view(_as(factory.get("/f.json", {"a": "2"}), mia)).status_code == 200 and len(renders) == 2
    staff = make_user("ops", is_staff=True)
    assert view(_as(factory.get("/f.json", {"a": "1", "b": "2"}), staff))["ETag"] != first["ETag"]  # its own scope
    assert len(renders) == 3


def _as(request, user):
    request.user = user
    return request
