"""A small seeded world for the system page's tests: the 3-group test dragonfly (24 nodes, 2 GPUs and 2 NICs
each), a researcher with one project, another project's running job, staff, saturation records and a
suspect node."""
from datetime import timedelta

from django.utils import timezone

OWN_JOB, OTHER_JOB, UNSCORED_JOB, DONE_JOB = 424201, 990099, 424202, 424203
OTHER_NAME = "secret-other-project-run"
PASSWORD = "pw-for-system-tests-1"


def build_world() -> dict:
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Project
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation
    from apps.topology.generator import DragonflyParameters, generate
    from apps.topology.services import topology_apply
    from apps.vetting.models import NodeHealth

    small = DragonflyParameters(name="small", groups=3, chassis_per_cabinet=2, switch_blades_per_chassis=2,
                                blades_per_chassis=2, nodes_per_blade=2, nics_per_node=2, gpus_per_node=2,
                                global_links_per_group_pair=1)
    topology_apply(generate(small), source="test", prune=True)
    users = {}
    for role, name, account, staff in [("researcher", "rita", "a-own", False), ("other", "otto", "a-other", False),
                                       ("staff", "sam", None, True)]:
        user = get_user_model().objects.create_user(username=name, password=PASSWORD, is_staff=staff)
        if account:
            project, _ = Project.objects.get_or_create(slurm_account=account, defaults={"title": account})
            Membership.objects.create(user=user, project=project)
        users[role] = user
    now = timezone.now()
    cluster = Cluster.objects.create(name="alps")

    def make(job_id, name, user, account, hosts, start, end=None, state="RUNNING"):
        return Job.objects.create(cluster=cluster, job_id=job_id, name=name, user_name=user, account=account, state=state,
                                  submit_time=start, start_time=start, end_time=end, node_list=hosts, node_count=len(hosts),
                                  gpus=2 * len(hosts))

    hosts = [f"nid{n:06d}" for n in range(1, 25)]
    own = make(OWN_JOB, "own-train", "rita", "a-own", hosts[0:4], now - timedelta(hours=2))
    other = make(OTHER_JOB, OTHER_NAME, "otto", "a-other", hosts[8:12], now - timedelta(hours=3))
    unscored = make(UNSCORED_JOB, "own-unscored", "rita", "a-own", hosts[16:18], now - timedelta(hours=1))
    done = make(DONE_JOB, "own-done", "rita", "a-own", hosts[4:6], now - timedelta(hours=30), now - timedelta(hours=26),
                state="COMPLETED")
    own_gpus = [{"host": h, "gpu": g, "score": 70.0, "busy": 0.9} for h in hosts[0:4] for g in (0, 1)]
    own_gpus[1].update(score=0.5, busy=0.01)  # nid000001 GPU 1 idle
    own_gpus[4]["straggler"] = "busy"  # nid000003 a straggler
    JobSaturation.objects.create(job=own, status="ready", score=61.3, compute=0.62, memory=0.45, limiter="tensor",
                                 idle_gpus=1, per_gpu=own_gpus, stragglers=[{"level": "gpu", "host": hosts[2], "gpu": 0}],
                                 computed=now - timedelta(minutes=5))
    JobSaturation.objects.create(job=other, status="ready", score=20.0, compute=0.1, memory=0.2, limiter="dram", idle_gpus=0,
                                 computed=now - timedelta(minutes=9))
    JobSaturation.objects.create(job=done, status="ready", score=90.0, compute=0.9, memory=0.3, limiter="tensor",
                                 computed=now - timedelta(hours=26))
    NodeHealth.objects.create(host=hosts[20], state="suspect", since=now)
    return {"users": users, "jobs": {"own": own, "other": other, "unscored": unscored, "done": done}, "hosts": hosts}
