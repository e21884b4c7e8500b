"""The job-in-context panel on the job page: a hand-built world on the alps topology, and who sees which neighbour named."""
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.jobs.models import Cluster, Job, node_search_text
from apps.ranks.choices import JobLayoutSourceChoices
from apps.ranks.services import layout_set
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.models import JobSaturation
from apps.topology.models import Node

pytestmark = pytest.mark.django_db
ANOTHER = "another project&#x27;s job"


def hosts_of(group: int, count: int, skip: int = 0) -> list[str]:
    return list(Node.objects.filter(group__number=group).order_by("hostname").values_list("hostname", flat=True)[skip:skip + count])


def running(cluster, job_id, user, account, nodes, started, name, **score):
    job = Job.objects.create(cluster=cluster, job_id=job_id, name=name, user_name=user, account=account, state="RUNNING",
                             start_time=started, node_list=nodes, node_count=len(nodes), tasks=4 * len(nodes),
                             gpus=4 * len(nodes), node_search=node_search_text(nodes))
    if score:
        JobSaturation.objects.create(job=job, status=JobSaturationStatusChoices.STATUS_READY, **score)
    return job


@pytest.fixture
def world(make_user):
    """alice's 8-node job, stages 0 on group 3 and 1 on group 4 (TP 4, PP 2); bob's link-heavy job of another
    project on group 4 from an hour after her start; carol's calm job of alice's project on group 3; erin's
    job on group 9 (elsewhere)."""
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    cluster = Cluster.objects.create(name="alps")
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=3)
    mine = running(cluster, 100, "alice", "a-llm01", hosts_of(3, 4) + hosts_of(4, 4), start, "pretrain-mine")
    layout_set(mine, {"tp": 4, "pp": 2}, source=JobLayoutSourceChoices.SOURCE_SIZES, submitted_by="alice")
    heavy = running(cluster, 200, "bob", "a-other", hosts_of(4, 6, skip=10), start + timedelta(hours=1), "moe-alltoall-bob",
                    score=38.0, compute=0.3, memory=0.2, link=0.91, limiter="nvlink")
    calm = running(cluster, 300, "carol", "a-llm01", hosts_of(3, 2, skip=10), start - timedelta(hours=1), "eval-carol",
                   score=55.0, compute=0.5, memory=0.6, link=0.12, limiter="dram")
    far = running(cluster, 400, "erin", "a-other", hosts_of(9, 8), start, "pretrain-far", score=60.0, link=0.95)
    users = {"alice": make_user("alice", accounts=["a-llm01"]), "staff": make_user("staff", is_staff=True),
             "dave": make_user("dave", accounts=["a-llm01", "a-other"])}
    return {"mine": mine, "heavy": heavy, "calm": calm, "far": far, "start": start, "users": users}


def page(client, user, job) -> str:
    client.force_login(user)
    response = client.get(f"/jobs/alps/{job.job_id}/")
    assert response.status_code == 200
    return response.content.decode()


def panel(html: str) -> str:
    start = html.index('id="panel-context"')
    return html[start:html.index("</section>", start)]


def test_the_panel_shows_the_crossing_boundary_the_neighbour_and_the_first_screen_warning(client, world):
    html = page(client, world["users"]["staff"], world["mine"])
    section = panel(html)
    start = world["heavy"].start_time
    # A time of today reads "22:32 UTC"; one of another day carries its date (the run fails after midnight otherwise).
    since = f"{start:%H:%M} UTC" if start.date() == timezone.now().date() else f"{start:%Y-%m-%d %H:%M} UTC"
    assert "0→1 crosses group 3 → 4" in section and f"has run there since {since}" in section
    assert "link saturation 91 %" in section
    assert "alps/200 moe-alltoall-bob" in section and "/jobs/alps/200/" in section  # staff see every job named
    assert "alps/300 eval-carol" in section
    assert "pretrain-far" not in section and "alps/400" not in section  # another group: not a neighbour
    assert 'data-group="3"' in section and 'data-group="4"' in section and 'data-group="9"' not in section
    assert "not traffic measured on the dragonfly" in section and "Rosetta" in section
    # Network counters exist (apps/network, switch port counters): the note says where, never that there are none.
    note = section[section.index('id="context-not-measured"'):]
    assert "no Slingshot network counters" not in note and "the Network panel" in note and "Cassini NIC counters" in note
    # The first screen (before the panels) carries the warning, without naming the other job.
    first = html[:html.index('id="panel-context"')]
    assert "Your pipeline boundary 0→1 crosses group 3 → 4, where another job (link saturation 91 %" in first
    assert "moe-alltoall-bob" not in first


