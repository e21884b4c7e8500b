"""Issue 33, finding 3d: an ISO ``ts`` past 2262 (or before 1677) is no pandas Timestamp; POST .../metrics/ answered
500 for it. Every way ``ts`` is given meets the same years (2000 .. 2200), and a time outside them is a 400 naming
the row's field."""
from datetime import datetime, timezone

import pytest

from apps.appmetrics.services import MetricsRefused, metrics_ingest
from apps.jobs.models import Cluster, Job

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
FAR = ["2300-01-01T00:00:00Z", "9999-12-31T23:59:59+00:00", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59",
       "1970-01-01T00:00:00"]


@pytest.fixture
def job(db, store):
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=1, user_name="alice", account="a-llm01",
                              state="RUNNING", node_list=["nid000001"], node_count=1, gpus=4, start_time=T0)


@pytest.mark.parametrize("ts", FAR)
def test_an_iso_ts_outside_the_years_is_a_400_naming_the_row(api_client, make_user, job, ts):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    rows = [{"ts": T0.timestamp() + 600, "step": 1, "loss": 3.0}, {"ts": ts, "step": 2, "loss": 2.9}]
    response = api_client.post("/api/v1/jobs/alps/1/metrics/", {"rows": rows}, format="json")
    assert response.status_code == 400, response.content
    assert [error["field"] for error in response.json()["errors"]] == ["rows[1].ts"]


@pytest.mark.parametrize("ts", FAR)
def test_the_parsing_helper_refuses_them_without_any_window(job, ts):
    """The years are the parser's own rule, not only the job's write window's."""
    with pytest.raises(MetricsRefused) as refused:
        metrics_ingest(job, [{"ts": ts, "step": 1, "loss": 3.0}])
    assert [where for where, _ in refused.value.problems] == ["rows[0].ts"]
    assert "between 2000 and 2200" in refused.value.problems[0][1]


def test_an_iso_ts_with_an_offset_is_stored_in_utc(job):
    assert metrics_ingest(job, [{"ts": "2026-11-24T12:10:00+02:00", "step": 1, "loss": 3.0}]) == 1
