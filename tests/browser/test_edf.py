"""The EDF editor in Chromium: live markers, fixing, saving, sharing, opening as a colleague, history."""
import re

import pytest
from playwright.sync_api import expect

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PASSWORD = "pw-for-tests-1"


@pytest.fixture
def team(transactional_db, make_user):
    return {name: make_user(name, accounts=["a-llm01"] if name != "carol" else ["a-other"]) for name in ("alice", "bob", "carol")}


def log_in(page, base_url, username, next_path):
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**{next_path}")


def editor_lines(page):
    return page.locator("#edf-editor .cm-content .cm-line")


def error_marked_lines(page) -> list[int]:
    """1-based numbers of the editor lines that carry an error underline."""
    return page.locator("#edf-editor .cm-content .cm-line").evaluate_all(
        "lines => lines.flatMap((line, i) => line.querySelector('.cm-lintRange-error') ? [i + 1] : [])")


def type_at_end_of_line(page, line_number, text):
    editor_lines(page).nth(line_number - 1).click()
    page.keyboard.press("End")
    page.keyboard.type(text)


def test_type_an_error_see_it_fix_it_save_share_and_open_as_a_colleague(live_server, page, screenshot, team, browser):
    log_in(page, live_server.url, "alice", "/edf/new/?template=minimal")
    page.wait_for_selector("#edf-editor .cm-content")
    expect_status = page.locator("#edf-status")
    expect(page.locator("#edf-status")).to_have_text(re.compile("^valid"), timeout=10_000)
    assert error_marked_lines(page) == []

    # Line 4 is `entrypoint = false`; make it a string: a type error on exactly that line.
    assert editor_lines(page).nth(3).inner_text() == "entrypoint = false"
    editor_lines(page).nth(3).click()
    page.keyboard.press("End")
    for _ in range(len("false")):
        page.keyboard.press("Backspace")
    page.keyboard.type('"yes"')
    # Within a second of the last keystroke, the marker is on line 4 and the list names it.
    page.wait_for_selector("#edf-editor .cm-lintRange-error", timeout=1_000)
    assert error_marked_lines(page) == [4]
    finding = page.locator("#edf-findings li.finding--error").first
    assert finding.get_attribute("data-line") == "4" and "entrypoint must be a boolean" in finding.inner_text()
    assert "srun would fail" in expect_status.inner_text()
    assert page.locator("#edf-editor .cm-gutter-lint .cm-lint-marker-error").count() == 1
    screenshot(page, "edf-error-marked")

    # Clicking the finding puts the cursor on that line.
    editor_lines(page).nth(0).click()
    finding.locator("button.finding__where").click()
    cursor_line = page.evaluate("(() => { const v = document.getElementById('edf-editor').editorView;"
                                " return v.state.doc.lineAt(v.state.selection.main.head).number; })()")
    assert cursor_line == 4

    # Fix it: the marker goes away.
    page.keyboard.press("End")
    for _ in range(len('"yes"')):
        page.keyboard.press("Backspace")
    page.keyboard.type("true")
    expect(page.locator("#edf-editor .cm-lintRange-error")).to_have_count(0, timeout=1_000)
    expect(page.locator("#edf-status")).to_have_text(re.compile("^valid"), timeout=2_000)
    assert error_marked_lines(page) == []
    screenshot(page, "edf-error-fixed")

    # Save with a name, shared with a-llm01.
    page.get_by_label("Name", exact=True).fill("ubuntu-dev")
    page.get_by_label("Description").fill("small test image")
    page.get_by_label(re.compile(r"a-llm01 —")).check()
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/edf/alice/ubuntu-dev/")
    assert "Saved ubuntu-dev." in page.locator(".messages").inner_text()
    assert "entrypoint = true" in editor_lines(page).nth(3).inner_text()
    assert page.problems.take() == []

    # Bob, a member of a-llm01, finds it under "Shared with your projects" and opens it read-only.
    other = browser.new_context(viewport={"width": 1280, "height": 800})
    bob = other.new_page()
    log_in(bob, live_server.url, "bob", "/edf/")
    shared = bob.get_by_role("region", name="Shared with your projects")
    shared.get_by_role("link", name="ubuntu-dev").click()
    bob.wait_for_url("**/edf/alice/ubuntu-dev/")
    bob.wait_for_selector("#edf-editor .cm-content")
    assert "Shared by alice with a-llm01" in bob.locator("main").inner_text()
    assert bob.locator("#edf-editor .cm-content .cm-line").nth(3).inner_text() == "entrypoint = true"
    bob.get_by_role("tab", name="Resolved").click()
    # ${SCRATCH} expanded for the viewer, once the check has answered.
    expect(bob.locator("#edf-resolved")).to_contain_text("/capstor/scratch/cscs/bob", timeout=5_000)
    screenshot(bob, "edf-shared-as-bob")
    # Bob saves a copy under his own name.
    bob.get_by_role("button", name="Save a copy").click()
    bob.wait_for_url("**/edf/bob/ubuntu-dev/")
    other.close()

    # Carol, outside a-llm01, gets a 404.
    outsider = browser.new_context()
    carol = outsider.new_page()
    log_in(carol, live_server.url, "carol", "/edf/")
    assert carol.goto(f"{live_server.url}/edf/alice/ubuntu-dev/").status == 404
    outsider.close()


