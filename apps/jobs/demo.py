"""Demo part: two weeks of job history on the demo system, and a 128-node Megatron run going on now;
and its feeder: the jobs' timeline while the demo lives.

Everything derives from the demo's seeded RNG; times are relative to when the demo is built, so
the "running now" job is running whenever the demo is loaded.

The timeline (feeder ``jobs``, see ``apps/core/demo.py``): each running demo job ends at a planned
moment drawn from its id (``planned_end``: within its time limit; the jobs running at build time within
the demo's first four hours, a few every twenty minutes), except the demo user's Megatron run, which
keeps running. Every ``SLOT_SECONDS`` of demo time a new job may start (drawn from the slot's number:
the same slot always gives the same job, with job id ``TIMELINE_FIRST_ID + slot``) on free nodes,
never on the catalogue's silent nodes and within ``MAX_RUNNING_NODES`` running nodes (the feeder's
budget: every running job's GPUs get profiling telemetry at 10 s). Node states follow.
"""
import random
from datetime import timedelta

from apps.core.demo import DemoContext, FeedContext, demo_feeder, demo_part

from .choices import ClusterSyncModeChoices, JobStateChoices
from .models import Cluster, Job, JobStep, node_search_text

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
FINAL_STATES = [(JobStateChoices.COMPLETED, 0.66), (JobStateChoices.FAILED, 0.13), (JobStateChoices.CANCELLED, 0.11),
                (JobStateChoices.TIMEOUT, 0.06), (JobStateChoices.OUT_OF_MEMORY, 0.02), (JobStateChoices.NODE_FAIL, 0.02)]
ENVIRONMENTS = ["pytorch-24.10", "megatron-lm-core", "jax-0.4", "ngc-pytorch-25.01"]
MEGATRON_NAME = "megatron-gpt-175b-pretrain"

# The timeline
TIMELINE_FIRST_ID = 1_300_000
SLOT_SECONDS = 300
START_CHANCE = 0.8
MAX_RUNNING_NODES = 480
TIMELINE_KINDS = [  # as JOB_KINDS, smaller: the feeder's budget goes to the jobs already running
    ("pretrain-{model}", [8, 16, 32], 0.2),
    ("finetune-{model}", [1, 2, 4, 8], 0.35),
    ("eval-{model}", [1, 1, 2], 0.2),
    ("data-prep-{shard}", [1, 2], 0.15),
    ("profile-nsys-{model}", [1, 2, 4], 0.10),
]
TIMELINE_LIMITS = [30, 60, 90, 120]  # minutes: a timeline job ends within the hour or two it is watched
DEMO_USER_SHARE = 0.2  # the demo researcher sees new jobs of their own
BUILT_JOBS_END_MINUTES = 240  # the jobs running at build time end within the demo's first four hours


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
    users = [u for u in context.shared.get("users", []) if u not in {"staff"}]
    memberships = context.shared.get("memberships", {})
    hostnames = context.shared.get("hostnames") or []
    if not users or not hostnames:
        context.say("  jobs         skipped: needs the accounts and topology parts")
        return {}
    from apps.topology.models import Node, NodeStateChoices

    cluster = Cluster.objects.create(name=DEMO_CLUSTER, title="[demo] Alps GH200 partition", sync_mode=ClusterSyncModeChoices.MODE_PUSH)
    # A job running now runs on a node that is up (the topology part took some down); finished ones ran anywhere.
    down = set(Node.objects.filter(state=NodeStateChoices.STATE_DOWN).values_list("hostname", flat=True))
    history = _History(context.rng, context.now, cluster, hostnames, users, memberships, down)
    for _ in range(HISTORY_JOBS):
        history.add_job()
    megatron_id = history.add_megatron_run()
    context.shared["megatron_job"] = (DEMO_CLUSTER, megatron_id)
    pks = _store(cluster, history.jobs, history.steps)
    Node.objects.filter(hostname__in=history.busy_now, state=NodeStateChoices.STATE_IDLE).update(state=NodeStateChoices.STATE_ALLOCATED)
    context.feed_memory["keep_running"] = [pks[megatron_id]]
    context.feed_memory["users"] = users
    context.feed_memory["accounts"] = {user: sorted(memberships.get(user) or ["a-eval12"]) for user in users}
    states = {}
    for job in history.jobs:
        states[job.state] = states.get(job.state, 0) + 1
    return {"jobs": len(history.jobs), **{state.lower(): count for state, count in sorted(states.items())}}


