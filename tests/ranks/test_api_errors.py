"""Hostile and careless input to the ranks API and the ranks section of the job page: every bad
value is a 400 (or an explanation on the page) naming the parameter, never a 500."""
import pytest

from apps.ranks.models import JobLayout

NODES = [f"nid{n:06d}" for n in range(1, 9)]


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


@pytest.fixture
def with_layout(alice):
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").status_code == 200
    return alice


@pytest.mark.parametrize("query, field, text", [
    ("dp=²", "dp", "0-9"),
    ("pp=1-²", "pp", "0-9"),
    ("tp=١", "tp", "0-9"),  # an Arabic-Indic one: int() reads it, the parser must not
    ("cp=-1", "cp", "0-9"),
    ("ep=3-1", "ep", "3-1"),
    ("pp=0-99999999999999999999999", "pp", "at most"),
    ("dp=0-60000,0-60000", "dp", "at most 100,000"),  # counted over all parts, before expanding
    ("pp=6-x", "pp", "6-x"),
    ("dp=1,,2,", None, None),  # empty parts are fine
])
def test_rank_filters(with_layout, query, field, text):
    response = with_layout.get(f"/api/v1/jobs/alps/1/ranks/?{query}")
    if field is None:
        assert response.status_code == 200 and {row["dp"] for row in response.json()} == {1, 2}
        return
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [error["field"] for error in errors] == [field] and text in errors[0]["message"], errors


def test_rank_filter_ranges_work(with_layout):
    rows = with_layout.get("/api/v1/jobs/alps/1/ranks/?pp=1&tp=0-1, 3").json()
    assert [(row["pp"], row["tp"]) for row in rows] == [(1, t) for _ in range(4) for t in (0, 1, 3)]


@pytest.mark.parametrize("ranks, field", [
    ([None, None], "ranks.0"),
    ([{"rank": 0, "host": NODES[0], "local_rank": 0}, None], "ranks.1"),
    ([{"rank": 0, "host": NODES[0], "local_rank": 0}, 7], "ranks.1"),
    ([{"rank": None, "host": NODES[0], "local_rank": 0}], "ranks.0.rank"),
    ("x", "ranks"),
])
def test_layout_with_broken_rank_entries(alice, ranks, field):
    response = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 1, "pp": 1, "ranks": ranks}, format="json")
    assert response.status_code == 400, response.content
    assert field in [error["field"] for error in response.json()["errors"]], response.json()
    assert not JobLayout.objects.exists()


@pytest.mark.parametrize("query, name, text", [
    ("sel_dp=²", "dp", "digits 0-9 only"),
    ("sel_pp=0-99999999999999", "pp", "is too large"),
    ("sel_pp=0-999999", "pp", "at most 100,000"),
    ("sel_tp=x", "tp", "is not a number"),
])
def test_job_page_explains_bad_selections(client, django_user_model, with_layout, query, name, text):
    client.force_login(django_user_model.objects.get(username="alice"))
    response = client.get(f"/jobs/alps/1/?{query}&sel_dp=1" if name != "dp" else f"/jobs/alps/1/?{query}")
    assert response.status_code == 200
    page = response.content.decode()
    assert f'id="sel-{name}-error"' in page and text in page
    assert f'aria-describedby="sel-{name}-error"' in page
    if name != "dp":  # the good field still selects: replica 1 (8 of 32 ranks), the bad one is ignored
        assert "8 ranks selected" in page


def test_job_page_selection_uses_the_apis_rules(client, django_user_model, with_layout):
    client.force_login(django_user_model.objects.get(username="alice"))
    page = client.get("/jobs/alps/1/?sel_dp=1-2&sel_pp=1&sel_tp=0, 3").content.decode()
    assert "sel-dp-error" not in page and "4 ranks selected" in page  # 2 replicas x 1 stage x 2 lanes


def test_layout_service_refuses_with_a_domain_error_the_api_maps(job):
    """services.layout_set raises LayoutRefused (no HTTP in the domain); the API turns it into the 400."""
    from rest_framework.exceptions import APIException

    from apps.ranks.services import LayoutRefused, layout_set

    with pytest.raises(LayoutRefused) as caught:
        layout_set(job, {"tp": 4, "pp": 7, "cp": 1, "ep": 1, "order": "tp-cp-ep-dp-pp"}, source="sizes", submitted_by="alice")
    assert not isinstance(caught.value, APIException)
    assert [(p.field, "does not divide the world size 32" in p.message) for p in caught.value.problems] == [(None, True)]
    with pytest.raises(LayoutRefused) as caught:
        layout_set(job, {"tp": 1, "pp": 1, "ranks": [{"rank": 3, "host": "nid000001", "local_rank": 0}]}, source="map",
                   submitted_by="alice")
    assert [p.field for p in caught.value.problems] == ["ranks.0.rank"]
    assert not JobLayout.objects.exists()
