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
from dataclasses import dataclass
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
    # Directories no namespace row claims (the database was emptied, the data folder kept): the demo's next commit
    # of the same files would be "nothing to commit" and its namespaces would never show a commit.
    if (repo.path / ".git").exists():
        known = {(team, name) for team, name in ManagedNamespace.objects.values_list("project__slurm_account", "name")}
        for folder in sorted(repo.path.glob("tenants/*/namespaces/*")):
            team, name = folder.parts[-3], folder.name
            if folder.is_dir() and (team, name) not in known:
                repo.remove(repo.directory(team, name), f"{name}: remove (no namespace records it; demo reset)")
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


@dataclass
class _Teams:
    """Who the demo's namespaces belong to: the demo researcher's two teams, a colleague in the second, the staff member."""

    demo: object
    staff: object
    colleague: object
    first: str
    second: str
    mail: str
    domain: str

    def host(self, team: str, name: str) -> str:
        return f"{team}-{name}.{self.domain}"


@demo_part("namespaces", order=80, reset=reset)
def build(context: DemoContext) -> dict:
    from .models import ManagedNamespace

    teams = _teams()
    if teams is None:
        return {"namespaces": 0}
    _envelope(teams)
    _ship_services(teams)
    _day_two_change(teams)
    recorded = _RecordedArgo(_argo_answers(teams.first, teams.second))
    _refresh_statuses([teams.first, teams.second], recorded)
    _teardown(teams, recorded)
    _requests_for_staff(teams)
    return {"namespaces": ManagedNamespace.objects.filter(project__slurm_account__in=[teams.first, teams.second]).count(), "teams": 2,
            "waiting": 1}


def _teams() -> _Teams | None:
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Project

    from .services import inventory

    User = get_user_model()
    demo, staff = User.objects.get(username="demo"), User.objects.get(username="staff")
    teams = sorted(Project.objects.filter(memberships__user=demo).values_list("slurm_account", flat=True))[:2]
    if len(teams) < 2:
        return None
    first, second = teams
    colleague = User.objects.filter(memberships__project__slurm_account=second).exclude(pk=demo.pk).order_by("username").first() or demo
    return _Teams(demo, staff, colleague, first, second, mail=f"{demo.username}@{demo.email.split('@')[-1]}",
                  domain=inventory().ingress_domain)


def _envelope(teams: _Teams) -> None:
    """The second team's GPU envelope, approved by the staff member."""
    from apps.accounts.models import Project

    from .models import TeamEnvelope

    envelope = TeamEnvelope.objects.create(project=Project.objects.get(slurm_account=teams.second), cpu="96", memory="384Gi",
                                           gpus={"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 4})
    envelope.approvers.add(teams.staff)


def _ship(spec: dict, user):
    """Submit and commit a request (one that needs no person)."""
    from .services import commit, submit

    request = submit(spec, user)
    commit(request)
    request.refresh_from_db()
    return request


def _ship_services(teams: _Teams) -> None:
    """MLflow, Open WebUI and a scratch namespace for the first team; Ray and vLLM for the second."""
    first, second, mail, host = teams.first, teams.second, teams.mail, teams.host
    _ship(_spec(first, "mlflow", "dev", "Experiment tracking for the group's pretraining runs", mail,
                hostnames=[host(first, "mlflow")],
                quota={"cpu": {"requests": "4", "limits": "8"}, "memory": {"requests": "16Gi", "limits": "32Gi"}, "gpus": [],
                       "storage": {"longhorn": {"size": "200Gi", "pvcs": 5}}},
                blueprints=[{"id": "mlflow", "params": {"hostname": host(first, "mlflow"), "storage": "100Gi"}}]), teams.demo)
    _ship(_spec(first, "chat", "staging", "Open WebUI over the group's fine-tuned checkpoints for internal evaluation", mail,
                hostnames=[host(first, "chat")],
                quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "64Gi", "limits": "128Gi"},
                       "gpus": [{"model": "gh200", "profile": "whole", "count": 1}],
                       "storage": {"ceph-rbd": {"size": "300Gi", "pvcs": 4}}},
                blueprints=[{"id": "open-webui", "params": {"hostname": host(first, "chat"), "gpus": 1, "model_cache": "200Gi"}}]),
          teams.demo)
    _ship(_spec(first, "scratch", "dev", "Trying out the KubeRay operator", mail), teams.demo)
    _ship(_spec(second, "ray", "dev", "Ray Tune sweeps over tokenizer settings", mail,
                quota={"cpu": {"requests": "32", "limits": "48"}, "memory": {"requests": "128Gi", "limits": "192Gi"},
                       "gpus": [{"model": "h100", "profile": "whole", "count": 2}], "storage": {"longhorn": {"size": "500Gi", "pvcs": 10}}},
                blueprints=[{"id": "ray", "params": {"workers": 2, "gpus_per_worker": 1}}]), teams.colleague)
    _ship(_spec(second, "vllm", "staging", "An OpenAI-compatible endpoint for the evaluation harness", mail,
                hostnames=[host(second, "llm")],
                quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "48Gi", "limits": "96Gi"},
                       "gpus": [{"model": "h100", "profile": "whole", "count": 1}, {"model": "h100", "profile": "1g.10gb", "count": 2}],
                       "storage": {}},
                blueprints=[{"id": "inference", "params": {"hostname": host(second, "llm"), "model": "meta-llama/Llama-3.1-8B-Instruct",
                                                           "gpus": 1}}]), teams.demo)