def test_a_researcher_sees_their_own_projects_jobs_named_and_others_only_by_their_load(client, world):
    section = panel(page(client, world["users"]["alice"], world["mine"]))
    assert "alps/300 eval-carol" in section and "/jobs/alps/300/" in section  # her project's job
    assert "moe-alltoall-bob" not in section and "/jobs/alps/200/" not in section and "bob" not in section
    assert ANOTHER in section and "link saturation 91 %" in section  # the load, not the name
    # dave may see bob's project too: he sees bob's job named (the panel is cached per viewer, issue 33)
    section = panel(page(client, world["users"]["dave"], world["mine"]))
    assert "alps/300 eval-carol" in section and "alps/200 moe-alltoall-bob" in section and "/jobs/alps/200/" in section


def test_a_job_whose_neighbours_are_calm_gets_no_warning_and_a_job_not_started_says_so(client, world):
    world["heavy"].delete()
    html = page(client, world["users"]["alice"], world["mine"])
    assert "Your pipeline boundary" not in html[:html.index('id="panel-context"')]
    assert "none communicates heavily (highest link saturation 12 %)" in panel(html)
    pending = Job.objects.create(cluster=world["mine"].cluster, job_id=500, user_name="alice", account="a-llm01", state="PENDING")
    assert 'id="context-none"' in panel(page(client, world["users"]["alice"], pending))



def panels_of(html: str) -> dict[str, str]:
    """Each job-page panel's HTML by its key (the sections the page lays out, ``id="panel-<key>"``)."""
    found = {}
    for match in re.finditer(r'<section[^>]*id="panel-([\w-]+)"', html):
        found[match.group(1)] = html[match.start():html.index("</section>", match.start())]
    return found


def test_two_readers_of_one_job_never_get_each_others_panels_with_the_cache_on(client, world, settings, make_user):
    """Issue 33, finding 1: panels were cached per role, so a reader got the first reader's CSRF token, the
    comparison link naming a job of a project he cannot see, and the neighbours named for the first reader.
    Two readers of alice's job (neither staff nor its user): dave, also of bob's project, then frank, of alice's
    project only; the cache on, as in production."""
    from django.core.cache import cache

    from apps.appmetrics.models import JobModelConfig
    from apps.core.panels import job_panels

    settings.JOB_PAGE_CACHE_SECONDS = 60
    cache.clear()
    shape = dict(layers=32, hidden=4096, heads=32, seq_len=4096, vocab=50304)
    for job in (world["mine"], world["heavy"]):  # bob's job trains the same model: dave is offered to compare with it
        JobModelConfig.objects.create(job=job, **shape)
    from django.test import Client

    frank = make_user("frank", accounts=["a-llm01"])
    first = page(Client(), world["users"]["dave"], world["mine"])  # two browsers: two sessions, two CSRF cookies
    second = page(client, frank, world["mine"])
    dave, mine = panels_of(first), panels_of(second)
    assert set(dave) == set(mine) and len(dave) == len(job_panels()), (sorted(dave), [p.key for p in job_panels()])
    assert "alps/200" in dave["appmetrics"]  # what dave may see is on his page: the comparison with bob's run
    tokens = lambda html: set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', html))  # noqa: E731
    assert tokens(first) and tokens(second) and not tokens(first) & tokens(second)
    for key, html in mine.items():
        assert not tokens(dave[key]) & tokens(html), key
        # Every job dave's panel links that frank may not see is absent from frank's panel, by link and by name.
        for linked in set(re.findall(r"alps/(\d+)", dave[key])):
            if client.get(f"/jobs/alps/{linked}/").status_code == 404:
                assert f"alps/{linked}" not in html and f"/jobs/alps/{linked}/" not in html, (key, linked)
    assert "moe-alltoall-bob" not in second and "alps/200" not in second
    # frank's token is his session's: Django's CSRF check accepts a form post carrying it with his cookie, and
    # refuses dave's (his cookie, dave's token): a cached token would be the latter.
    from django.middleware.csrf import CsrfViewMiddleware
    from django.test import RequestFactory

    def accepted(token: str) -> bool:
        request = RequestFactory().post("/", {"csrfmiddlewaretoken": token}, secure=False)
        request.COOKIES[settings.CSRF_COOKIE_NAME] = client.cookies[settings.CSRF_COOKIE_NAME].value
        return CsrfViewMiddleware(lambda r: None).process_view(request, lambda r: None, (), {}) is None

    assert all(accepted(token) for token in tokens(second)) and not any(accepted(token) for token in tokens(first))
