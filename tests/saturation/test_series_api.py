"""Per-GPU series with the peers' band (GET /api/v1/jobs/<cluster>/<job_id>/saturation/series/), on a scored
Megatron job with planted problems: the stragglers the detector found sit outside their peers' band."""
from datetime import datetime, timedelta

import numpy as np
import pytest

from apps.saturation.services import job_saturation_refresh
from apps.telemetry.synthetic_jobs import default_planted

HOSTS = [f"nid{n:06d}" for n in range(1, 9)]
URL = "/api/v1/jobs/alps/12/saturation/series/"


@pytest.fixture
def scored(megatron_job):
    job = megatron_job(job_id=12, hosts=HOSTS, minutes=60, seconds=3500, seed=5)
    return job_saturation_refresh(job)


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _finding(record, signal):
    return next(s for s in record.stragglers if s["level"] == "gpu" and s["signal"] == signal)


def test_the_throttled_gpu_sits_below_its_peers_band_where_the_detector_found_it(scored, alice):
    planted = default_planted(HOSTS)
    finding = _finding(scored, "sm_clock")
    assert (finding["host"], finding["gpu"]) == planted.throttled
    gpu = f"{planted.throttled[0]}:{planted.throttled[1]}"
    body = alice.get(URL, {"metric": "sm_clock", "gpus": gpu, "start": finding["start"], "end": finding["end"], "bins": "2000"}).json()
    assert (body["metric"], body["title"], body["unit"]) == ("sm_clock", "SM clock", "MHz")
    whole = alice.get(URL, {"metric": "sm_clock", "gpus": gpu, "bins": "50"}).json()
    assert body["bin_seconds"] < whole["bin_seconds"] and len(whole["times"]) <= 50  # zoomed in: finer bins
    assert _stamp(finding["start"]) - timedelta(seconds=body["bin_seconds"]) < _stamp(body["times"][0])
    assert _stamp(body["times"][-1]) <= _stamp(finding["end"])
    line, peers = body["gpus"][0], body["peers"]
    assert (line["host"], line["gpu"], line["label"]) == (*planted.throttled, gpu)
    assert peers["count"] == 31 and "all 32 GPUs of the job" in peers["description"]
    assert all(len(series) == len(body["times"]) for series in (line["values"], peers["median"], peers["p10"], peers["p90"]))
    below = [value < p10 for value, p10 in zip(line["values"], peers["p10"]) if value is not None and p10 is not None]
    assert len(below) >= 0.9 * len(body["times"]) and sum(below) >= 0.9 * len(below)
    assert np.median(line["values"]) < 0.8 * np.median(peers["median"])  # the SM clock some 28 % down
    assert all(p10 <= median <= p90 for p10, median, p90 in zip(peers["p10"], peers["median"], peers["p90"]))

    # before the steady state (the warm-up) the detector found nothing, and the line is inside the band
    warmup = alice.get(URL, {"metric": "sm_clock", "gpus": gpu, "end": body["steady_start"]}).json()
    assert warmup["times"] and all(value >= 0.98 * p10 for value, p10 in zip(warmup["gpus"][0]["values"], warmup["peers"]["p10"])
                                   if value is not None and p10 is not None)


def test_the_hot_gpu_above_its_band_next_to_the_throttled_one(scored, alice):
    planted = default_planted(HOSTS)
    hot, throttled = (f"{host}:{gpu}" for host, gpu in (planted.hot, planted.throttled))
    body = alice.get(URL, {"metric": "temperature", "gpus": f"{hot},{throttled},{hot}", "bins": "30"}).json()
    assert [g["label"] for g in body["gpus"]] == [hot, throttled]  # in the order asked, each once
    assert body["unit"] == "°C" and len(body["times"]) <= 30
    peers = body["peers"]
    assert peers["count"] == 30 and "the GPUs shown" in peers["description"]  # neither chosen GPU is its own peer
    steady = [i for i, t in enumerate(body["times"]) if _stamp(t) >= _stamp(body["steady_start"])]
    assert all(body["gpus"][0]["values"][i] > peers["p90"][i] + 5 for i in steady[1:])


