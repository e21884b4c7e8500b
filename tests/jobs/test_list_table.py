"""The job list's table (django-tables2) and the columns higher apps register (apps.core.job_columns)."""
import re
from datetime import datetime, timedelta, timezone

import pytest

from apps.core import job_columns
from apps.core.job_columns import JobColumn
from apps.core.registry import OrderedRegistry
from apps.jobs.models import Cluster, Job, node_search_text

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def jobs(db):
    cluster = Cluster.objects.create(name="alps")
    for job_id, nodes, partition in [(1, ["nid000001", "nid000002"], "normal"), (2, ["nid000003"], ""), (3, [], "debug")]:
        Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a-llm01", state="COMPLETED",
                           partition=partition, node_list=nodes, node_count=len(nodes) or None, name=f"run-{job_id}",
                           submit_time=T0 + timedelta(hours=job_id), start_time=T0 + timedelta(hours=job_id),
                           end_time=T0 + timedelta(hours=job_id, minutes=90), node_search=node_search_text(nodes))


@pytest.fixture
def alice(client, make_user):
    client.force_login(make_user("alice"))
    return client


@pytest.fixture
def queue_column(monkeypatch):
    """A registered column sorted by the job's partition, whose loader records each call."""
    calls = []

    def load(job_pks):
        calls.append(sorted(job_pks))
        return {job.pk: job.partition.upper() for job in Job.objects.filter(pk__in=job_pks).exclude(partition="")}

    monkeypatch.setattr(job_columns, "_columns", OrderedRegistry(key=lambda column: column.key))
    job_columns.register_job_column(JobColumn(key="queue", title="Queue", load=load, template="core/_job_list_value.html",
                                              order_by="partition", help="Partition, loud", css="num"))
    return calls


def header(page: str, label: str) -> str:
    return re.search(rf'<th scope="col"[^>]*>(?:<a [^>]*>)?{label}.*?</th>', page).group(0)


def rows(page: str) -> list[str]:
    return re.findall(r'href="/jobs/alps/(\d+)/"', page)


def test_sort_links_keep_the_filters_drop_the_page_and_toggle(jobs, alice):
    page = alice.get("/jobs/?user=alice&page=1&ordering=nodes").content.decode()
    nodes = header(page, "Nodes")
    assert 'aria-sort="ascending"' in nodes and "▲" in nodes
    assert 'href="?user=alice&amp;ordering=-nodes"' in nodes  # sorted ascending: the link sorts descending
    submitted = header(page, "Submitted")
    assert 'aria-sort="none"' in submitted and 'href="?user=alice&amp;ordering=submitted"' in submitted
    assert "<th scope=\"col\">Elapsed</th>" in page  # not sortable: no link
    assert rows(page) == ["2", "1", "3"]  # a pending job's unknown size sorts last
    assert '<td class="num">01:30:00</td>' in page
    default = alice.get("/jobs/").content.decode()
    assert 'aria-sort="descending"' in header(default, "Submitted") and rows(default) == ["3", "2", "1"]


def test_unknown_sort_key_is_a_filter_error_on_the_page_and_a_400_on_the_api(jobs, alice, api_client, make_user):
    page = alice.get("/jobs/?ordering=colour").content.decode()
    assert rows(page) == [] and 'role="alert"' in page and "ordering" in page
    api_client.force_authenticate(make_user("root", is_staff=True))
    response = api_client.get("/api/v1/jobs/?ordering=colour")
    assert response.status_code == 400 and [error["field"] for error in response.json()["errors"]] == ["ordering"]


def test_a_registered_column_loads_once_per_page_and_sorts(jobs, alice, queue_column, api_client, make_user):
    page = alice.get("/jobs/?ordering=-queue").content.decode()
    assert queue_column == [sorted(Job.objects.values_list("pk", flat=True))]  # one call for the whole page
    queue = header(page, "Queue")
    assert 'aria-sort="descending"' in queue and 'title="Partition, loud"' in queue
    assert rows(page) == ["1", "3", "2"]  # normal, debug, then the job without a partition ("" sorts first ascending)
    assert '<td class="num">NORMAL</td>' in page and '<td class="num">DEBUG</td>' in page
    api_client.force_authenticate(make_user("root", is_staff=True))
    body = api_client.get("/api/v1/jobs/?ordering=queue").json()  # the API sorts by the registered key too
    assert [job["job_id"] for job in body["results"]] == [2, 3, 1]
