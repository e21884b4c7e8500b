"""Namespace pages: my team's namespaces, the request form (new or day-2 change) with its live check and
preview, a namespace's page with its history, a request's page with its diff, and the staff approval queue."""
import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.views import View
from django.views.generic import TemplateView

from .api.views import inventory_document
from .choices import ManagedNamespaceStateChoices, NamespaceRequestStatusChoices
from .forms import GPU_ROWS, form_field, form_from_spec, spec_from_form, split_list
from .render import to_yaml
from .selectors import approval_queue, namespace_get_for_user, namespaces_for_user, requests_for_user, teams_for_user
from .services import (
    NotAllowed,
    RequestRefused,
    allocated_now,
    decide,
    inventory,
    preview,
    submit,
    teardown_advance,
    teardown_request,
)
from .spec import namespace_name


class NamespaceIndexView(TemplateView):
    template_name = "namespaces/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        under_way = [NamespaceRequestStatusChoices.WAITING, NamespaceRequestStatusChoices.APPROVED, NamespaceRequestStatusChoices.SYNCING]
        if settings.ARGOCD_URL:  # without Argo CD a committed request is as far as it goes
            under_way.append(NamespaceRequestStatusChoices.COMMITTED)
        context.update(namespaces=list(namespaces_for_user(user)), teams=teams_for_user(user),
                       pending=list(requests_for_user(user).filter(status__in=under_way)[:50]),
                       queue=approval_queue(user) if user.is_staff else [],
                       archived=list(namespaces_for_user(user, archived=True).filter(state=ManagedNamespaceStateChoices.ARCHIVED)[:20]))
        return context


class RequestFormView(TemplateView):
    """New namespace, or (``?namespace=<name>``) a change of one: the same form, pre-filled."""

    template_name = "namespaces/form.html"

    def _target(self):
        name = self.request.GET.get("namespace") or self.request.POST.get("change_of")
        if not name:
            return None
        namespace = namespace_get_for_user(self.request.user, name)
        if namespace is None or namespace.state == ManagedNamespaceStateChoices.ARCHIVED:
            raise Http404("no such namespace")
        return namespace

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        namespace = self._target()
        inv = inventory()
        values = kwargs.get("values")
        if values is None:
            values = form_from_spec(namespace.spec, inv) if namespace else {"environment": "dev", "psa": "restricted",
                                                                             "team": (teams_for_user(self.request.user) or [""])[0]}
        errors = kwargs.get("errors", {})
        context.update(namespace=namespace, values=values, errors=errors, inventory=inv, inventory_json=inventory_document(allocated_now(exclude=namespace)),
                       gpu_rows=form_rows(values, errors, inv),
                       teams=teams_for_user(self.request.user) or ([namespace.project.slurm_account] if namespace else []),
                       preview_url=reverse("namespaces:preview"))
        return context

    def post(self, request, *args, **kwargs):
        namespace = self._target()
        spec = spec_from_form(request.POST, inventory())
        try:
            created = submit(spec, request.user, namespace=namespace)
        except RequestRefused as exc:
            errors = {}
            for problem in exc.check.problems:
                errors.setdefault(form_field(problem.field, spec), []).append(problem.message)
            return self.render_to_response(self.get_context_data(values=request.POST.dict(), errors=errors), status=400)
        if created.status == NamespaceRequestStatusChoices.WAITING:
            messages.info(request, f"{created.number} is waiting for approval: {'; '.join(created.needs_approval)}")
        else:
            messages.success(request, f"{created.number} was approved at once (inside your team's envelope) and is being committed.")
        return HttpResponseRedirect(reverse("namespaces:request", args=[created.pk]))


def form_rows(values: dict, errors: dict, inv) -> dict:
    """The repeated parts of the form with their values and errors, so the page works without JavaScript."""
    gpus = []
    for row in range(GPU_ROWS):
        model = inv.gpu_models.get(values.get(f"gpu_model_{row}", ""))
        gpus.append({"row": row, "model": values.get(f"gpu_model_{row}", ""), "profile": values.get(f"gpu_profile_{row}", "whole"),
                     "count": values.get(f"gpu_count_{row}", ""), "profiles": model.profiles if model else ["whole"],
                     "errors": sum((errors.get(f"gpu_{part}_{row}", []) for part in ("model", "profile", "count")), [])})
    storage = [{"name": name, "label": label, "size": values.get(f"storage_{name}_size", ""), "pvcs": values.get(f"storage_{name}_pvcs", ""),
                "errors": errors.get(f"storage_{name}_size", []) + errors.get(f"storage_{name}_pvcs", [])}
               for name, label in inv.storage_classes.items()]
    hostnames = split_list(values.get("hostnames", "") or "")
    blueprints = [{"key": key, "bp": bp, "checked": bool(values.get(f"bp_{key}")), "errors": errors.get(f"bp_{key}", []), "hostnames": hostnames,
                   "params": [{"name": name, "rule": rule, "label": rule.get("label") or name.replace("_", " ").capitalize(),
                              "value": values.get(f"bp_{key}_{name}", ""), "errors": errors.get(f"bp_{key}_{name}", [])}
                              for name, rule in bp.params.items()]} for key, bp in inv.blueprints.items()]
    return {"gpus": gpus, "storage": storage, "blueprints": blueprints}


