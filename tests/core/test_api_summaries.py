"""API docs: every operation has a summary (apps.core.api.schema.add_summaries), and the docs lead back to the
portal."""
import pytest
from drf_spectacular.generators import SchemaGenerator

from apps.core.api.schema import add_summaries, first_sentence, summary_for, summary_from_path

METHODS = {"get", "put", "post", "patch", "delete"}


@pytest.fixture(scope="module")
def generated():
    """The schema as drf-spectacular makes it without this hook (the settings switch it on)."""
    from django.conf import settings
    from drf_spectacular.settings import patched_settings

    hooks = [hook for hook in settings.SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] if not hook.endswith(".add_summaries")]
    with patched_settings({"POSTPROCESSING_HOOKS": hooks}):
        generator = SchemaGenerator()
        schema = generator.get_schema(request=None, public=True)
    return generator, schema


def test_the_served_schema_has_a_summary_on_every_operation():
    """The hook is switched on in the settings: the schema the docs read has no operation without a summary."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    missing = [f"{m.upper()} {p}" for p, m, op in operations(schema) if not (op.get("summary") or "").strip()]
    assert operations(schema) and missing == []
    assert "[Belvedere](/)" in schema["info"]["description"]


def operations(schema):
    return [(path, method, operation) for path, item in schema["paths"].items()
            for method, operation in item.items() if method in METHODS]


def test_every_operation_in_the_schema_has_a_summary(generated):
    generator, schema = generated
    before = {(p, m) for p, m, op in operations(schema) if not op.get("summary")}
    assert before, "nothing to test: every operation already has a summary"
    add_summaries(schema, generator, None, True)
    missing = [f"{m.upper()} {p}" for p, m, op in operations(schema) if not (op.get("summary") or "").strip()]
    assert missing == []
    for path, method, operation in operations(schema):
        summary = operation["summary"]
        assert len(summary) <= 90 and "\n" not in summary, (method, path, summary)
        assert summary[0].isupper() or summary[0].isdigit(), (method, path, summary)


def test_summaries_come_from_the_views_docstrings_first(generated):
    generator, schema = generated
    add_summaries(schema, generator, None, True)
    paths = schema["paths"]
    # A view serving one operation: its docstring's first sentence.
    assert paths["/api/v1/me/"]["get"]["summary"] == \
        "The authenticated user, with the projects (Slurm accounts) they belong to"
    # A viewset: its docstring is the list's; the item and the write operations are said in words.
    assert paths["/api/v1/projects/"]["get"]["summary"].startswith("Projects visible to the caller")
    assert paths["/api/v1/projects/{id}/"]["get"]["summary"] == "Get a project"
    # A docstring that starts by naming another method does not describe this one.
    assert not paths["/api/v1/namespaces/requests/"]["get"]["summary"].startswith("POST")


def test_the_hook_keeps_summaries_it_is_given_and_fills_an_unknown_view_from_its_path():
    schema = {"paths": {"/api/v1/widgets/": {"get": {"summary": "Kept"}, "post": {}},
                        "/api/v1/widgets/{id}/": {"delete": {}, "parameters": []}}}

    class NoEndpoints:
        endpoints = []

    add_summaries(schema, NoEndpoints(), None, True)
    assert schema["paths"]["/api/v1/widgets/"]["get"]["summary"] == "Kept"
    assert schema["paths"]["/api/v1/widgets/"]["post"]["summary"] == "Create a widget"
    assert schema["paths"]["/api/v1/widgets/{id}/"]["delete"]["summary"] == "Delete a widget"


@pytest.mark.parametrize("method, path, words", [
    ("get", "/api/v1/jobs/", "List jobs"),
    ("get", "/api/v1/jobs/{cluster}/{job_id}/", "Get a job"),
    ("put", "/api/v1/jobs/{cluster}/{job_id}/layout/", "Replace the layout of a job"),
    ("post", "/api/v1/namespaces/requests/{id}/approve/", "Approve a request"),
    ("post", "/api/v1/vetting/nodes/{host}/actions/", "Add an action to a node"),
    ("get", "/api/v1/namespaces/requests/", "List namespace requests"),
    ("post", "/api/v1/edf/documents/", "Create an EDF document"),
    ("get", "/api/v1/topology/summary/", "Get the topology summary"),
    ("get", "/api/v1/reports/usage.{extension}", "Get the report usage"),
    ("patch", "/api/v1/vetting/rules/{slug}/", "Update a rule"),
    ("get", "/api/v1/", "Read the API root"),
])
def test_summary_from_method_and_path_in_plain_words(method, path, words):
    assert summary_from_path(method, path) == words


def test_first_sentence_is_one_short_line():
    assert first_sentence("One job with its steps. 404 unless the caller may see it.") == "One job with its steps"
    docstring = "Data products, with search (``q``: words in name, title, purpose, tags, columns and more)."
    assert first_sentence(docstring) == "Data products, with search"
    long = "word " * 40
    cut = first_sentence(long)
    assert cut.endswith("…") and len(cut) <= 80
    assert first_sentence("One item; PATCH moves its state.") == "One item"
    assert first_sentence("") == "" and first_sentence(None) == ""
    assert summary_for("get", "/api/v1/x/", ("", "", 1)) == "Get the x"


@pytest.mark.django_db
def test_docs_pages_link_back_to_the_portal(client):
    for url in ("/api/docs/", "/api/redoc/"):
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert 'class="portal-bar"' in html, url
        assert 'href="/"' in html, url
    # Swagger UI still draws into its own element.
    assert 'id="swagger-ui"' in client.get("/api/docs/").content.decode()
