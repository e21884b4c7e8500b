"""The API's shared behaviour: OpenAPI schema, authentication, and one error format for 4xx."""
import json

import pytest
from openapi_spec_validator import validate


def _assert_error_format(response, status: int) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    for item in body["errors"]:
        assert {"field", "line", "message"} <= set(item)
    return body


@pytest.mark.django_db
def test_schema_is_valid_openapi_3_and_documents_the_error_format(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate(schema)  # raises on any violation of the OpenAPI 3 specification
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/me/" in schema["paths"]
    assert "/api/v1/projects/" in schema["paths"]
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail", "errors"]
    me_get = schema["paths"]["/api/v1/me/"]["get"]
    assert me_get["responses"]["401"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    assert "tokenAuth" in schema["components"]["securitySchemes"]


@pytest.mark.django_db
def test_interactive_docs_are_served_without_external_assets(client):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    assert "cdn." not in html and "unpkg" not in html


@pytest.mark.django_db
def test_unauthenticated_api_call_is_401_in_common_format(api_client):
    body = _assert_error_format(api_client.get("/api/v1/me/"), 401)
    assert "credentials" in body["detail"].lower()


@pytest.mark.django_db
def test_bad_token_is_401_in_common_format(api_client):
    api_client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    body = _assert_error_format(api_client.get("/api/v1/me/"), 401)
    assert "token" in body["detail"].lower()


@pytest.mark.django_db
def test_validation_errors_name_each_field(api_client):
    body = _assert_error_format(api_client.post("/api/v1/auth/token/", {}, format="json"), 400)
    fields = {item["field"] for item in body["errors"]}
    assert fields == {"username", "password"}
    assert all(item["message"] == "This field is required." for item in body["errors"])


@pytest.mark.django_db
def test_wrong_credentials_are_a_request_level_error(api_client, make_user):
    make_user("alice", password="right-password-1")
    body = _assert_error_format(
        api_client.post("/api/v1/auth/token/", {"username": "alice", "password": "wrong"}, format="json"), 400
    )
    assert body["errors"][0]["field"] is None
    assert "Unable to log in" in body["detail"]


@pytest.mark.django_db
def test_malformed_json_is_400_in_common_format(api_client):
    response = api_client.post("/api/v1/auth/token/", data='{"username": "a",', content_type="application/json")
    body = _assert_error_format(response, 400)
    assert "JSON parse error" in body["detail"]


@pytest.mark.django_db
def test_unknown_api_path_and_unknown_object_are_404_json(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    _assert_error_format(api_client.get("/api/v1/no-such-endpoint/"), 404)
    _assert_error_format(api_client.get("/api/v1/projects/999999/"), 404)


@pytest.mark.django_db
def test_wrong_method_is_405_in_common_format(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    body = _assert_error_format(api_client.delete("/api/v1/me/"), 405)
    assert "DELETE" in body["detail"]


@pytest.mark.django_db
def test_oversized_body_is_rejected_with_a_clear_message(api_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    payload = json.dumps({"username": "x" * 5000, "password": "y"})
    response = api_client.post("/api/v1/auth/token/", data=payload, content_type="application/json")
    body = _assert_error_format(response, 413)
    assert "at most 1,000 bytes" in body["detail"]
    # Announced by Content-Length: refused before anything is read.
    response = api_client.generic("POST", "/api/v1/auth/token/", b"{}", content_type="application/json",
                                  CONTENT_LENGTH="6760759693754570375168")
    assert "at most 1,000 bytes" in _assert_error_format(response, 413)["detail"]


@pytest.mark.django_db
def test_api_root_lists_entry_points(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    body = api_client.get("/api/v1/").json()
    assert body["schema"].endswith("/api/schema/")
    assert body["me"].endswith("/api/v1/me/")


def test_schema_generation_has_no_warnings(tmp_path):
    from django.core.management import call_command

    # --fail-on-warn turns every unresolved serializer field, authenticator or enum clash into
    # an error, so the published schema never silently degrades.
    call_command("spectacular", "--fail-on-warn", "--validate", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/v1/jobs/events/" in (tmp_path / "schema.yaml").read_text()


# ---------------------------------------------------------------------------------------------
# Bounded input (issue 16, items 2 and 6): body size, nesting depth, pagination, query parameters
# ---------------------------------------------------------------------------------------------
DEEP = 100_000
JSON_ENDPOINTS = [
    ("post", "/api/v1/edf/validate/"),
    ("post", "/api/v1/edf/documents/"),
    ("post", "/api/v1/namespaces/requests/"),
    ("post", "/api/v1/jobs/events/"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("method, url", JSON_ENDPOINTS)
@pytest.mark.parametrize("deep", ["[" * DEEP + "]" * DEEP, '{"a":' * DEEP + "1" + "}" * DEEP])
def test_json_nested_100k_deep_is_a_400_on_every_json_endpoint(api_client, make_user, method, url, deep):
    api_client.force_authenticate(make_user("sam", is_staff=True))
    response = getattr(api_client, method)(url, data=deep, content_type="application/json")
    if url == "/api/v1/namespaces/requests/" and len(deep) > 256 * 1024:
        _assert_error_format(response, 413)  # that endpoint takes at most 256 KiB: refused for its size first
        return
    body = _assert_error_format(response, 400)
    assert "deeper than 64 levels" in body["detail"]


@pytest.mark.django_db
def test_json_just_past_the_depth_limit_is_refused_and_within_it_is_read(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))

    def nested(levels):
        return '{"text": ' + '{"a": ' * (levels - 1) + "1" + "}" * (levels - 1) + "}"

    response = api_client.post("/api/v1/edf/validate/", data=nested(65), content_type="application/json")
    assert "deeper than 64 levels" in _assert_error_format(response, 400)["detail"]
    response = api_client.post("/api/v1/edf/validate/", data=nested(64), content_type="application/json")
    within = _assert_error_format(response, 400)
    assert "deeper" not in within["detail"] and within["errors"][0]["field"] == "text"  # read, then refused as no text


@pytest.mark.django_db
def test_json_numbers_python_cannot_read_are_a_400(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    response = api_client.post("/api/v1/edf/validate/", data='{"text": ' + "9" * 5000 + "}", content_type="application/json")
    assert "JSON parse error" in _assert_error_format(response, 400)["detail"]


@pytest.mark.django_db
def test_oversized_json_body_is_413_on_a_json_endpoint(api_client, make_user, settings):
    api_client.force_authenticate(make_user("alice"))
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api_client.post("/api/v1/edf/validate/", data=json.dumps({"text": "x" * 5000}), content_type="application/json")
    assert "at most 1,000 bytes" in _assert_error_format(response, 413)["detail"]


def test_the_json_parser_reads_no_more_than_the_limit_without_a_content_length(settings, rf):
    from apps.core.api.exceptions import InputError
    from apps.core.api.parsers import BoundedJSONParser

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    read = []

    class Stream:
        def read(self, size=-1):
            read.append(size)
            return b"[" + b"0," * 5000 + b"0]"

    with pytest.raises(InputError) as refused:
        BoundedJSONParser().parse(Stream(), "application/json", {"request": rf.generic("POST", "/", b"")})
    assert refused.value.status_code == 413 and read == [1001]


@pytest.mark.django_db
@pytest.mark.parametrize("param, value, message", [
    ("limit", "6760759693754570375168", "less than or equal to 1000"),
    ("offset", "6760759693754570375168", "less than or equal to 1000000000"),
    ("limit", "²", "digits 0-9"),
    ("offset", "²", "digits 0-9"),
    ("limit", "-1", "greater than or equal to 1"),
    ("offset", "-5", "greater than or equal to 0"),
    ("limit", "1001", "less than or equal to 1000"),
    ("limit", "1e3", "digits 0-9"),
    ("limit", "0", "greater than or equal to 1"),
])
@pytest.mark.parametrize("url", ["/api/v1/projects/", "/api/v1/jobs/"])
def test_pagination_refuses_bad_limit_and_offset_naming_them(api_client, make_user, url, param, value, message):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    body = _assert_error_format(api_client.get(url, {param: value}), 400)
    assert [item["field"] for item in body["errors"]] == [param]
    assert message in body["errors"][0]["message"]


@pytest.mark.django_db
def test_pagination_within_bounds_pages(api_client, make_user):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01", "a-llm02", "a-llm03"]))
    page = api_client.get("/api/v1/projects/", {"limit": "2", "offset": "1"})
    assert page.status_code == 200
    assert page.json()["count"] == 3 and len(page.json()["results"]) == 2
    assert api_client.get("/api/v1/projects/", {"limit": "1000"}).status_code == 200
    schema = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    limit = next(p for p in schema["paths"]["/api/v1/projects/"]["get"]["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 1000 and limit["schema"]["minimum"] == 1


def test_parse_query_validates_with_a_serializer_and_names_each_parameter(rf):
    from rest_framework import serializers
    from rest_framework.exceptions import ValidationError
    from rest_framework.request import Request

    from apps.core.api.exceptions import api_exception_handler
    from apps.core.api.params import CommaListField, JobRef, JobRefField, QueryIntegerField, parse_query

    class Params(serializers.Serializer):
        job = JobRefField(required=False)
        gpu = serializers.ListField(child=QueryIntegerField(min_value=0, max_value=7), required=False)
        step = QueryIntegerField(min_value=1, max_value=3600, required=False)
        stats = CommaListField(child=serializers.ChoiceField(["mean", "max"]), required=False)

    good = parse_query(Request(rf.get("/", {"job": "alps/12", "gpu": ["0", "3"], "step": "60", "stats": "mean,max"})), Params)
    assert good == {"job": JobRef("alps", 12), "gpu": [0, 3], "step": 60, "stats": ["mean", "max"]}
    assert parse_query(Request(rf.get("/")), Params) == {}
    with pytest.raises(ValidationError) as refused:
        parse_query(Request(rf.get("/", {"job": "alps/²", "gpu": ["0", "²"], "step": "6760759693754570375168",
                                         "stats": "mean,p99"})), Params)
    response = api_exception_handler(refused.value, {})
    assert response.status_code == 400
    errors = {item["field"]: item["message"] for item in response.data["errors"]}
    assert set(errors) == {"job", "gpu", "step", "stats"}
    assert errors["gpu"].startswith("value 2:") and "0-9" in errors["gpu"]
    assert "less than or equal to 3600" in errors["step"]
    for text in ("٣", "1.0", " ", "+", "1_000", "0x10"):
        with pytest.raises(ValidationError):
            parse_query(Request(rf.get("/", {"step": text})), Params)
    with pytest.raises(ValidationError):
        parse_query(Request(rf.get("/", {"job": "alps/99999999999999999999"})), Params)
