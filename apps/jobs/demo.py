"""Demo part: two weeks of job history on the demo system, and a 128-node Megatron run going on now.

Everything derives from the demo's seeded RNG; times are relative to when the demo is built, so
the "running now" job is running whenever the demo is loaded.
"""
from datetime import timedelta

from django.utils import timezone

from apps.core.demo import DemoContext, demo_part

from .models import Cluster, Job, JobStep, SyncModeChoices, node_search_text

DEMO_CLUSTER = "alps"
FIRST_JOB_ID = 1_200_000
HISTORY_JOBS = 520
MEGATRON_NODES = 128

JOB_KINDS = [
    # name pattern, node choices, share
    ("pretrain-{model}", [8, 16, 32, 64, 128], 0.25),
    ("finetune-{model}", [1, 2, 4, 8], 0.30),
    ("eval-{model}", [1, 1, 2], 0.20),
    ("data-prep-{shard}", [1, 2], 0.15),
    ("profile-nsys-{model}", [1, 2, 4], 0.10),
]
MODELS = ["llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt-1.3b", "gpt-13b", "vit-h", "climax", "esm2", "aurora-wx", "swiss-llm-8b"]
FINAL_STATES = [("COMPLETED", 0.66), ("FAILED", 0.13), ("CANCELLED", 0.11), ("TIMEOUT", 0.06), ("OUT_OF_MEMORY", 0.02), ("NODE_FAIL", 0.02)]
ENVIRONMENTS = ["pytorch-24.10", "megatron-lm-core", "jax-0.4", "ngc-pytorch-25.01"]


def reset() -> None:
    Cluster.objects.filter(name=DEMO_CLUSTER, title__startswith="[demo]").delete()


def _weighted(rng, choices):
    point, total = rng.random(), 0.0
    for value, weight in choices:
        total += weight
        if point <= total:
            return value
    return choices[-1][0]


def _allocate(rng, hostnames: list[str], free: set[str], count: int) -> list[str]:
    """Mostly contiguous blocks, like a scheduler on a busy machine: start somewhere, take free nodes."""
    start = rng.randrange(len(hostnames))
    chosen = []
    position = start
    while len(chosen) < count:
        hostname = hostnames[position % len(hostnames)]
        if hostname in free:
            chosen.append(hostname)
        position += 1 if rng.random() > 0.1 else rng.randrange(1, 200)
    return sorted(chosen)


def _hostlist(nodes: list[str]) -> str:
    import hostlist

    return hostlist.collect_hostlist(nodes)