def _day_two_change(teams: _Teams) -> None:
    """Day 2: more memory for MLflow's database."""
    from .models import ManagedNamespace
    from .services import commit, submit

    namespace = ManagedNamespace.objects.get(name=f"{teams.first}-mlflow")
    bigger = {**namespace.spec, "quota": {**namespace.spec["quota"], "memory": {"requests": "24Gi", "limits": "48Gi"}}}
    commit(submit(bigger, teams.demo, namespace=namespace))


def _argo_answers(first: str, second: str) -> dict:
    """Argo CD's answers, recorded: the tenant application (made by the ApplicationSet) and one per service."""
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
    return answers


def _refresh_statuses(teams: list[str], recorded: _RecordedArgo) -> None:
    from .models import ManagedNamespace
    from .services import refresh_status

    for namespace in ManagedNamespace.objects.filter(project__slurm_account__in=teams).select_related("project"):
        refresh_status(namespace, client=recorded)
        namespace.status_message = f"{namespace.status_message} (demo: Argo CD's answer is recorded, not live)"
        namespace.save(update_fields=["status_message"])


def _teardown(teams: _Teams, recorded: _RecordedArgo) -> None:
    """A teardown, all the way to the archive."""
    from .models import ManagedNamespace
    from .services import teardown_advance, teardown_request

    old = ManagedNamespace.objects.get(name=f"{teams.first}-scratch")
    teardown_request(old, teams.demo, backup=True, reason="the KubeRay trial is over", confirm=old.name)
    teardown_advance(old, client=recorded)
    teardown_advance(old, actor=teams.demo.username, client=_RecordedArgo({}), backup_done=True)


def _requests_for_staff(teams: _Teams) -> None:
    """Production needs a person: one request waits for the staff member; one they turned down, with the reason."""
    from .choices import NamespaceRequestStatusChoices
    from .services import decide, submit

    first, second, host = teams.first, teams.second, teams.host
    serving = _spec(second, "serving", "prod", "The model endpoint the partner institutions call", teams.mail,
                    hostnames=[host(second, "api")],
                    quota={"cpu": {"requests": "16", "limits": "32"}, "memory": {"requests": "96Gi", "limits": "192Gi"},
                           "gpus": [{"model": "h100", "profile": "whole", "count": 2}], "storage": {"ceph-rbd": {"size": "200Gi"}}},
                    blueprints=[{"id": "inference", "params": {"hostname": host(second, "api"), "model": "meta-llama/Llama-3.1-70B-Instruct",
                                                               "gpus": 2}}])
    waiting = submit(serving, teams.colleague)
    assert waiting.status == NamespaceRequestStatusChoices.WAITING, waiting.message
    baseline = _spec(first, "notebooks", "dev", "JupyterHub with root for apt installs", teams.mail, psa="baseline",
                     psa_justification="users install system packages with apt")
    rejected = submit(baseline, teams.demo)
    decide(rejected, teams.staff, approve=False, reason="use the restricted image with conda instead of apt; ask us if a package is missing")
