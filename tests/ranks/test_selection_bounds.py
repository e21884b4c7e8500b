"""Selections checked against the job's layout: a value the layout does not have is an error naming
the range ("stage 8 does not exist: stages 0–7"), on the job page, in the figure endpoint and in the
API's rank filters; never a part that silently selects nothing (issue 17)."""
import pytest

from apps.ranks.selection import SelectionError, out_of_range, parse_bounded, parse_selection, read_selections

NODES = [f"nid{n:06d}" for n in range(1, 17)]  # 16 nodes x 4 GPUs = 64 ranks: tp 4 x pp 8 x dp 2


@pytest.mark.parametrize("text, dimension, size, message", [
    ("7-8", "pp", 8, "stage 8 does not exist: stages 0–7"),
    ("7–8", "pp", 8, "stage 8 does not exist: stages 0–7"),  # the en dash the page writes reads as a range
    ("99", "pp", 8, "stage 99 does not exist: stages 0–7"),
    ("8,9", "pp", 8, "stages 8–9 do not exist: stages 0–7"),
    ("1,8,10-12,99", "pp", 8, "stages 8, 10–12 and 99 do not exist: stages 0–7"),
    ("16", "dp", 16, "replica 16 does not exist: replicas 0–15"),
    ("4", "tp", 4, "lane 4 does not exist: lanes 0–3"),
    ("1", "cp", 1, "context-parallel rank 1 does not exist: there is only context-parallel rank 0"),
    ("1000-1001", "dp", 1000, "replicas 1,000–1,001 do not exist: replicas 0–999"),
    ("0,2,4,6,8,10,12,14", "pp", 1, "stages 2, 4, 6, 8 and 3 more do not exist: there is only stage 0"),
])
def test_out_of_range_names_the_values_and_the_range(text, dimension, size, message):
    with pytest.raises(SelectionError) as caught:
        parse_bounded(text, dimension, size)
    assert str(caught.value) == message


def test_values_inside_the_range_pass_and_empty_means_no_filter():
    assert parse_bounded("6–7", "pp", 8) == [6, 7]
    assert parse_bounded("0-7", "pp", 8) == list(range(8))
    assert parse_bounded(" , ", "pp", 8) is None and parse_bounded("", "pp", 8) is None
    assert out_of_range([0, 7], 8, "pp") is None
    # Syntax errors keep their own message, before any bounds.
    with pytest.raises(SelectionError, match=r"'x' is not a number"):
        parse_bounded("x", "pp", 8)


def test_read_selections_keeps_the_good_fields_and_explains_the_bad():
    selection, errors = read_selections({"dp": "1", "pp": "7-8", "tp": "x"}, {"dp": 2, "pp": 8, "tp": 4})
    assert selection == {"dp": [1], "pp": None, "tp": None}
    assert errors == {"pp": "stage 8 does not exist: stages 0–7",
                      "tp": "'x' is not a number or a range like 1 or 6,7 or 0-3 (digits 0-9 only)"}
    assert read_selections({}, {"dp": 2}) == ({"dp": None}, {})
    with pytest.raises(SelectionError, match="the range ends before it starts"):
        parse_selection("3–1")


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


@pytest.fixture
def with_layout(alice):
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 8}, format="json").status_code == 200
    return alice


@pytest.mark.parametrize("query, field, message", [
    ("pp=7-8", "pp", "stage 8 does not exist: stages 0–7"),
    ("pp=99", "pp", "stage 99 does not exist: stages 0–7"),
    ("dp=2", "dp", "replica 2 does not exist: replicas 0–1"),
    ("tp=0-4", "tp", "lane 4 does not exist: lanes 0–3"),
    ("cp=1", "cp", "context-parallel rank 1 does not exist: there is only context-parallel rank 0"),
    ("ep=1", "ep", "expert-parallel rank 1 does not exist: there is only expert-parallel rank 0"),
])
def test_api_rank_filters_refuse_values_the_layout_lacks(with_layout, query, field, message):
    response = with_layout.get(f"/api/v1/jobs/alps/1/ranks/?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["errors"] == [{"field": field, "line": None, "message": message}]
    assert message in body["detail"]


def test_api_rank_filters_name_every_bad_field(with_layout):
    response = with_layout.get("/api/v1/jobs/alps/1/ranks/?pp=8&dp=5&tp=1")
    assert response.status_code == 400
    assert sorted(error["field"] for error in response.json()["errors"]) == ["dp", "pp"]
    assert len(with_layout.get("/api/v1/jobs/alps/1/ranks/?pp=7&dp=1").json()) == 4  # the edge values still select


@pytest.mark.parametrize("query, name, message", [
    ("sel_pp=7-8", "pp", "stage 8 does not exist: stages 0–7"),
    ("sel_pp=99", "pp", "stage 99 does not exist: stages 0–7"),
    ("sel_pp=x", "pp", "&#x27;x&#x27; is not a number"),
    ("sel_tp=4", "tp", "lane 4 does not exist: lanes 0–3"),
])
def test_job_page_says_what_does_not_exist_and_keeps_the_rest(client, django_user_model, with_layout, query, name, message):
    client.force_login(django_user_model.objects.get(username="alice"))
    page = client.get(f"/jobs/alps/1/?sel_dp=1&{query}").content.decode()
    assert f'<p class="form-errors" id="sel-{name}-error" role="alert">{name} selection ignored: {message}' in page
    assert f'aria-describedby="sel-{name}-error"' in page
    assert "32 ranks selected" in page  # replica 1 still selected: 4 lanes x 8 stages


def test_figure_endpoint_says_the_same_as_the_page(with_layout):
    response = with_layout.get("/api/v1/jobs/alps/1/ranks/figure/?sel_dp=1&sel_pp=7-8")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["errors"] == {"pp": "stage 8 does not exist: stages 0–7"}
    assert body["selected_ranks"] == 32  # the pp field is ignored, replica 1 is drawn
