"""Demo part: service-plane namespaces of the demo researcher's two teams, in different states.

Everything goes through the real workflow (check, envelope, approval, commit to the local GitOps
repository under the data directory, teardown), so the repository's history is real. Only Argo CD
is not there: the demo records, through the same parser, what Argo CD would have answered for each
namespace (synced and healthy, still rolling out, a failed sync), and says so in the status.

* <team1>-mlflow (dev): ready; later given more memory (a day-2 change with its diff);
* <team1>-chat (staging): Open WebUI on one GH200, still syncing;
* <team1>-scratch: torn down and archived;
* <team2>-ray (dev): a Ray cluster on two H100, ready;
* <team2>-vllm (staging): a vLLM server whose sync failed on the quota;
* <team2>-serving (prod): waiting for the staff member's approval.
"""
from datetime import timedelta

from django.utils import timezone

from apps.core.demo import DemoContext, demo_part

DEMO_MARK = "[demo]"


def reset() -> None:
    from .models import ManagedNamespace, NamespaceRequest, TeamEnvelope
    from .services import repository

    demo = {"project__description__startswith": DEMO_MARK}
    repo = repository()
    for namespace in ManagedNamespace.objects.filter(**demo).select_related("project"):
        if (repo.path / ".git").exists():
            repo.remove(repo.directory(namespace.project.slurm_account, namespace.name), f"{namespace.name}: remove (demo reset)")
    NamespaceRequest.objects.filter(**demo).delete()
    ManagedNamespace.objects.filter(**demo).delete()
    TeamEnvelope.objects.filter(**demo).delete()


class _RecordedArgo:
    """What Argo CD would answer for the demo's applications, in its own JSON shape."""

    def __init__(self, answers: dict):
        self.answers = answers

    def application(self, name: str, project: str):
        from .argocd import AppStatus, parse_application

        body = self.answers.get(name)
        return parse_application(body, name) if body else AppStatus(name=name, missing=True)


def _app(name: str, sync: str, health: str, phase: str, message: str, resources=(), conditions=()) -> dict:
    now = timezone.now().replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {"metadata": {"name": name, "namespace": "argocd"},
            "status": {"sync": {"status": sync, "revision": "0" * 40}, "health": {"status": health},
                       "operationState": {"phase": phase, "message": message, "finishedAt": now if phase != "Running" else None},
                       "conditions": list(conditions), "reconciledAt": now,
                       "resources": [{"kind": kind, "name": rname, "health": {"status": rhealth, "message": rmessage}}
                                     for kind, rname, rhealth, rmessage in resources]}}


def _healthy(name: str) -> dict:
    return _app(name, "Synced", "Healthy", "Succeeded", "successfully synced (all tasks run)")


def _spec(team: str, name: str, environment: str, purpose: str, contact: str, **extra) -> dict:
    return {"team": team, "name": name, "environment": environment, "purpose": purpose, "contacts": [contact],
            "expires": (timezone.now().date() + timedelta(days=240)).isoformat(), "psa": "restricted",
            "quota": {"cpu": {"requests": "4", "limits": "8"}, "memory": {"requests": "16Gi", "limits": "32Gi"}, "gpus": [],
                      "storage": {}}, "hostnames": [], "blueprints": [], **extra}


