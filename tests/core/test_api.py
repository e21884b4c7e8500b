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
    body = _assert_error_format(response, 400)
    assert "larger than" in body["detail"]


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