def test_history_shows_the_diff_between_versions(live_server, page, screenshot, team):
    from apps.edf.services import edf_create, edf_update

    document = edf_create(team["alice"], name="train", text='image = "library/ubuntu:24.04"\nentrypoint = false\n')
    edf_update(team["alice"], document, text='image = "library/ubuntu:24.10"\nentrypoint = false\nworkdir = "/tmp"\n',
               note="newer ubuntu")
    log_in(page, live_server.url, "alice", "/edf/alice/train/history/")
    page.wait_for_selector("#edf-diff .cm-mergeView")
    assert page.locator("#edf-diff .cm-changedLine").count() >= 2
    assert "+workdir = \"/tmp\"" in page.locator(".edf-diff-text pre").text_content()
    assert "newer ubuntu" in page.locator("table.edf-versions").inner_text()
    screenshot(page, "edf-history")
    assert page.problems.take() == []


def test_completion_offers_annotations_and_their_values(live_server, page, screenshot, team):
    log_in(page, live_server.url, "alice", "/edf/new/?template=minimal")
    page.wait_for_selector("#edf-editor .cm-content")
    expect(page.locator("#edf-status")).to_have_text(re.compile("^valid"), timeout=10_000)
    editor_lines(page).last.click()
    page.keyboard.type("[annotations]\n")
    page.keyboard.type("com.hooks.ss")
    page.keyboard.press("Control+Space")
    options = page.locator(".cm-tooltip-autocomplete li")
    expect(options.first).to_be_visible(timeout=5_000)
    labels = options.all_inner_texts()
    assert any(label.startswith("com.hooks.ssh.enabled") for label in labels), labels
    assert any(label.startswith("com.hooks.ssh.authorize_ssh_key") for label in labels), labels
    page.keyboard.type("h.en")  # narrow the list to enabled
    expect(options.first).to_contain_text("com.hooks.ssh.enabled")
    page.wait_for_timeout(200)  # CodeMirror ignores Enter for 75 ms after the list opens (interactionDelay)
    page.keyboard.press("Enter")
    assert editor_lines(page).last.inner_text() == 'com.hooks.ssh.enabled = "'
    page.keyboard.press("Control+Space")
    expect(page.locator(".cm-tooltip-autocomplete li").first).to_be_visible(timeout=5_000)
    values = page.locator(".cm-tooltip-autocomplete li").all_inner_texts()
    assert sorted(v.strip() for v in values) == ['"false"', '"true"'], values
    screenshot(page, "edf-completion")


def test_demo_chain_resolves_in_the_editor(live_server, page, screenshot, transactional_db):
    load_demo()
    page.goto(f"{live_server.url}/accounts/login/?next=/edf/demo/megatron-debug/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("belvedere-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/edf/demo/megatron-debug/")
    page.get_by_role("tab", name="Resolved").click()
    resolved = page.locator("#edf-resolved")
    expect(resolved).to_contain_text("Chain: alps-base → megatron → megatron-debug", timeout=5_000)
    expect(resolved).to_contain_text("/capstor/scratch/cscs/demo/datasets/pile.sqsh:/data:sqsh")
    screenshot(page, "edf-demo-resolved")
    page.get_by_role("tab", name="Use it").click()
    assert "srun --environment=megatron-debug --pty bash" in page.locator("#snippet-srun").inner_text()
    page.goto(f"{live_server.url}/edf/")
    screenshot(page, "edf-index-demo")
    assert page.problems.take() == []