class PreviewView(View):
    """The form's live check: the same fields in, problems by field, approval, manifests and diff out (POST only)."""

    def post(self, request, *args, **kwargs):
        spec = spec_from_form(request.POST, inventory())
        name = namespace_name(spec.get("team", ""), spec.get("name", ""))
        change = request.POST.get("change_of")
        namespace = namespace_get_for_user(request.user, change) if change else None
        result = preview(spec, request.user, namespace=namespace)
        errors = {}
        for problem in result.check.problems:
            errors.setdefault(form_field(problem.field, spec), []).append(problem.message)
        return JsonResponse({"valid": result.check.ok, "name": name, "errors": errors, "needs_approval": result.check.needs_approval,
                             "approvers": result.approvers, "manifests": to_yaml(result.manifests) if result.manifests else "",
                             "diff": result.diff})


class NamespaceDetailView(TemplateView):
    template_name = "namespaces/detail.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        namespace = namespace_get_for_user(self.request.user, kwargs["name"])
        if namespace is None:
            raise Http404("no such namespace")
        from .gitops import GitError, GitOpsRepo
        from .services import repository

        try:
            files = repository().read(GitOpsRepo.directory(namespace.project.slurm_account, namespace.name))
        except GitError:
            files = {}
        context.update(namespace=namespace, events=list(namespace.events.all()), requests=list(namespace.requests.select_related("requested_by")[:20]),
                       files=files, apps=(namespace.status_detail or {}).get("apps", []), remark=(namespace.status_detail or {}).get("remark", ""),
                       argo_configured=bool(settings.ARGOCD_URL),
                       quota=json.dumps((namespace.spec.get("quota") or {}), indent=2))
        return context

    def post(self, request, *args, **kwargs):
        namespace = namespace_get_for_user(request.user, kwargs["name"])
        if namespace is None:
            raise Http404("no such namespace")
        try:
            if request.POST.get("action") == "teardown":
                teardown_request(namespace, request.user, backup=bool(request.POST.get("backup")), reason=request.POST.get("reason", ""),
                                 confirm=request.POST.get("confirm_name", ""))
                messages.success(request, f"{namespace.name} is being torn down: freeze, backup, remove, prune, verify, archive.")
            elif request.POST.get("action") == "backup-done":
                teardown_advance(namespace, actor=request.user.get_username(), backup_done=True)
                messages.success(request, "Backup confirmed; the teardown goes on.")
        except NotAllowed as exc:
            messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("namespaces:detail", args=[namespace.name]))


# A request's page stops asking for news in these statuses (committed too, when no Argo CD reports a sync).
FINAL_STATUSES = (NamespaceRequestStatusChoices.REJECTED, NamespaceRequestStatusChoices.UNCHANGED, NamespaceRequestStatusChoices.READY,
                  NamespaceRequestStatusChoices.FAILED)


def live_context(found, user) -> dict:
    """What the part of a request's page that updates itself shows: state, message, steps, the committed diff."""
    from django.conf import settings

    final = found.status in FINAL_STATUSES or (found.status == NamespaceRequestStatusChoices.COMMITTED and not settings.ARGOCD_URL)
    return {"req": found, "events": list(found.events.all()), "final": final,
            "live_url": reverse("namespaces:request-live", args=[found.pk])}


class RequestDetailView(TemplateView):
    template_name = "namespaces/request.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        found = requests_for_user(self.request.user).filter(pk=kwargs["pk"]).first()
        if found is None:
            raise Http404("no such request")
        from .services import approval_facts, is_production, may_approve

        waiting = found.status == NamespaceRequestStatusChoices.WAITING
        context.update(live_context(found, self.request.user), may_decide=waiting and may_approve(found, self.request.user),
                       facts=approval_facts(found) if waiting else None, production=is_production(found),
                       spec_yaml=to_yaml(found.spec), inventory=inventory())
        return context

    def post(self, request, *args, **kwargs):
        found = requests_for_user(request.user).filter(pk=kwargs["pk"]).first()
        if found is None:
            raise Http404("no such request")
        try:
            decide(found, request.user, approve=request.POST.get("decision") == "approve", reason=request.POST.get("reason", ""),
                   confirmed=bool(request.POST.get("confirm")))
            messages.success(request, f"{found.number} {found.get_status_display()}.")
        except NotAllowed as exc:
            messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("namespaces:request", args=[found.pk]))


class RequestLiveView(TemplateView):
    """The self-updating part of a request's page, as an HTML fragment the page swaps in place."""

    template_name = "namespaces/_request_live.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        found = requests_for_user(self.request.user).filter(pk=kwargs["pk"]).first()
        if found is None:
            raise Http404("no such request")
        context.update(live_context(found, self.request.user))
        return context


class ApprovalQueueView(UserPassesTestMixin, TemplateView):
    template_name = "namespaces/approvals.html"

    def test_func(self):
        return self.request.user.is_staff

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["queue"] = approval_queue(self.request.user)
        return context
