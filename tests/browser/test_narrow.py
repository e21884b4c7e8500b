"""Every page fits a phone (issue 23): at 390 x 844 no page scrolls sideways and no visible element reaches
past the right edge, for a researcher and for staff, over the navigation pages, a job page, the EDF editor
and the system page. A failure names the page and the element."""
import pytest
from django.urls import reverse

from apps.core.navigation import NAVIGATION

from tests.browser.session import log_in
from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PHONE = {"width": 390, "height": 844}
USERS = {"researcher": ("demo", "belvedere-demo"), "staff": ("staff", "belvedere-staff")}

# What reaches past the right edge: the outermost such elements, each described so a failure says which.
# An element inside a box that scrolls or clips (overflow other than visible) is that box's business: the
# box itself is checked. The document's own scroll width is checked apart. Edges are measured against the
# phone's width itself: on a mobile viewport a page that is too wide zooms out, and innerWidth grows with it.
OVERFLOW = """(width) => {
  const describe = (el) => {
    const id = el.id ? '#' + el.id : '';
    const classes = typeof el.className === 'string' && el.className.trim()
      ? '.' + el.className.trim().split(/\\s+/).slice(0, 3).join('.') : '';
    const text = (el.innerText || el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 40);
    const right = Math.round(el.getBoundingClientRect().right);
    const path = [];
    for (let up = el.parentElement; up && up !== document.body && path.length < 3; up = up.parentElement) {
      path.unshift(up.tagName.toLowerCase() + (up.id ? '#' + up.id : ''));
    }
    return `${path.join(' > ')} > ${el.tagName.toLowerCase()}${id}${classes} (right edge ${right} px) "${text}"`;
  };
  const insideClip = (el) => {
    const top = [document.body, document.documentElement];
    for (let up = el.parentElement; up && !top.includes(up); up = up.parentElement) {
      if (getComputedStyle(up).overflowX !== 'visible') return true;
    }
    return false;
  };
  const offenders = [];
  for (const el of document.body.querySelectorAll('*')) {
    const rect = el.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0 || rect.right <= width + 1) continue;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none' || style.opacity === '0') continue;
    if (style.position === 'fixed' && rect.left >= width) continue;  // parked off screen on purpose
    if (insideClip(el)) continue;
    offenders.push(el);
  }
  const outermost = offenders.filter((el) => !offenders.includes(el.parentElement));
  return {
    inner: window.innerWidth,
    scroll: document.scrollingElement.scrollWidth,
    offenders: outermost.slice(0, 6).map(describe),
  };
}"""


def wait_until_drawn(page, key: str) -> None:
    """Pages that draw after loading: wait for what they draw, not a fixed time."""
    page.wait_for_load_state("networkidle")
    if key == "api":
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    elif key == "system":
        page.wait_for_function("() => document.documentElement.dataset.systemPageReady === 'true'", timeout=60_000)
    elif key == "job":
        # Panels load as they come into view: scroll through the page so every one is drawn.
        page.locator("h1").first.wait_for(state="visible", timeout=30_000)
        for _ in range(3):
            page.evaluate("() => window.scrollTo(0, document.scrollingElement.scrollHeight)")
            page.wait_for_load_state("networkidle")
        page.evaluate("() => window.scrollTo(0, 0)")
    elif key.startswith("edf-"):
        page.wait_for_selector(".cm-editor, .edf-text-fallback textarea", timeout=30_000)
    else:
        page.locator("h1").first.wait_for(state="visible", timeout=30_000)
    page.wait_for_load_state("networkidle")


def overflow_on(page) -> list[str]:
    width = page.viewport_size["width"]
    found = page.evaluate(OVERFLOW, width)
    problems = list(found["offenders"])
    if found["scroll"] > width or found["scroll"] > found["inner"]:
        problems.insert(0, f"the page is {found['scroll']} px wide on a {width} px screen"
                           f" (innerWidth {found['inner']})")
    elif found["inner"] > width:
        problems.insert(0, f"the page zoomed out: innerWidth {found['inner']} px on a {width} px screen")
    return problems


def pages_for(user: str) -> list[tuple[str, str]]:
    from apps.jobs.models import Job

    pages = [(item.key, reverse(item.url_name)) for item in NAVIGATION if user == "staff" or not item.staff_only]
    job = Job.objects.select_related("cluster").get(name="megatron-gpt-175b-pretrain")
    pages += [
        ("home", "/"),
        ("job", reverse("jobs:detail", args=[job.cluster.name, job.job_id])),
        ("edf-new", reverse("edf:new") + "?template=minimal"),
        ("edf-saved", reverse("edf:detail", args=["demo", "megatron-debug"])),
    ]
    return pages


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("user", sorted(USERS))
def test_no_page_is_wider_than_a_phone(live_server, browser, screenshot, celery_worker_process, user):
    load_demo()
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        username, password = USERS[user]
        log_in(page, live_server.url, username, password)
        page.wait_for_url(f"{live_server.url}/")
        failures = {}
        for key, path in pages_for(user):
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, f"{user}: {path} answered {response.status}"
            wait_until_drawn(page, key)
            screenshot(page, f"narrow-{user}-{key}")
            problems = overflow_on(page)
            if problems:
                failures[f"{key} ({path})"] = problems
        # The menu, opened, fits too.
        page.goto(f"{live_server.url}/")
        page.get_by_role("button", name="Menu").click()
        problems = overflow_on(page)
        if problems:
            failures["home with the menu open"] = problems
        screenshot(page, f"narrow-{user}-menu")
        assert not failures, "\n".join(f"{where}:\n  " + "\n  ".join(items) for where, items in failures.items())
    finally:
        context.close()


@pytest.mark.django_db(transaction=True)
def test_the_check_names_what_sticks_out_and_spares_what_scrolls_in_its_box(live_server, browser, make_user):
    make_user("alice", password="pw-for-tests-1")
    context = browser.new_context(viewport=PHONE, is_mobile=True)
    page = context.new_page()
    try:
        log_in(page, live_server.url, "alice", "pw-for-tests-1")
        page.wait_for_url(f"{live_server.url}/")
        assert overflow_on(page) == []
        page.evaluate("""() => { const wide = document.createElement('div'); wide.id = 'too-wide';
            wide.style.width = '600px'; wide.textContent = 'wide'; document.querySelector('main').append(wide); }""")
        problems = overflow_on(page)
        assert problems[0].startswith("the page is") and any("div#too-wide" in item for item in problems), problems
        page.evaluate("""() => { const box = document.createElement('div'); box.className = 'table-scroll';
            box.append(document.getElementById('too-wide')); document.querySelector('main').append(box); }""")
        assert overflow_on(page) == []
    finally:
        context.close()
