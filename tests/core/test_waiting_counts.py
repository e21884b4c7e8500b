"""What waits for staff: each registered count as the staff page shows it; unknown says why, never 0."""
import pytest

from apps.core.waiting import Waiting, register_waiting, unregister_waiting, waiting_entries
from apps.core.waiting_counts import read_count, read_counts, verdict


def entry(key, count, label=None, url_name="core:home", url_query="", order=900):
    return Waiting(key=key, label=label or f"{key} things", order=order, url_name=url_name, count=count,
                   url_query=url_query)


def broken(request):
    raise ConnectionError("broker unreachable")


def test_known_counts_and_the_request_reaches_the_count():
    seen = []
    item = read_count(entry("a", lambda request: seen.append(request) or 4), request="the request")
    assert (item.count, item.why, item.known) == (4, "", True)
    assert seen == ["the request"]


@pytest.mark.parametrize("count, why", [
    (lambda request: None, "could not be read"),
    (broken, "ConnectionError: broker unreachable"),
    (lambda request: "7", "'7', not a count"),
    (lambda request: True, "True, not a count"),
    (lambda request: -1, "-1, not a count"),
])
def test_an_unreadable_count_is_unknown_with_why_never_zero(count, why):
    errors = []
    item = read_count(entry("x", count), None, on_error=lambda e, error: errors.append((e.key, error)))
    assert item.count is None and not item.known
    assert why in item.why
    assert bool(errors) == (count is broken)


def test_one_broken_source_does_not_hide_the_others():
    items = read_counts([entry("a", broken), entry("b", lambda r: 2)], None)
    assert [(i.key, i.count) for i in items] == [("a", None), ("b", 2)]


def test_verdict_says_how_much_waits_and_what_is_unknown():
    a = entry("a", lambda r: 3, "requests to approve")
    b = entry("b", lambda r: 0, "triage items")
    c = entry("c", broken, "incidents")
    assert verdict([]) == "No list of waiting work is registered."
    assert verdict(read_counts([b], None)) == "Nothing waits."
    assert verdict(read_counts([a, b], None)) == "3 waiting: 3 requests to approve."
    assert verdict(read_counts([a, b, c], None)) == "3 waiting: 3 requests to approve. Unknown: incidents."
    assert verdict(read_counts([b, c], None)) == "Nothing waits in the lists that answered. Unknown: incidents."


@pytest.fixture
def registered():
    """Entries of our own, removed afterwards so other tests see the registry as the apps left it."""
    keys = []

    def register(*entries):
        for item in entries:
            register_waiting(item)
            keys.append(item.key)

    yield register
    for key in keys:
        unregister_waiting(key)
    assert not {key for key in keys} & {item.key for item in waiting_entries()}


@pytest.mark.django_db
def test_staff_page_opens_with_the_counts_each_linking_to_its_list(client, make_user, registered):
    registered(
        entry("test-approvals", lambda r: 4 if r.user.is_staff else 0, "test requests to approve", "core:staff",
              "?state=open", order=901),
        entry("test-triage", lambda r: 0, "test triage items", "core:home", order=902),
        entry("test-incidents", broken, "test incidents", "core:home", order=903),
        entry("test-nowhere", lambda r: 1, "test things without a page", "no:such-page", order=904),
    )
    make_user("boss", is_staff=True)
    client.login(username="boss", password="pw-for-tests-1")
    response = client.get("/staff/")
    assert response.status_code == 200
    html = response.content.decode()
    # The counts come before everything else on the page.
    assert html.index('id="waiting"') < html.index('id="readiness-heading"')
    assert html.index('id="waiting"') < html.index("Recent task runs")
    section = html[html.index('id="waiting"'):html.index("</section>", html.index('id="waiting"'))]
    approvals = section[section.index('data-waiting="test-approvals"'):]
    assert 'href="/staff/?state=open"' in approvals.split("</li>")[0]
    assert '<span class="waiting-item__count">4</span>' in approvals.split("</li>")[0]
    assert "waiting-item--some" in section.split('data-waiting="test-approvals"')[0].rsplit("<li", 1)[1]
    triage = section[section.index('data-waiting="test-triage"'):].split("</li>")[0]
    assert '<span class="waiting-item__count">0</span>' in triage
    incidents = section[section.index('data-waiting="test-incidents"'):].split("</li>")[0]
    assert '<span class="waiting-item__count">unknown</span>' in incidents
    assert "ConnectionError: broker unreachable" in incidents
    assert ">0<" not in incidents
    nowhere = section[section.index('data-waiting="test-nowhere"'):].split("</li>")[0]
    assert "href" not in nowhere and "has no page here" in nowhere
    # Other apps may have registered counts of their own: the verdict is checked for ours.
    line = response.context["waiting"]["verdict"]
    assert line in section
    assert "4 test requests to approve" in line and "1 test things without a page" in line
    assert "test incidents" in line.split("Unknown:")[1]
    assert "test triage items" not in line


@pytest.mark.django_db
def test_staff_page_is_for_staff_only(client, make_user):
    make_user("researcher")
    client.login(username="researcher", password="pw-for-tests-1")
    assert client.get("/staff/").status_code == 403


@pytest.mark.django_db
def test_task_runs_show_their_state_in_the_one_vocabulary(client, make_user):
    from apps.core.models import TaskRun

    TaskRun.objects.create(name="jobs.sync_cluster", subject="cluster alps", status="failed", message="x" * 300)
    make_user("boss", is_staff=True)
    client.login(username="boss", password="pw-for-tests-1")
    html = client.get("/staff/").content.decode()
    assert '<span class="status status--fail" data-state="failed">Failed</span>' in html
    # The task table lies in a container that scrolls inside its card.
    tasks = html[html.index("Recent task runs"):]
    assert tasks.index('class="table-scroll"') < tasks.index('class="table task-runs"')


def test_a_count_of_one_reads_in_the_singular():
    from apps.core.waiting import Waiting
    from apps.core.waiting_counts import read_count

    entry = Waiting(key="t-one", label="requests to approve", one="request to approve", order=1, url_name="core:staff",
                    count=lambda request: 1)
    assert read_count(entry, None).label == "request to approve"
    many = Waiting(key="t-many", label="requests to approve", one="request to approve", order=1, url_name="core:staff",
                   count=lambda request: 2)
    assert read_count(many, None).label == "requests to approve"
