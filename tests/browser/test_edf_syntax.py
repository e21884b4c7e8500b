"""The EDF editor on text that is not TOML (issue 23): each syntax error at its line with a message that says
what to do, the other findings still listed (marked as found on the text read past the error), a badge that
counts every finding, and image references checked character by character."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_edf import PASSWORD, error_marked_lines

pytestmark = [pytest.mark.browser, pytest.mark.integration]

BROKEN = (
    'image = "ubuntu:24.04\n'            # 1: the string is not closed
    'writable = "yes"\n'                 # 2: a type error, found on the recovered text
    'mounts = ["data:/data"]\n'          # 3: a mount error, found on the recovered text
    '[annotations]\n'                    # 4
    'com.hooks.ssh.enabled = "true"\n'   # 5
    '[annotations\n'                     # 6: no ], and (with it) [annotations] twice
    'com.hooks.cxi.enabled = "off"\n'    # 7: a value the hook refuses, found on the recovered text
)


@pytest.fixture
def alice(transactional_db, make_user):
    return make_user("alice", accounts=["a-llm01"])


def open_editor(page, base_url):
    page.goto(f"{base_url}/accounts/login/?next=/edf/new/?template=minimal")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/edf/new/**")
    page.wait_for_selector("#edf-editor .cm-content")
    expect(page.locator("#edf-status")).to_have_text(re.compile("^valid"), timeout=10_000)


def set_text(page, text):
    """Replace the editor's text in place (typing would let CodeMirror close the quotes and brackets)."""
    checked = page.locator("#edf-editor").get_attribute("data-checked")
    page.evaluate("""text => { const v = document.getElementById('edf-editor').editorView;
                     v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: text } }); }""", text)
    expect(page.locator("#edf-editor")).not_to_have_attribute("data-checked", checked or "", timeout=5_000)


def finding(page, rule, line):
    return page.locator(f"#edf-findings li[data-rule='{rule}'][data-line='{line}']")


def test_syntax_errors_at_their_lines_and_the_other_findings_still_shown(live_server, page, screenshot, alice):
    open_editor(page, live_server.url)
    set_text(page, BROKEN)
    status = page.locator("#edf-status")
    expect(status).to_contain_text("TOML syntax errors on lines 1, 6: srun would fail", timeout=5_000)

    unterminated = finding(page, "toml-syntax", 1)
    expect(unterminated).to_contain_text(
        'string opened at line 1 col 9 is not closed before the end of the line: add the closing quote (")')
    expect(unterminated).to_contain_text('e.g. image = "ubuntu:24.04"')
    expect(unterminated.locator(".finding__where")).to_have_text("line 1:9")
    header = finding(page, "toml-syntax", 6)
    expect(header).to_contain_text("[annotations is missing its closing ]")
    expect(header.locator(".finding__where")).to_have_text("line 6:1")
    twice = finding(page, "toml-table-twice", 6)
    expect(twice).to_contain_text("[annotations] is defined twice (first at line 4)")
    assert "spellings" not in twice.inner_text()
    assert not page.get_by_text("Illegal character").count()

    # The rest of the file is still checked; those findings say where they come from.
    for rule, line, words in [("type", 2, "writable must be a boolean"), ("mount-path", 3, "mount source 'data'"),
                              ("annotation-value", 7, 'com.hooks.cxi.enabled does not accept "off"')]:
        item = finding(page, rule, line)
        expect(item).to_contain_text(words)
        expect(item).to_have_attribute("data-recovered", "true")
        expect(item).to_contain_text("found on the text read past the syntax error")
    for item in (unterminated, header, twice):
        expect(item).to_have_attribute("data-recovered", "false")
    # Markers in the text on every line with an error; the badge counts every finding listed (info too).
    assert error_marked_lines(page) == [1, 2, 3, 6, 7]
    count = page.locator("#edf-findings li").count()
    assert count == 7  # 3 syntax errors, 3 errors and 1 info found past them
    expect(page.locator("#edf-count")).to_have_text(str(count))
    screenshot(page, "edf-syntax-errors")

    # Clicking the header finding puts the cursor on line 6; adding the ] leaves only "defined twice".
    header.locator("button.finding__where").click()
    page.keyboard.press("End")
    page.keyboard.type("]")
    expect(page.locator("#edf-findings li[data-rule='toml-syntax'][data-line='6']")).to_have_count(0, timeout=5_000)
    expect(finding(page, "toml-table-twice", 6)).to_be_visible()
    assert page.problems.take() == []


def test_the_badge_counts_info_and_images_are_checked_against_the_grammar(live_server, page, screenshot, alice):
    open_editor(page, live_server.url)
    set_text(page, 'image = "ubuntu:24.04"\nentrypoint = false\n[env]\nEMPTY = ""\n')
    expect(page.locator("#edf-status")).to_have_text("valid")
    expect(page.locator("#edf-findings li")).to_have_count(1)
    expect(finding(page, "env-unset", 4)).to_be_visible()
    expect(page.locator("#edf-count")).to_have_text("1")  # an info finding counts
    assert page.locator("#edf-count").get_attribute("title") == "0 errors, 0 warnings, 1 info"

    set_text(page, 'image = "‹img from docs…>"\nentrypoint = false\n[env]\nEMPTY = ""\n')
    image = finding(page, "image-syntax", 1)
    expect(image).to_contain_text("'‹' (U+2039) at column 10, spaces at columns 14 and 19, '…' (U+2026) at column 24 "
                                  "and '>' at column 25 are not allowed in an image reference")
    expect(image.locator(".finding__where")).to_have_text("line 1:10")
    expect(page.locator("#edf-count")).to_have_text("2")
    assert error_marked_lines(page) == [1]
    screenshot(page, "edf-image-characters")

    # The EDF reference's own forms stay valid.
    for value in ("nvcr.io#nvidia/pytorch:24.01-py3", "alice@nvcr.io#nvidia/jax:25.04-py3",
                  "jfrog.svc.cscs.ch/docker-group-csstaff/alps-images/ngc-pytorch:26.02-py3-alps6"):
        set_text(page, f'image = "{value}"\nentrypoint = true\n')
        expect(page.locator("#edf-findings li[data-rule='image-syntax']")).to_have_count(0)
        expect(page.locator("#edf-status")).to_have_text(re.compile("^valid"))
    assert page.problems.take() == []