def test_without_gpus_the_first_straggler_is_shown(scored, alice):
    first = next(s for s in scored.stragglers if s["level"] == "gpu")
    body = alice.get(URL).json()
    assert body["metric"] == "S" and [(g["host"], g["gpu"]) for g in body["gpus"]] == [(first["host"], first["gpu"])]
    assert len(body["times"]) <= 300


@pytest.mark.parametrize("params, field, words", [
    ({"gpus": "nid000001:0,nid009999:1"}, "gpus", "nid009999:1 is not a GPU of this job"),
    ({"gpus": "nid000001:7,nid000002:9"}, "gpus", "nid000001:7, nid000002:9 are not GPUs of this job"),
    ({"gpus": ",".join(f"nid00000{1 + i // 4}:{i % 4}" for i in range(17))}, "gpus", "at most 16 GPUs"),
    ({"gpus": "nid000001"}, "gpus", "host>:<gpu index>"),
    ({"gpus": ""}, "gpus", "at least one GPU"),
    ({"metric": "nope"}, "metric", "choose one of S, C"),
    ({"bins": "0"}, "bins", "from 1 to 2000"),
    ({"bins": "2001"}, "bins", "from 1 to 2000"),
    ({"bins": "²"}, "bins", "digits 0-9"),
    ({"start": "yesterday"}, "start", "wrong format"),
    ({"start": "2025-01-02T00:00:00Z", "end": "2025-01-01T00:00:00Z"}, "end", "after start"),
    ({"end": "9999-01-01T00:00:00Z"}, "end", "between 1970 and 2200"),
    ({"start": "0001-01-01T00:00:00Z"}, "start", "between 1970 and 2200"),
])
def test_bad_parameters_are_400s_naming_them(scored, alice, params, field, words):
    response = alice.get(URL, params)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field] and words in errors[0]["message"], errors


def test_who_may_read_it(scored, api_client, make_user):
    api_client.force_authenticate(make_user("bob", accounts=["a-other"]))
    assert api_client.get(URL).status_code == 404
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))
    assert api_client.get(URL).status_code == 200
    api_client.force_authenticate(None)
    assert api_client.get(URL).status_code in (401, 403)


def test_an_unscored_job_says_so(megatron_job, alice):
    megatron_job(job_id=12, hosts=HOSTS[:2], minutes=30, seconds=600, seed=5)
    response = alice.get(URL)
    assert response.status_code == 404 and "not scored yet" in response.json()["detail"]


def test_a_window_outside_the_data_is_empty_not_an_error(scored, alice):
    body = alice.get(URL, {"start": "2001-01-01T00:00:00Z", "end": "2001-01-02T00:00:00Z"}).json()
    assert body["times"] == [] and body["gpus"][0]["values"] == [] and body["peers"]["median"] == []


def test_the_answer_matches_its_documentation_in_the_schema(scored, alice):
    from jsonschema import Draft7Validator

    from apps.saturation.api.series import SaturationSeriesResponse
    from tests.security.test_openapi_complete import api_schema, json_schema

    schema = api_schema()
    operation = schema["paths"]["/api/v1/jobs/{cluster}/{job_id}/saturation/series/"]["get"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": f"#/components/schemas/{SaturationSeriesResponse.__name__}"}
    assert {p["name"] for p in operation["parameters"]} >= {"metric", "gpus", "bins", "start", "end"}
    validator = Draft7Validator(json_schema({"$ref": f"#/components/schemas/{SaturationSeriesResponse.__name__}",
                                             "components": schema["components"]}))
    for params in ({}, {"metric": "power", "gpus": "nid000001:0,nid000002:1", "bins": "7"},
                   {"start": "2001-01-01T00:00:00Z", "end": "2001-01-02T00:00:00Z"}):
        body = alice.get(URL, params).json()
        assert not list(validator.iter_errors(body)), (params, [e.message for e in validator.iter_errors(body)][:3])