class _History:
    """Two weeks of jobs drawn one after another from the demo's RNG (the order of the draws is the
    data: keep it), then the Megatron run on nodes left free."""

    def __init__(self, rng, now, cluster: Cluster, hostnames: list[str], users: list[str], memberships: dict, down: set[str]):
        self.rng, self.now, self.cluster = rng, now, cluster
        self.hostnames, self.users, self.memberships, self.down = hostnames, users, memberships, down
        self.all_nodes = set(hostnames)
        self.busy_now: set[str] = set()
        self.jobs: list[Job] = []
        self.steps: list[tuple] = []  # (job id, step id, start, end, state, nodes, tasks)
        self.job_id = FIRST_JOB_ID

    def account_of(self, user: str) -> str:
        accounts = self.memberships.get(user) or ["a-eval12"]
        return self.rng.choice(sorted(accounts))

    def _timing(self):
        """(submit, start, end, limit): finished two weeks ago to now, or in the live queue."""
        rng, now = self.rng, self.now
        submit = now - timedelta(minutes=rng.randrange(30, 14 * 24 * 60))
        wait = timedelta(minutes=int(rng.expovariate(1 / 25)))
        limit = rng.choice([60, 240, 720, 1440])
        runtime = timedelta(minutes=min(limit, int(rng.expovariate(1 / (limit / 3))) + 2))
        if rng.random() < 0.07:  # submitted in the last hours and not done yet: the live queue
            submit = now - timedelta(minutes=rng.randrange(5, 600))
            wait = timedelta(minutes=rng.randrange(0, 700))
            runtime = timedelta(minutes=limit)
        return submit, submit + wait, submit + wait + runtime, limit

    def _state(self, start, end, limit: int):
        """(state, start, end): a final state drawn for a job that is over, running or pending otherwise."""
        state = _weighted(self.rng, FINAL_STATES)
        if end > self.now:  # still going
            state = JobStateChoices.RUNNING if start <= self.now else JobStateChoices.PENDING
        if state == JobStateChoices.TIMEOUT:
            end = start + timedelta(minutes=limit)
        if state == JobStateChoices.PENDING:
            start = end = None
        elif state == JobStateChoices.RUNNING:
            end = None
        return state, start, end

    def add_job(self) -> None:
        """One submission of the history: a job, or an array of them."""
        rng = self.rng
        kind = _weighted(rng, [(k, k[2]) for k in JOB_KINDS])
        name = kind[0].format(model=rng.choice(MODELS), shard=rng.randrange(1000))
        user = rng.choice(self.users)
        node_count = rng.choice(kind[1])
        submit, start, end, limit = self._timing()
        state, start, end = self._state(start, end, limit)
        array_size = rng.choice([0] * 9 + [4, 8, 16]) if kind[0].startswith(("eval", "data")) else 0
        free = self.all_nodes - self.busy_now - self.down if state == JobStateChoices.RUNNING else self.all_nodes
        if state == JobStateChoices.RUNNING and len(free) < node_count * max(1, array_size) + MEGATRON_NODES:
            state, start, end = JobStateChoices.PENDING, None, None  # the machine is full: it waits, as it would
        array_parent = self.job_id if array_size else None
        for task in range(array_size) if array_size else [None]:
            nodes = _allocate(rng, self.hostnames, free, node_count) if state != JobStateChoices.PENDING else []
            if state == JobStateChoices.RUNNING:
                self.busy_now.update(nodes)
            exit_code = {JobStateChoices.COMPLETED: 0, JobStateChoices.FAILED: rng.choice([1, 1, 2, 137]), JobStateChoices.OUT_OF_MEMORY: 0,
                         JobStateChoices.NODE_FAIL: 0}.get(state)
            environment = rng.choice(ENVIRONMENTS)
            self.jobs.append(Job(
                cluster=self.cluster, job_id=self.job_id, name=name, user_name=user, account=self.account_of(user), partition="normal",
                qos="normal", state=state, state_reason="Priority" if state == JobStateChoices.PENDING else "",
                array_job_id=array_parent, array_task_id=task, submit_time=submit, start_time=start, end_time=end,
                time_limit_minutes=limit, nodes=_hostlist(nodes) if nodes else "", node_list=nodes, node_search=node_search_text(nodes),
                node_count=node_count, tasks=node_count * 4, gpus=node_count * 4, exit_code=exit_code,
                working_directory=f"/capstor/scratch/cscs/{user}/{name}", environment=environment,
                command=f"sbatch --nodes={node_count} --environment={environment} {name}.sbatch", source="demo",
            ))
            if start:
                step_state = state if end else JobStateChoices.RUNNING
                self.steps.append((self.job_id, "batch", start, end, step_state, nodes[:1], 1))
                self.steps.append((self.job_id, "0", start + timedelta(seconds=40), end, step_state, nodes, node_count * 4))
            self.job_id += 1

    def add_megatron_run(self) -> int:
        """The flagship: a Megatron-LM pretraining run on 128 nodes (512 GH200), six hours in; its job id."""
        user = "demo"
        account = sorted(self.memberships.get("demo") or ["a-llm01"])[0]
        start = self.now - timedelta(hours=6, minutes=12)
        free = set(self.all_nodes - self.busy_now - self.down)
        group_size = 112
        block_start = 3 * group_size  # group 3, then spilling into group 4: a realistic 2-group allocation
        nodes = sorted([h for h in self.hostnames[block_start:] if h in free][:MEGATRON_NODES])
        self.busy_now.update(nodes)
        command = ("srun --environment=megatron-lm-core python pretrain_gpt.py --tensor-model-parallel-size 4 "
                   "--pipeline-model-parallel-size 8 --num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
                   "--micro-batch-size 1 --global-batch-size 1536 --seq-length 4096 --bf16")
        self.jobs.append(Job(
            cluster=self.cluster, job_id=self.job_id, name=MEGATRON_NAME, user_name=user, account=account,
            partition="normal", qos="normal", state=JobStateChoices.RUNNING, submit_time=start - timedelta(minutes=47), start_time=start,
            time_limit_minutes=24 * 60, nodes=_hostlist(nodes), node_list=nodes, node_search=node_search_text(nodes),
            node_count=len(nodes), tasks=len(nodes) * 4, gpus=len(nodes) * 4, working_directory=f"/capstor/scratch/cscs/{user}/gpt-175b",
            environment="megatron-lm-core", command=command, source="demo",
        ))
        self.steps.append((self.job_id, "batch", start, None, JobStateChoices.RUNNING, nodes[:1], 1))
        self.steps.append((self.job_id, "0", start + timedelta(seconds=55), None, JobStateChoices.RUNNING, nodes, len(nodes) * 4))
        return self.job_id


