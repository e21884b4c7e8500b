"""Host-bound dips named as such (issue 39, acceptance 2), on a synthetic GH200 job: its dips coincide with
saturated data-loader workers and idle GPUs; the same dips without the loader's part, and a job whose only dips
are checkpoints (classified by appmetrics' events from its markers and idle GPUs), get no host finding."""
import re
from datetime import datetime, timezone

import numpy as np
import pandas as pd

from apps.appmetrics import events, hostbound
from apps.system.host_synthetic import data_loader_job

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=timezone.utc)
HOSTS = ["nid001234", "nid001235"]


def analyse(job, step_s=10.0):
    """What the host panel does: the job's checkpoint events from appmetrics, then the host-bound check."""
    app = job["app"]
    tokens = app[app.name == "tokens_per_s"]
    markers = [{"name": "event.checkpoint", "ts": row.ts, "value": row.value}
               for row in app[app.name == "event.checkpoint"].itertuples()]
    gpu = job["gpu"][job["gpu"].field == 1002]
    idle = gpu.assign(idle=gpu.value < 0.15).groupby("ts")["idle"].mean()
    host = job["host"]
    loader = host[host.field == "host_dataloader_cpu"].groupby("ts")["value"].mean()
    evidence = events.Evidence(times=idle.index.to_numpy(dtype="datetime64[ns]"), step_s=step_s,
                               idle_share=idle.to_numpy(), markers=markers,
                               loader_cpu=loader.reindex(idle.index).to_numpy())
    found = events.find_events(tokens.ts, tokens.value, evidence)
    checkpoints = [(e["start"], e["end"]) for e in found if e["kind"] == "checkpoint"]
    iterations = app[app.name == "iteration_s"]
    return found, hostbound.host_bound(iterations.ts, iterations.value, loader.index.to_numpy(dtype="datetime64[ns]"),
                                       loader.to_numpy(), idle.index.to_numpy(dtype="datetime64[ns]"), idle.to_numpy(),
                                       step_s, checkpoints)


def test_dips_with_saturated_data_loaders_are_host_bound():
    job = data_loader_job(HOSTS, 4242, T0, 3600, stall_share=0.25, checkpoint_every_s=1600)
    found, finding = analyse(job)
    assert finding is not None, found
    assert finding["limiter"] == "host (data loading)"
    # the stalls' dips are the host's in appmetrics' own classification; the checkpoints stay checkpoints
    kinds = [e["kind"] for e in found]
    assert kinds.count("checkpoint") == len(job["markers"]) == 2 and kinds.count("host") == 3, kinds
    assert re.search(r"data-loader workers at (9\d|100) % of their CPUs and 9\d % of the GPUs idle: the GPUs wait on "
                     r"the host \(data loading\)", next(e["reason"] for e in found if e["kind"] == "host"))
    # expected share, from the synthetic run itself: slow iterations that did not hold a checkpoint
    durations = job["iteration_s"]
    slow = durations >= 1.2 * np.median(durations)
    slow[[index for _, index, _ in job["markers"]]] = False
    share = round(100 * slow.mean())
    assert share == round(100 * finding["slow_share"]) and share >= 10
    cpu = round(100 * finding["loader_cpu"])
    assert cpu >= 95 and finding["gpu_idle"] >= 0.9
    assert finding["sentence"] == (f"GPUs wait on the host: during the {share} % of iterations that ran slow, the "
                                   f"ranks' data-loader workers were at {cpu} % of their CPUs and the GPUs idle")
    assert finding["checkpoint_iterations"] == 2  # the checkpoints' own slow iterations were left to them


def test_the_same_dips_without_the_loaders_part_are_not_the_hosts():
    _, finding = analyse(data_loader_job(HOSTS, 4242, T0, 3600, stall_share=0.25, loader_bound=False))
    assert finding is None


def test_a_job_whose_dips_are_checkpoints_gets_no_host_finding():
    job = data_loader_job(HOSTS, 4243, T0, 3600, stall_share=0.0, checkpoint_every_s=600)
    # the loader is busy prefetching while the GPUs save: saturated during the checkpoints, idle GPUs too
    host = job["host"]
    during = np.zeros(len(host), dtype=bool)
    for moment, _, length in job["markers"]:
        at = pd.Timestamp(T0) + pd.Timedelta(seconds=moment)
        during |= ((host.ts >= at) & (host.ts < at + pd.Timedelta(seconds=length))).to_numpy()
    host.loc[during & (host.field == "host_dataloader_cpu").to_numpy(), "value"] = 1.0
    found, finding = analyse(job)
    assert [e["kind"] for e in found].count("checkpoint") == len(job["markers"]) == 5
    assert finding is None


def test_steady_low_saturation_with_saturated_loaders_is_named_too():
    job = data_loader_job(HOSTS, 4244, T0, 1800, stall_share=0.0)
    host = job["host"]
    host.loc[host.field == "host_dataloader_cpu", "value"] = 0.97
    gpu = job["gpu"]
    gpu.loc[(gpu.field == 1002) & (gpu.host == "nid001234"), "value"] = 0.05  # half the GPUs wait all along
    _, finding = analyse(job)
    assert finding["sentence"] == ("GPUs wait on the host: the ranks' data-loader workers were at 97 % of their CPUs "
                                   "throughout and the GPUs idle 50 % of the time")


def test_busy_loaders_with_busy_gpus_are_not_host_bound():
    job = data_loader_job(HOSTS, 4245, T0, 1800, stall_share=0.0)
    job["host"].loc[job["host"].field == "host_dataloader_cpu", "value"] = 1.0
    assert analyse(job)[1] is None