@demo_part("jobs", order=30, reset=reset)
def build(context: DemoContext) -> dict:
    rng = context.rng
    users = [u for u in context.shared.get("users", []) if u not in {"staff"}]
    memberships = context.shared.get("memberships", {})
    hostnames = context.shared.get("hostnames") or []
    if not users or not hostnames:
        context.say("  jobs         skipped: needs the accounts and topology parts")
        return {}
    cluster = Cluster.objects.create(name=DEMO_CLUSTER, title="[demo] Alps GH200 partition", sync_mode=SyncModeChoices.MODE_PUSH)
    now = timezone.now().replace(microsecond=0)
    jobs, steps = [], []
    job_id = FIRST_JOB_ID
    all_nodes = set(hostnames)
    busy_now: set[str] = set()

    def account_of(user: str) -> str:
        accounts = memberships.get(user) or ["a-eval12"]
        return rng.choice(sorted(accounts))

    for _ in range(HISTORY_JOBS):
        kind = _weighted(rng, [(k, k[2]) for k in JOB_KINDS])
        name = kind[0].format(model=rng.choice(MODELS), shard=rng.randrange(1000))
        user = rng.choice(users)
        node_count = rng.choice(kind[1])
        submit = now - timedelta(minutes=rng.randrange(30, 14 * 24 * 60))
        wait = timedelta(minutes=int(rng.expovariate(1 / 25)))
        limit = rng.choice([60, 240, 720, 1440])
        runtime = timedelta(minutes=min(limit, int(rng.expovariate(1 / (limit / 3))) + 2))
        if rng.random() < 0.07:  # submitted in the last hours and not done yet: the live queue
            submit = now - timedelta(minutes=rng.randrange(5, 600))
            wait = timedelta(minutes=rng.randrange(0, 700))
            runtime = timedelta(minutes=limit)
        start, end = submit + wait, submit + wait + runtime
        state = _weighted(rng, FINAL_STATES)
        array_size = rng.choice([0] * 9 + [4, 8, 16]) if kind[0].startswith(("eval", "data")) else 0
        if end > now:  # still going
            state = "RUNNING" if start <= now else "PENDING"
        if state == "TIMEOUT":
            end = start + timedelta(minutes=limit)
        if state == "PENDING":
            start = end = None
        elif state == "RUNNING":
            end = None
        free = all_nodes - busy_now if state == "RUNNING" else all_nodes
        if state == "RUNNING" and len(free) < node_count * max(1, array_size) + MEGATRON_NODES:
            state, start, end = "PENDING", None, None  # the machine is full: it waits, as it would
        task_ids = range(array_size) if array_size else [None]
        array_parent = job_id if array_size else None
        for task in task_ids:
            nodes = _allocate(rng, hostnames, free, node_count) if state != "PENDING" else []
            if state == "RUNNING":
                busy_now.update(nodes)
            exit_code = {"COMPLETED": 0, "FAILED": rng.choice([1, 1, 2, 137]), "OUT_OF_MEMORY": 0, "NODE_FAIL": 0}.get(state)
            environment = rng.choice(ENVIRONMENTS)
            job = Job(
                cluster=cluster, job_id=job_id, name=name, user_name=user, account=account_of(user), partition="normal",
                qos="normal", state=state, state_reason="Priority" if state == "PENDING" else "",
                array_job_id=array_parent, array_task_id=task, submit_time=submit, start_time=start, end_time=end,
                time_limit_minutes=limit, nodes=_hostlist(nodes) if nodes else "", node_list=nodes, node_search=node_search_text(nodes),
                node_count=node_count, tasks=node_count * 4, gpus=node_count * 4, exit_code=exit_code,
                working_directory=f"/capstor/scratch/cscs/{user}/{name}", environment=environment,
                command=f"sbatch --nodes={node_count} --environment={environment} {name}.sbatch", source="demo",
            )
            jobs.append(job)
            if start:
                steps.append((job_id, "batch", start, end, state if end else "RUNNING", nodes[:1], 1))
                steps.append((job_id, "0", start + timedelta(seconds=40), end, state if end else "RUNNING", nodes, node_count * 4))
            job_id += 1

    # The flagship: a Megatron-LM pretraining run on 128 nodes (512 GH200), six hours in.
    megatron_user = "demo"
    megatron_account = sorted(memberships.get("demo") or ["a-llm01"])[0]
    start = now - timedelta(hours=6, minutes=12)
    free = sorted(all_nodes - busy_now)
    group_size = 112
    block_start = 3 * group_size  # group 3, then spilling into group 4: a realistic 2-group allocation
    candidates = [h for h in hostnames[block_start:] if h in set(free)]
    nodes = sorted(candidates[:MEGATRON_NODES])
    busy_now.update(nodes)
    command = ("srun --environment=megatron-lm-core python pretrain_gpt.py --tensor-model-parallel-size 4 "
               "--pipeline-model-parallel-size 8 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
               "--micro-batch-size 1 --global-batch-size 1536 --seq-length 4096 --bf16")
    jobs.append(Job(
        cluster=cluster, job_id=job_id, name="megatron-gpt-175b-pretrain", user_name=megatron_user, account=megatron_account,
        partition="normal", qos="normal", state="RUNNING", submit_time=start - timedelta(minutes=47), start_time=start,
        time_limit_minutes=24 * 60, nodes=_hostlist(nodes), node_list=nodes, node_search=node_search_text(nodes),
        node_count=len(nodes), tasks=len(nodes) * 4, gpus=len(nodes) * 4, working_directory=f"/capstor/scratch/cscs/{megatron_user}/gpt-175b",
        environment="megatron-lm-core", command=command, source="demo",
    ))
    steps.append((job_id, "batch", start, None, "RUNNING", nodes[:1], 1))
    steps.append((job_id, "0", start + timedelta(seconds=55), None, "RUNNING", nodes, len(nodes) * 4))
    context.shared["megatron_job"] = (DEMO_CLUSTER, job_id)

    Job.objects.bulk_create(jobs, batch_size=1000)
    pks = dict(Job.objects.filter(cluster=cluster).values_list("job_id", "pk"))
    JobStep.objects.bulk_create(
        [JobStep(job_id=pks[jid], step_id=step, start_time=s, end_time=e, state=st, nodes=_hostlist(n) if n else "", tasks=t)
         for jid, step, s, e, st, n, t in steps],
        batch_size=2000,
    )
    from apps.topology.models import Node, NodeStateChoices

    Node.objects.filter(hostname__in=busy_now, state=NodeStateChoices.STATE_IDLE).update(state=NodeStateChoices.STATE_ALLOCATED)
    states = {}
    for job in jobs:
        states[job.state] = states.get(job.state, 0) + 1
    return {"jobs": len(jobs), **{state.lower(): count for state, count in sorted(states.items())}}