@demo_part("namespaces", order=80, reset=reset)
def build(context: DemoContext) -> dict:
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Project

    from .choices import NamespaceRequestStatusChoices
    from .models import ManagedNamespace, TeamEnvelope
    from .services import commit, decide, inventory, refresh_status, submit, teardown_advance, teardown_request

    User = get_user_model()
    demo, staff = User.objects.get(username="demo"), User.objects.get(username="staff")
    teams = sorted(Project.objects.filter(memberships__user=demo).values_list("slurm_account", flat=True))[:2]
    if len(teams) < 2:
        return {"namespaces": 0}
    first, second = teams
    colleague = User.objects.filter(memberships__project__slurm_account=second).exclude(pk=demo.pk).order_by("username").first() or demo
    domain = inventory().ingress_domain
    envelope = TeamEnvelope.objects.create(project=Project.objects.get(slurm_account=second), cpu="96", memory="384Gi",
                                           gpus={"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 4})
    envelope.approvers.add(staff)
    mail = f"{demo.username}@{demo.email.split('@')[-1]}"

    def ship(spec, user):
        request = submit(spec, user)
        commit(request)
        request.refresh_from_db()
        return request

    def host(team, name):
        return f"{team}-{name}.{domain}"

    mlflow = _spec(first, "mlflow", "dev", "Experiment tracking for the group's pretraining runs", mail,
                   hostnames=[host(first, "mlflow")],
                   quota={"cpu": {"requests": "4", "limits": "8"}, "memory": {"requests": "16Gi", "limits": "32Gi"}, "gpus": [],
                          "storage": {"longhorn": {"size": "200Gi", "pvcs": 5}}},
                   blueprints=[{"id": "mlflow", "params": {"hostname": host(first, "mlflow"), "storage": "100Gi"}}])
    ship(mlflow, demo)
    chat = _spec(first, "chat", "staging", "Open WebUI over the group's fine-tuned checkpoints for internal evaluation", mail,
                 hostnames=[host(first, "chat")],
                 quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "64Gi", "limits": "128Gi"},
                        "gpus": [{"model": "gh200", "profile": "whole", "count": 1}],
                        "storage": {"ceph-rbd": {"size": "300Gi", "pvcs": 4}}},
                 blueprints=[{"id": "open-webui", "params": {"hostname": host(first, "chat"), "gpus": 1, "model_cache": "200Gi"}}])
    ship(chat, demo)
    scratch = _spec(first, "scratch", "dev", "Trying out the KubeRay operator", mail)
    ship(scratch, demo)
    ray = _spec(second, "ray", "dev", "Ray Tune sweeps over tokenizer settings", mail,
                quota={"cpu": {"requests": "32", "limits": "48"}, "memory": {"requests": "128Gi", "limits": "192Gi"},
                       "gpus": [{"model": "h100", "profile": "whole", "count": 2}], "storage": {"longhorn": {"size": "500Gi", "pvcs": 10}}},
                blueprints=[{"id": "ray", "params": {"workers": 2, "gpus_per_worker": 1}}])
    ship(ray, colleague)
    vllm = _spec(second, "vllm", "staging", "An OpenAI-compatible endpoint for the evaluation harness", mail,
                 hostnames=[host(second, "llm")],
                 quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "48Gi", "limits": "96Gi"},
                        "gpus": [{"model": "h100", "profile": "whole", "count": 1}, {"model": "h100", "profile": "1g.10gb", "count": 2}],
                        "storage": {}},
                 blueprints=[{"id": "inference", "params": {"hostname": host(second, "llm"), "model": "meta-llama/Llama-3.1-8B-Instruct",
                                                            "gpus": 1}}])
    ship(vllm, demo)

    # Day 2: more memory for MLflow's database.
    namespace = ManagedNamespace.objects.get(name=f"{first}-mlflow")
    bigger = {**namespace.spec, "quota": {**namespace.spec["quota"], "memory": {"requests": "24Gi", "limits": "48Gi"}}}
    change = submit(bigger, demo, namespace=namespace)
    commit(change)

    # Argo CD's answers, recorded: the tenant application (made by the ApplicationSet) and one per service.
    answers = {}
    for team, name in ((first, "mlflow"), (first, "scratch"), (second, "ray")):
        answers[f"tenant-{team}-{name}"] = _healthy(f"tenant-{team}-{name}")
    answers[f"{first}-mlflow-mlflow"] = _healthy(f"{first}-mlflow-mlflow")
    answers[f"{second}-ray-ray"] = _healthy(f"{second}-ray-ray")
    answers[f"tenant-{first}-chat"] = _healthy(f"tenant-{first}-chat")
    answers[f"{first}-chat-open-webui"] = _app(
        f"{first}-chat-open-webui", "Synced", "Progressing", "Running", "waiting for healthy state of apps/StatefulSet/open-webui-ollama",
        resources=[("StatefulSet", "open-webui-ollama", "Progressing",
                    "Waiting for 1 pods to be ready: pulling image ollama/ollama (3.1 GiB)")])
    answers[f"tenant-{second}-vllm"] = _healthy(f"tenant-{second}-vllm")
    quota_message = ('pods "vllm-deployment-router-5c9f7d8b6-x2x7q" is forbidden: exceeded quota: belvedere-quota, requested: '
                     "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1")
    answers[f"{second}-vllm-inference"] = _app(
        f"{second}-vllm-inference", "OutOfSync", "Degraded", "Failed", f"one or more objects failed to apply, reason: {quota_message}",
        resources=[("Deployment", "vllm-deployment-router", "Degraded", 'Deployment "vllm-deployment-router" exceeded its progress deadline')],
        conditions=[{"type": "SyncError", "message": f"Failed last sync attempt: {quota_message}"}])
    recorded = _RecordedArgo(answers)
    for namespace in ManagedNamespace.objects.filter(project__slurm_account__in=teams).select_related("project"):
        refresh_status(namespace, client=recorded)
        namespace.status_message = f"{namespace.status_message} (demo: Argo CD's answer is recorded, not live)"
        namespace.save(update_fields=["status_message"])

    # A teardown, all the way to the archive.
    old = ManagedNamespace.objects.get(name=f"{first}-scratch")
    teardown_request(old, demo, backup=True, reason="the KubeRay trial is over")
    teardown_advance(old, client=recorded)
    teardown_advance(old, actor=demo.username, client=_RecordedArgo({}), backup_done=True)

    # Production needs a person: this one waits for the staff member.
    serving = _spec(second, "serving", "prod", "The model endpoint the partner institutions call", mail,
                    hostnames=[host(second, "api")],
                    quota={"cpu": {"requests": "16", "limits": "32"}, "memory": {"requests": "96Gi", "limits": "192Gi"},
                           "gpus": [{"model": "h100", "profile": "whole", "count": 2}], "storage": {"ceph-rbd": {"size": "200Gi"}}},
                    blueprints=[{"id": "inference", "params": {"hostname": host(second, "api"), "model": "meta-llama/Llama-3.1-70B-Instruct",
                                                               "gpus": 2}}])
    waiting = submit(serving, colleague)
    assert waiting.status == NamespaceRequestStatusChoices.WAITING, waiting.message
    # and one the staff member turned down, with the reason the team reads
    baseline = _spec(first, "notebooks", "dev", "JupyterHub with root for apt installs", mail, psa="baseline",
                     psa_justification="users install system packages with apt")
    rejected = submit(baseline, demo)
    decide(rejected, staff, approve=False, reason="use the restricted image with conda instead of apt; ask us if a package is missing")
    return {"namespaces": ManagedNamespace.objects.filter(project__slurm_account__in=teams).count(), "teams": len(teams),
            "waiting": 1}
