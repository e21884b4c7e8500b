"""Jobs: ingest 10,000 jobs from squeue-format JSON, then ingest them again (no duplicates)."""
import copy
import json
import sqlite3
from pathlib import Path

from bench.common import Figure, median_seconds

DATA = Path(__file__).resolve().parent.parent / "tests" / "jobs" / "data" / "squeue_mixed.json"
JOBS = 10_000


def synthetic_squeue(count: int) -> str:
    """``count`` jobs shaped exactly like a real squeue --json entry (captured on our test cluster)."""
    document = json.loads(DATA.read_text())
    template = next(job for job in document["jobs"] if job.get("job_state") == "RUNNING" or job.get("job_state") == ["RUNNING"])
    jobs = []
    for index in range(count):
        job = copy.deepcopy(template)
        job["job_id"] = 5_000_000 + index
        job["name"] = f"bench-{index}"
        job["user_name"] = f"user{index % 97}"
        job["account"] = f"a-bench{index % 13:02d}"
        first = 1 + (index * 7) % 2600
        job["nodes"] = f"nid[{first:06d}-{first + index % 64:06d}]"
        job["node_count"] = index % 64 + 1
        jobs.append(job)
    document["jobs"] = jobs
    return json.dumps(document)


def run(workdir: Path) -> list[Figure]:
    from django.conf import settings

    from apps.jobs.models import Cluster, Job
    from apps.jobs.services import jobs_upsert
    from apps.jobs.slurm_json import parse_squeue

    text = synthetic_squeue(JOBS)
    cluster, _ = Cluster.objects.get_or_create(name="bench")

    def clear():
        Job.objects.filter(cluster=cluster).delete()

    def ingest():
        result = parse_squeue(text, "bench")
        jobs_upsert(cluster, result.jobs, source="squeue")

    first = median_seconds(ingest, repeats=3, setup=clear)
    ingest()
    again = median_seconds(ingest, repeats=3)
    stored = Job.objects.filter(cluster=cluster).count()
    assert stored == JOBS, f"re-ingest left {stored} jobs, expected {JOBS}"

    floor_db = workdir / "jobs-floor.sqlite3"

    def floor():
        rows = [(job["job_id"], job["name"], job["user_name"], job["account"], job["nodes"], json.dumps(job))
                for job in json.loads(text)["jobs"]]
        floor_db.unlink(missing_ok=True)
        connection = sqlite3.connect(floor_db)
        with connection:
            connection.execute("CREATE TABLE job (id INTEGER PRIMARY KEY, name, user, account, nodes, raw)")
            connection.executemany("INSERT INTO job VALUES (?, ?, ?, ?, ?, ?)", rows)
        connection.close()

    floor_seconds = median_seconds(floor, repeats=3)
    size_mb = len(text) / 1e6
    Job.objects.filter(cluster=cluster).delete()
    return [
        Figure(f"ingest {JOBS:,} jobs (squeue JSON, new)", first, floor_seconds,
               f"json.loads + bare sqlite3 insert of the same {JOBS:,} jobs", f"{size_mb:.1f} MB of JSON; target <= 5 s"),
        Figure(f"re-ingest the same {JOBS:,} jobs", again, floor_seconds, "same floor",
               f"no duplicates: {stored:,} jobs stored after two ingests"),
    ]
