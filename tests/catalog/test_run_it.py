"""Issue 23 on the demo: "Run it" works for every user on what they may see (the sample query as the reader runs
it: staff as declared, a researcher on their latest job), a bad parameter is a 400 naming the field, and the
explorer opens a researcher on their latest job with data (never an empty plot)."""
import json
import re
from html import unescape

import pytest

from apps.catalog.models import DataProduct
from tests.catalog.test_api_pages import _callback_body
from tests.demo_snapshot import load_demo

pytestmark = pytest.mark.integration


def run_it(client, name: str):
    """The product page's "Run it" query for the signed-in reader, and the API's answer to it."""
    page = client.get(f"/catalog/{name}/").content.decode()
    found = re.search(r'data-run="([^"]+)"', page)
    assert found, (name, re.search(r'id="sample-scope">([^<]*)<', page))
    query = unescape(found.group(1))
    return query, client.get(query, HTTP_ACCEPT="application/json")


def test_every_products_sample_query_runs_for_a_researcher_and_for_staff(transactional_db, store, client):
    from django.contrib.auth import get_user_model

    load_demo()
    users = get_user_model().objects
    wrong = []
    for username in ("demo", "staff"):
        client.force_login(users.get(username=username))
        for product in DataProduct.objects.order_by("name"):
            query, response = run_it(client, product.name)
            if response.status_code != 200:
                wrong.append((username, product.name, query, response.status_code, response.content[:200]))
            elif username == "demo" and "/telemetry/series/" in query:
                assert "job=" in query and "host=" not in query, query
    assert wrong == [], "\n".join(map(repr, wrong))
    # A researcher's telemetry answer holds the nodes of their own job, with samples.
    client.force_login(users.get(username="demo"))
    query, response = run_it(client, "dcgm-device")
    body = response.json()
    assert body["rows"] and body["columns"], body
    # A bad parameter: a 400 that names it.
    bad = client.get(query + "&step=soon", HTTP_ACCEPT="application/json")
    assert bad.status_code == 400 and [error["field"] for error in bad.json()["errors"]] == ["step"]


def _prefill_body(search: str) -> dict:
    outputs = ["product.options", "product.value", "window.value", "group_by.value", "stat.value", "hosts.value", "job.options", "job.value"]
    return {"output": ".." + "...".join(outputs) + "..",
            "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]} for o in outputs],
            "inputs": [{"id": "url", "property": "search", "value": search}], "changedPropIds": ["url.search"], "state": []}


def test_the_explorer_opens_a_researcher_on_their_latest_job_with_data(transactional_db, store, client):
    from django.contrib.auth import get_user_model

    load_demo()
    client.force_login(get_user_model().objects.get(username="demo"))
    prefill = client.post("/catalog/explorer/app/_dash-update-component", json.dumps(_prefill_body("?product=dcgm-device")),
                          content_type="application/json").json()["response"]
    job = prefill["job"]["value"]
    assert job and job in {option["value"] for option in prefill["job"]["options"]}
    inputs = {"product": "dcgm-device", "fields": [155, 150], "window": prefill["window"]["value"], "group_by": "host", "stat": "mean",
              "hosts": "", "job": job}
    answer = client.post("/catalog/explorer/app/_dash-update-component", json.dumps(_callback_body(inputs, "?product=dcgm-device")),
                         content_type="application/json").json()["response"]
    traces = answer["plot"]["figure"]["data"]
    assert traces and sum(len(trace.get("x") or []) for trace in traces) > 0, answer["note"]["children"]
    assert "buckets of" in answer["note"]["children"] and "rows read" in answer["note"]["children"]