def _store(cluster: Cluster, jobs: list[Job], steps: list[tuple]) -> dict[int, int]:
    """Write the jobs and their steps; job id -> pk."""
    Job.objects.bulk_create(jobs, batch_size=1000)
    pks = dict(Job.objects.filter(cluster=cluster).values_list("job_id", "pk"))
    JobStep.objects.bulk_create(
        [JobStep(job_id=pks[jid], step_id=step, start_time=s, end_time=e, state=st, nodes=_hostlist(n) if n else "", tasks=t)
         for jid, step, s, e, st, n, t in steps],
        batch_size=2000,
    )
    return pks


# ---------------------------------------------------------------------------------------------
# The timeline while the demo lives


def planned_end(job: Job, origin, seed: int):
    """When a running demo job ends, drawn from its id: a job running when the demo was built ends within the
    demo's first ``BUILT_JOBS_END_MINUTES`` (about one every few minutes), a job the timeline started within
    its time limit; at its limit it times out. (end, final state)."""
    rng = random.Random(f"{seed}:end:{job.job_id}")
    limit_end = job.start_time + timedelta(minutes=job.time_limit_minutes or 60)
    if job.start_time < origin:
        end = origin + timedelta(minutes=rng.uniform(5, BUILT_JOBS_END_MINUTES))
    else:
        end = job.start_time + (limit_end - job.start_time) * rng.uniform(0.35, 1.05)
    if end >= limit_end:
        return max(limit_end, origin + timedelta(minutes=1)).replace(microsecond=0), JobStateChoices.TIMEOUT
    state = JobStateChoices.FAILED if rng.random() < 0.08 else JobStateChoices.COMPLETED
    return end.replace(microsecond=0), state


def _end_jobs(context: FeedContext, cluster: Cluster) -> tuple[list[int], set[str]]:
    keep = set(context.memory.get("keep_running") or [])
    ended, freed = [], set()
    for job in Job.objects.filter(cluster=cluster, source="demo", state=JobStateChoices.RUNNING).exclude(pk__in=keep):
        end, state = planned_end(job, context.origin, context.seed)
        if end > context.end:
            continue
        job.state, job.end_time = state, end
        job.exit_code = {JobStateChoices.COMPLETED: 0, JobStateChoices.FAILED: 1}.get(state)
        job.save(update_fields=["state", "end_time", "exit_code", "modified"])
        JobStep.objects.filter(job=job, end_time=None).update(end_time=end, state=state)
        ended.append(job.pk)
        freed.update(job.node_list or [])
    return ended, freed


