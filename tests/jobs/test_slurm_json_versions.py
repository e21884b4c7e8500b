"""Slurm JSON of every data_parser from v0.0.39 to v0.0.45, default and ``+complex`` (issue 34, acceptance 1).

v0.0.40 to v0.0.45: documents generated from the OpenAPI specs (tests/jobs/data/openapi/, extracts of
SchedMD's testsuite/python/data/openapi_specs/ and of slurmrestd's v0.0.40 spec; sources in each file):
every property of a job is filled in by walking the job's schema, a value per type, and every field the
portal keeps must equal the document's. ``+complex`` documents are the same with each
``{"set", "infinite", "number"}`` written as Slurm's complex mode writes it (a plain number,
``"Infinity"`` or null). v0.0.39: documents in the shapes of SchedMD's src/plugins/data_parser/v0.0.39/
parsers.c (JOB_INFO, JOB, STEP, JOB_EXIT_CODE, SLURM_STEP_ID; removed from Slurm in 24.11).
"""
import json
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path

import pytest

from apps.jobs.slurm_json import SlurmStep, parse_sacct, parse_scontrol, parse_squeue

SPECS = Path(__file__).parent / "data" / "openapi"
VERSIONS = ["v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
NODES = "nid[001234-001235],nid001300"
NODE_LIST = ("nid001234", "nid001235", "nid001300")


def schemas(version: str) -> dict:
    return json.loads((SPECS / f"{version}.json").read_text())["schemas"]


class Filler:
    """A value for every property of a schema: distinct integers (plausible epoch seconds), strings
    named after their property, the first value of an enum, one item per array."""

    def __init__(self, spec: dict, complex_mode: bool):
        self.spec, self.complex_mode, self.count = spec, complex_mode, 0

    def integer(self) -> int:
        self.count += 1
        return 1_700_000_000 + 1000 * self.count

    def value(self, node: dict, name: str, depth: int = 0):
        while "$ref" in node:
            node = self.spec[node["$ref"]]
        properties = node.get("properties") or {}
        if set(properties) == {"set", "infinite", "number"}:  # Slurm's *_no_val(_struct)
            number = self.integer()
            return number if self.complex_mode else {"set": True, "infinite": False, "number": number}
        kind = node.get("type")
        if kind == "object":
            return {} if depth > 10 else {key: self.value(child, key, depth + 1) for key, child in properties.items()}
        if kind == "array":
            return [self.value(node.get("items") or {}, name, depth + 1)]
        if node.get("enum"):
            return node["enum"][0]
        if kind == "integer":
            return self.integer()
        if kind == "number":
            return float(self.integer())
        if kind == "boolean":
            return True
        self.count += 1
        return f"{name}-{self.count}"


def no_val(value: int | None, complex_mode: bool):
    if complex_mode:
        return value
    return {"set": value is not None, "infinite": False, "number": value if value is not None else 0}


def exit_code(status: str, code: int | None, signal: int | None, complex_mode: bool) -> dict:
    """PROCESS_EXIT_CODE_VERBOSE as v0.0.40+ dumps it."""
    return {"status": [status], "return_code": no_val(code, complex_mode),
            "signal": {"id": no_val(signal, complex_mode), "name": "SIGKILL" if signal == 9 else (None if complex_mode else "")}}


def document(version: str, job: dict, command: str, complex_mode: bool) -> str:
    meta = {"plugin": {"type": "", "name": "", "data_parser": f"data_parser/{version}" + ("+complex" if complex_mode else ""),
                       "accounting_storage": "accounting_storage/slurmdbd"},
            "client": {"source": "/dev/pts/0", "user": "alice", "group": "alice"}, "command": [command, "--json"],
            "slurm": {"version": {"major": "25", "micro": "2", "minor": "05"}, "release": "25.05.2", "cluster": "alps"}}
    return json.dumps({"meta": meta, "errors": [], "warnings": [], "jobs": [job]})


def num(value):
    return value["number"] if isinstance(value, dict) else value


def ts(value) -> datetime:
    return datetime.fromtimestamp(num(value), tz=timezone.utc)


def filled(spec: dict, name: str, job: dict) -> dict:
    """Nothing left out: every property of the job's schema has a value."""
    assert set(job) == set(spec[name]["properties"]) and all(value is not None for value in job.values())
    return job


def kept(record) -> dict:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def squeue_job(version: str, complex_mode: bool) -> dict:
    spec = schemas(version)
    job = filled(spec, f"{version}_job_info", Filler(spec, complex_mode).value({"$ref": f"{version}_job_info"}, "job"))
    job.update(job_state=["FAILED"], nodes=NODES, tres_alloc_str="cpu=864,mem=1200G,node=3,billing=864,gres/gpu=12",
               command="/users/alice/train.sh --environment=megatron", exit_code=exit_code("ERROR", 3, None, complex_mode))
    return job


@pytest.mark.parametrize("complex_mode", [False, True], ids=["default", "complex"])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("parse", [parse_squeue, parse_scontrol], ids=["squeue", "scontrol"])
def test_squeue_and_scontrol_jobs_of_every_spec_keep_the_documents_values(version, complex_mode, parse):
    j = squeue_job(version, complex_mode)
    result = parse(document(version, j, "squeue", complex_mode), "alps")
    assert result.problems == [] and result.warnings == []
    assert (result.data_parser, result.data_parser_flags, result.slurm_version) == (version, "+complex" if complex_mode else "", "25.05.2")
    [job] = result.jobs
    assert kept(job) == {
        "cluster": "alps", "job_id": j["job_id"], "state": "FAILED", "name": j["name"], "user": j["user_name"],
        "account": j["account"], "partition": j["partition"], "qos": j["qos"], "state_reason": j["state_reason"],
        "array_job_id": num(j["array_job_id"]), "array_task_id": num(j["array_task_id"]), "array_task_string": j["array_task_string"],
        "het_job_id": num(j["het_job_id"]), "het_offset": num(j["het_job_offset"]),
        "submit_time": ts(j["submit_time"]), "start_time": ts(j["start_time"]), "end_time": ts(j["end_time"]),
        "time_limit_minutes": num(j["time_limit"]), "nodes": NODES, "node_list": NODE_LIST, "node_count": num(j["node_count"]),
        "tasks": num(j["tasks"]), "gpus": 12, "exit_code": 3, "signal": None,
        "working_directory": j["current_working_directory"], "command": j["command"], "comment": j["comment"],
        "environment": "megatron", "steps": (), "dependency": j["dependency"], "restart_count": j["restart_cnt"],
    }


def sacct_job(version: str, complex_mode: bool) -> dict:
    spec = schemas(version)
    filler = Filler(spec, complex_mode)
    job = filled(spec, f"{version}_job", filler.value({"$ref": f"{version}_job"}, "job"))
    job["state"]["current"] = ["FAILED"]
    job.update(nodes=NODES, submit_line="sbatch --environment=megatron train.sh", exit_code=exit_code("ERROR", 3, None, complex_mode))
    job["tres"]["allocated"] = [{"type": "cpu", "name": "", "id": 1, "count": 864}, {"type": "gres", "name": "gpu", "id": 1001, "count": 12}]
    [template] = job["steps"]
    batch = json.loads(json.dumps(template))
    batch["step"]["id"], batch["state"], batch["nodes"]["range"] = f"{job['job_id']}.batch", ["COMPLETED"], "nid001234"
    batch["exit_code"] = exit_code("SUCCESS", 0, None, complex_mode)
    step = filler.value({"$ref": f"{version}_job"}, "job")["steps"][0]
    step["step"]["id"], step["state"], step["nodes"]["range"] = f"{job['job_id']}.0", ["CANCELLED"], NODES
    step["exit_code"] = exit_code("SIGNALED", None, 9, complex_mode)
    job["steps"] = [batch, step]
    return job


@pytest.mark.parametrize("complex_mode", [False, True], ids=["default", "complex"])
@pytest.mark.parametrize("version", VERSIONS)
def test_sacct_jobs_and_steps_of_every_spec_keep_the_documents_values(version, complex_mode):
    j = sacct_job(version, complex_mode)
    result = parse_sacct(document(version, j, "sacct", complex_mode), "alps")
    assert result.problems == [] and result.warnings == [] and result.data_parser == version
    [job] = result.jobs
    expected_steps = tuple(
        SlurmStep(step_id=step_id, name=s["step"]["name"], nodes=s["nodes"]["range"], tasks=num(s["tasks"]["count"]),
                  state=state, start=ts(s["time"]["start"]), end=ts(s["time"]["end"]), exit_code=code)
        for s, step_id, state, code in zip(j["steps"], ["batch", "0"], ["COMPLETED", "CANCELLED"], [0, None]))
    assert kept(job) == {
        "cluster": j["cluster"], "job_id": j["job_id"], "state": "FAILED", "name": j["name"], "user": j["user"],
        "account": j["account"], "partition": j["partition"], "qos": j["qos"], "state_reason": j["state"]["reason"],
        "array_job_id": j["array"]["job_id"], "array_task_id": num(j["array"]["task_id"]), "array_task_string": j["array"]["task"],
        "het_job_id": j["het"]["job_id"], "het_offset": num(j["het"]["job_offset"]),
        "submit_time": ts(j["time"]["submission"]), "start_time": ts(j["time"]["start"]), "end_time": ts(j["time"]["end"]),
        "time_limit_minutes": num(j["time"]["limit"]), "nodes": NODES, "node_list": NODE_LIST, "node_count": j["allocation_nodes"],
        "tasks": None, "gpus": 12, "exit_code": 3, "signal": None, "working_directory": j["working_directory"],
        "command": j["submit_line"], "comment": j["comment"]["job"], "environment": "megatron", "steps": expected_steps,
        "dependency": "", "restart_count": j.get("restart_cnt"),  # sacct's job has restart_cnt from v0.0.42, never a dependency
    }


def test_complex_pending_job_with_unlimited_time_limit_is_kept():
    """The finding: "expected a number, got Infinity" dropped the job. Complex mode's nulls and bare
    Infinity (a 64-bit number set to infinite) read as "no value"."""
    job = squeue_job("v0.0.41", complex_mode=True)
    job.update(job_state=["PENDING"], time_limit="Infinity", nodes="", node_count=None, array_job_id=None,
               array_task_id=None, het_job_id=None, start_time=0, end_time="Infinity", exit_code=exit_code("PENDING", None, None, True))
    result = parse_squeue(document("v0.0.41", job, "squeue", True), "alps")
    assert result.problems == []
    [pending] = result.jobs
    assert (pending.state, pending.time_limit_minutes, pending.node_list, pending.node_count) == ("PENDING", None, (), None)
    assert (pending.array_job_id, pending.start_time, pending.end_time, pending.exit_code) == (None, None, None, None)
    finished = sacct_job("v0.0.41", complex_mode=True)
    finished["time"].update(end=float("inf"), limit="Infinity")
    finished["steps"][1]["time"]["end"] = None
    [record] = parse_sacct(document("v0.0.41", finished, "sacct", True), "alps").jobs
    assert (record.end_time, record.time_limit_minutes, record.steps[1].end) == (None, None, None)


# ---------------------------------------------------------------------------------------------
# v0.0.39 (Slurm 23.02): shapes from src/plugins/data_parser/v0.0.39/parsers.c
# ---------------------------------------------------------------------------------------------
META_0039_CLI = {"plugins": {"data_parser": "data_parser/v0.0.39", "accounting_storage": "accounting_storage/slurmdbd"},
                 "command": ["squeue", "--json"], "Slurm": {"version": {"major": 23, "micro": 8, "minor": 2}, "release": "23.02.8"}}
META_0039_RESTD = {"plugin": {"type": "openapi/v0.0.39", "name": "Slurm OpenAPI v0.0.39", "data_parser": "v0.0.39"},
                   "client": {"source": "[unix]"}, "Slurm": {"version": {"major": 23, "micro": 8, "minor": 2}, "release": "23.02.8"}}


def wrapped(value):
    """UINT32_NO_VAL in v0.0.39."""
    return {"set": True, "infinite": False, "number": value}


def squeue_0039(job_id: int, state: str, wait_status: int) -> dict:
    return {"account": "a-llm01", "array_job_id": wrapped(0), "array_task_id": {"set": False, "infinite": False, "number": 0},
            "array_task_string": "", "cluster": "alps", "command": "/users/alice/run.sh", "comment": "", "end_time": 1_700_003_600,
            "exit_code": wrapped(wait_status), "het_job_id": wrapped(0), "het_job_offset": wrapped(0), "job_id": job_id,
            "job_state": state, "name": f"job-{job_id}", "nodes": "nid[000001-000002]", "node_count": wrapped(2),
            "tasks": wrapped(8), "partition": "normal", "qos": "normal", "start_time": 1_700_000_000, "state_reason": "None",
            "submit_time": 1_699_999_000, "time_limit": wrapped(60), "tres_alloc_str": "cpu=16,node=2,gres/gpu=8",
            "tres_req_str": "", "tres_per_job": "", "tres_per_node": "gres:gpu:4", "user_name": "alice",
            "current_working_directory": "/users/alice"}


@pytest.mark.parametrize("meta", [META_0039_CLI, META_0039_RESTD], ids=["cli", "slurmrestd"])
def test_v0039_squeue_exit_codes_and_signals_from_wrapped_wait_statuses(meta):
    """The finding: exit 0, exit 3 and signal 9 all read None (the wait status came wrapped)."""
    jobs = [squeue_0039(1, "COMPLETED", 0), squeue_0039(2, "FAILED", 3 << 8), squeue_0039(3, "CANCELLED", 9)]
    result = parse_squeue(json.dumps({"meta": meta, "errors": [], "warnings": [], "jobs": jobs}), "alps")
    assert result.problems == [] and result.warnings == []
    assert (result.data_parser, result.slurm_version, result.format) == ("v0.0.39", "23.02.8", "data_parser v0.0.39, Slurm 23.02.8")  # the release, as Slurm spells it
    assert [(job.job_id, job.exit_code, job.signal) for job in result.jobs] == [(1, 0, None), (2, 3, None), (3, None, 9)]
    assert result.jobs[1].time_limit_minutes == 60 and result.jobs[1].node_list == ("nid000001", "nid000002")


def test_v0039_sacct_signals_and_step_ids_given_as_objects():
    def job(job_id, state, code, steps):
        return {"account": "a-llm01", "allocation_nodes": 2, "array": {"job_id": 0, "task_id": wrapped(0), "task": ""},
                "cluster": "alps", "comment": {"administrator": "", "job": "", "system": ""}, "exit_code": code,
                "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}}, "job_id": job_id,
                "name": "train", "nodes": "nid[000001-000002]", "partition": "normal", "qos": "normal",
                "state": {"current": state, "reason": "None"}, "steps": steps, "submit_line": "sbatch train.sh",
                "time": {"elapsed": 60, "end": 1_700_000_060, "start": 1_700_000_000, "submission": 1_699_999_000,
                         "limit": wrapped(30), "suspended": 0},
                "tres": {"allocated": [{"type": "gres", "name": "gpu", "id": 1001, "count": 8}], "requested": []},
                "user": "alice", "working_directory": "/users/alice"}

    def step(job_id, step_id, state, code, component=None):
        ident = {"job_id": job_id, "step_id": step_id, **({"step_het_component": component} if component is not None else {})}
        return {"exit_code": code, "nodes": {"count": 1, "range": "nid000001"}, "state": state, "step": {"id": ident, "name": step_id},
                "tasks": {"count": 4}, "time": {"elapsed": 5, "end": 1_700_000_050, "start": 1_700_000_010}}

    killed = {"status": "SIGNALED", "return_code": -127, "signal": {"signal_id": 9, "name": "Killed"}}
    success = {"status": "SUCCESS", "return_code": 0}
    jobs = [job(7, "CANCELLED", killed, [step(7, "batch", "CANCELLED", killed), step(7, "0", "COMPLETED", success, component=1)]),
            job(8, "COMPLETED", success, []), job(9, "FAILED", success, [])]
    result = parse_sacct(json.dumps({"meta": {**META_0039_CLI, "command": ["sacct", "--json"]}, "jobs": jobs}), "alps")
    assert result.problems == [] and result.data_parser == "v0.0.39"
    killed_job, completed, failed = result.jobs
    assert (killed_job.exit_code, killed_job.signal, killed_job.time_limit_minutes, killed_job.gpus) == (None, 9, 30, 8)
    assert [(s.step_id, s.state, s.exit_code) for s in killed_job.steps] == [("batch", "CANCELLED", None), ("0+1", "COMPLETED", 0)]
    # v0.0.39 writes every normal exit as SUCCESS 0 (exit 3 included): a zero beside FAILED is no evidence.
    assert (completed.exit_code, failed.exit_code) == (0, None)


# ---------------------------------------------------------------------------------------------
# Which version a document is, and one it does not know
# ---------------------------------------------------------------------------------------------
def test_the_version_is_read_from_every_place_slurm_writes_it(slurm_data):
    captured = parse_sacct((slurm_data / "sacct_finished.json").read_text(), "testcluster")
    assert (captured.data_parser, captured.warnings) == ("v0.0.38", [])  # 22.05: only the plugin type says it
    rest = json.dumps({"meta": {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld",
                                           "data_parser": "data_parser/v0.0.42", "accounting_storage": "accounting_storage/slurmdbd"}},
                       "jobs": []})
    assert parse_squeue(rest, "alps").data_parser == "v0.0.42"


@pytest.mark.django_db
def test_an_unknown_version_is_read_as_far_as_its_shapes_allow_with_one_warning():
    from apps.jobs.models import Cluster
    from apps.jobs.services import cluster_sync

    job = squeue_job("v0.0.45", complex_mode=False)
    raw = document("v0.0.46", job, "squeue", False)
    result = parse_squeue(raw, "alps")
    assert result.problems == [] and [j.job_id for j in result.jobs] == [job["job_id"]] and result.jobs[0].exit_code == 3
    assert len(result.warnings) == 1 and "data_parser v0.0.46" in result.warnings[0]
    cluster = Cluster.objects.create(name="alps")
    outputs = {"squeue": raw, "sacct": document("v0.0.45", sacct_job("v0.0.45", False), "sacct", False)}
    counts = cluster_sync(cluster, run=lambda args, timeout: outputs[args[0]])
    cluster.refresh_from_db()
    assert counts["squeue"]["format"] == "data_parser v0.0.46, Slurm 25.05.2"
    assert counts["sacct"]["format"] == "data_parser v0.0.45, Slurm 25.05.2"
    assert cluster.last_sync_message.count("v0.0.46") == 1 and "squeue: data_parser v0.0.46 is not one" in cluster.last_sync_message

