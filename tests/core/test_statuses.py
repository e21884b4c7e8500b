"""One status vocabulary: any spelling of a state reads the same, in one casing, with one colour per meaning."""
import pytest
from django.template import Context, Template

from apps.core import statuses


@pytest.mark.parametrize("value, words, meaning", [
    ("FAILED", "Failed", "fail"),
    ("Fail", "Failed", "fail"),
    ("failed", "Failed", "fail"),
    ("fail", "Failed", "fail"),
    ("node_fail", "Node fail", "fail"),
    ("NODE_FAIL", "Node fail", "fail"),
    ("NodeFail", "Node fail", "fail"),
    ("OUT_OF_MEMORY", "Out of memory", "fail"),
    ("ok", "OK", "ok"),
    ("PASS", "Passed", "ok"),
    ("COMPLETED", "Completed", "ok"),
    ("running", "Running", "active"),
    ("waiting_approval", "Waiting approval", "waiting"),
    ("PENDING", "Pending", "waiting"),
    ("warn", "Warning", "warn"),
    ("drain_recommended", "Drain recommended", "warn"),
    ("CANCELLED", "Cancelled", "neutral"),
    ("canceled", "Cancelled", "neutral"),
    ("something-new", "Something new", "neutral"),
    ("", "Unknown", "neutral"),
    (None, "Unknown", "neutral"),
])
def test_every_spelling_reads_one_way(value, words, meaning):
    assert statuses.words(value) == words
    assert statuses.meaning(value) == meaning


def test_spellings_of_one_state_are_one_state():
    assert len({statuses.normalise(v) for v in ("FAILED", "Failed", "failed", " failed ")}) == 1
    assert statuses.normalise("node-fail") == statuses.normalise("Node Fail") == "node_fail"
    assert statuses.status("fail").words == statuses.status("FAILED").words


def test_every_meaning_has_a_colour_in_the_stylesheet():
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "belvedere.css").read_text()
    for meaning in statuses.MEANINGS:
        assert f".status--{meaning}" in css, meaning


def test_vocabulary_for_scripts_holds_every_rule():
    vocabulary = statuses.vocabulary()
    assert vocabulary["meanings"]["node_fail"] == "fail"
    assert vocabulary["synonyms"]["fail"] == "failed"
    assert vocabulary["acronyms"]["ok"] == "OK"


def render(source: str, **context) -> str:
    return Template("{% load belvedere %}" + source).render(Context(context))


def test_status_badge_renders_one_casing_and_one_colour_class():
    for value in ("FAILED", "Fail", "failed"):
        html = render("{% status_badge value %}", value=value)
        assert html == '<span class="status status--fail" data-state="failed">Failed</span>' or \
            html == '<span class="status status--fail" data-state="fail">Failed</span>', html
    assert render("{% status_badge 'node_fail' %}") == \
        '<span class="status status--fail" data-state="node_fail">Node fail</span>'


def test_status_badge_label_keeps_the_colour_of_the_state_and_escapes():
    html = render("{% status_badge value label %}", value="FAILED", label="3 of 8 <failed>")
    assert 'class="status status--fail"' in html
    assert "3 of 8 &lt;failed&gt;" in html


def test_status_filters():
    assert render("{{ v|status_words }} {{ v|status_meaning }}", v="TIMEOUT") == "Timeout fail"


def test_the_pages_script_reads_states_as_the_server_does(tmp_path):
    """static/js/belvedere.js fills the readiness table itself: its statusBadge gives the same words and colour."""
    import json
    import re
    import shutil
    import subprocess
    from pathlib import Path

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    source = (Path(__file__).resolve().parents[2] / "static" / "js" / "belvedere.js").read_text()
    function = re.search(r"^function statusBadge\(value\) \{.*?^\}", source, re.S | re.M).group(0)
    values = ["FAILED", "Fail", "node_fail", "NodeFail", "ok", "warn", "skipped", "OUT_OF_MEMORY", "", "new-thing"]
    script = f"""
const vocabulary = {json.dumps(json.dumps(statuses.vocabulary()))};
const document = {{
  getElementById: () => ({{ textContent: vocabulary }}),
  createElement: () => ({{ dataset: {{}} }}),
}};
{function}
console.log(JSON.stringify({json.dumps(values)}.map((v) => {{ const b = statusBadge(v); return [b.textContent, b.className]; }})));
"""
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == [[statuses.words(v), f"status status--{statuses.meaning(v)}"] for v in values]