def _start_jobs(context: FeedContext, cluster: Cluster) -> tuple[list[int], set[str]]:
    from apps.topology.models import Node, NodeStateChoices

    first = int((context.start - context.origin).total_seconds() // SLOT_SECONDS) + 1
    last = int((context.end - context.origin).total_seconds() // SLOT_SECONDS)
    if last < first:
        return [], set()
    running = Job.objects.filter(cluster=cluster, state=JobStateChoices.RUNNING)
    busy = {host for nodes in running.values_list("node_list", flat=True) for host in nodes or []}
    silent = set(context.memory.get("silent_nodes") or [])
    hostnames = sorted(Node.objects.values_list("hostname", flat=True))
    free = set(Node.objects.filter(state=NodeStateChoices.STATE_IDLE).values_list("hostname", flat=True)) - busy - silent
    users = context.memory.get("users") or ["demo"]
    accounts = context.memory.get("accounts") or {}
    started, taken = [], set()
    existing = set(Job.objects.filter(cluster=cluster, job_id__gte=TIMELINE_FIRST_ID + first,
                                      job_id__lte=TIMELINE_FIRST_ID + last).values_list("job_id", flat=True))
    for slot in range(max(first, 1), last + 1):
        job_id = TIMELINE_FIRST_ID + slot
        rng = random.Random(f"{context.seed}:slot:{slot}")
        if job_id in existing or rng.random() > START_CHANCE:
            continue
        kind = _weighted(rng, [(k, k[2]) for k in TIMELINE_KINDS])
        name = kind[0].format(model=rng.choice(MODELS), shard=rng.randrange(1000))
        user = "demo" if "demo" in users and rng.random() < DEMO_USER_SHARE else rng.choice(users)
        count = rng.choice(kind[1])
        if len(busy) + count > MAX_RUNNING_NODES or len(free) < count * 4:
            continue  # the machine (or the feeder's budget) is full: this slot's job does not start
        nodes = _allocate(rng, hostnames, free, count)
        start = context.origin + timedelta(seconds=slot * SLOT_SECONDS)
        limit = rng.choice(TIMELINE_LIMITS)
        environment = rng.choice(ENVIRONMENTS)
        account = rng.choice(accounts.get(user) or ["a-eval12"])
        job = Job.objects.create(
            cluster=cluster, job_id=job_id, name=name, user_name=user, account=account, partition="normal", qos="normal",
            state=JobStateChoices.RUNNING, submit_time=start - timedelta(minutes=int(rng.expovariate(1 / 10))),
            start_time=start, time_limit_minutes=limit, nodes=_hostlist(nodes), node_list=nodes, node_search=node_search_text(nodes),
            node_count=count, tasks=count * 4, gpus=count * 4, working_directory=f"/capstor/scratch/cscs/{user}/{name}",
            environment=environment, command=f"sbatch --nodes={count} --environment={environment} {name}.sbatch", source="demo")
        JobStep.objects.bulk_create([
            JobStep(job=job, step_id="batch", start_time=start, state=JobStateChoices.RUNNING, nodes=_hostlist(nodes[:1]), tasks=1),
            JobStep(job=job, step_id="0", start_time=start + timedelta(seconds=40), state=JobStateChoices.RUNNING, nodes=_hostlist(nodes),
                    tasks=count * 4)])
        started.append(job.pk)
        busy.update(nodes)
        free.difference_update(nodes)
        taken.update(nodes)
    return started, taken


@demo_feeder("jobs", order=30)
def feed(context: FeedContext) -> dict:
    """Running jobs whose planned end falls in the span end; new ones start in the span's slots."""
    from apps.topology.models import Node, NodeStateChoices

    cluster = Cluster.objects.filter(name=DEMO_CLUSTER, title__startswith="[demo]").first()
    if cluster is None:
        return {"skipped": "no demo cluster"}
    ended, freed = _end_jobs(context, cluster)
    started, taken = _start_jobs(context, cluster)
    still = {host for nodes in Job.objects.filter(cluster=cluster, state=JobStateChoices.RUNNING)
             .values_list("node_list", flat=True) for host in nodes or []}
    released = freed - still
    if released:
        Node.objects.filter(hostname__in=released, state=NodeStateChoices.STATE_ALLOCATED).update(state=NodeStateChoices.STATE_IDLE)
    if taken:
        Node.objects.filter(hostname__in=taken, state=NodeStateChoices.STATE_IDLE).update(state=NodeStateChoices.STATE_ALLOCATED)
    context.shared["jobs_ended"], context.shared["jobs_started"] = ended, started
    return {"ended": len(ended), "started": len(started), "running": Job.objects.filter(cluster=cluster, state=JobStateChoices.RUNNING).count()}
