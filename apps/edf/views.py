"""EDF pages: the list, the editor (new, own, shared), history with diffs, download, JSON Schema."""
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views import View
from django.views.decorators.cache import cache_control
from django.views.generic import TemplateView

from apps.accounts.selectors import project_list_for_user

from . import services
from .forms import EdfSaveForm, VersionsForm
from .library import TEMPLATES
from .schema import edf_json_schema
from .selectors import edf_can_edit, edf_get_for_user, edf_list_for_user, edf_version
from .snippets import unified_diff, usage_snippets


class EdfIndexView(TemplateView):
    template_name = "edf/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        visible = edf_list_for_user(self.request.user).prefetch_related("versions")
        context.update(
            own=[d for d in visible if d.owner_id == self.request.user.pk],
            shared=[d for d in visible if d.owner_id != self.request.user.pk],
            templates=TEMPLATES.values(),
        )
        return context


def _document_or_404(request, owner, name):
    document = edf_get_for_user(request.user, owner, name)
    if document is None:
        raise Http404("No such EDF, or it is not shared with you.")
    return document


def _gone(exc: services.EdfGone):
    return Http404(str(exc))


class EdfEditorView(TemplateView):
    """Editor for a new EDF (no owner/name) or a saved one. Non-owners get it read-only, with
    'save a copy'."""

    template_name = "edf/editor.html"

    def setup(self, request, *args, **kwargs):
        super().setup(request, *args, **kwargs)
        self.document = None
        if "name" in kwargs:
            self.document = _document_or_404(request, kwargs["owner"], kwargs["name"])

    def get_form(self, data=None):
        user = self.request.user
        if self.document is None:
            template = TEMPLATES.get(self.request.GET.get("template", "pytorch"), TEMPLATES["pytorch"])
            initial = {"text": template.text, "name": ""}
            return EdfSaveForm(data, user=user, initial=initial)
        if not edf_can_edit(user, self.document):
            copy_name = self.document.name
            return EdfSaveForm(data, user=user, initial={"text": self.document.latest.text, "name": copy_name,
                                                         "description": self.document.description})
        return EdfSaveForm(data, user=user, fixed_name=self.document.name, initial={
            "text": self.document.latest.text, "description": self.document.description,
            "shared_with": list(self.document.shared_with.values_list("slurm_account", flat=True))})

    def get_context_data(self, form=None, **kwargs):
        context = super().get_context_data(**kwargs)
        user, document = self.request.user, self.document
        form = form or self.get_form()
        can_edit = document is None or edf_can_edit(user, document)
        name = document.name if document else "NAME"
        owner = document.owner.username if document else user.get_username()
        account = next(iter(project_list_for_user(user).filter(memberships__user=user).values_list("slurm_account", flat=True)), None)
        download_api = self.request.build_absolute_uri(
            reverse("edf-api:document-download", kwargs={"owner": owner, "name": name}))
        latest_text = document.latest.text if document else ""
        context.update(
            form=form,
            document=document,
            latest=document.latest if document else None,
            can_edit=can_edit,
            is_copy=document is not None and not can_edit,
            templates=TEMPLATES.values(),
            snippets=usage_snippets(name=name, owner=owner, download_url=download_api, account=account,
                                    ssh='com.hooks.ssh' in latest_text),
            editor_config={
                "validateUrl": reverse("edf-api:validate"),
                "schemaUrl": reverse("edf:schema"),
                "name": document.name if document else None,
                "owner": owner,
                "readOnly": not can_edit,
                "env": {"USER": user.get_username(), "HOME": f"/users/{user.get_username()}",
                        "SCRATCH": f"/capstor/scratch/cscs/{user.get_username()}"},
            },
        )
        return context

    def post(self, request, *args, **kwargs):
        document = self.document
        form = self.get_form(request.POST)
        if not form.is_valid():
            return self.render_to_response(self.get_context_data(form=form), status=400)
        data = form.cleaned_data
        try:
            return self._save(request, document, form, data)
        except services.EdfGone as exc:
            raise _gone(exc) from exc

    def _save(self, request, document, form, data):
        try:
            if document is not None and edf_can_edit(request.user, document):
                version = services.edf_update(request.user, document, text=data["text"],
                                              description=data["description"], note=data["note"])
                services.edf_share(request.user, document, data["shared_with"])
                messages.success(request, f"Saved {document.name} as version {version.number}." if version
                                 else f"{document.name}: no change to the text; description and sharing saved.")
            else:
                note = data["note"] or (f"copied from {document.owner.username}/{document.name} v{document.latest.number}"
                                        if document else "created")
                document = services.edf_create(request.user, name=data["name"], text=data["text"],
                                               description=data["description"], note=note)
                services.edf_share(request.user, document, data["shared_with"])
                messages.success(request, f"Saved {document.name}.")
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
            return self.render_to_response(self.get_context_data(form=form), status=400)
        return redirect("edf:detail", owner=document.owner.username, name=document.name)


class EdfHistoryView(TemplateView):
    """Versions and the diff between two of them (``?from=N&to=M``); a number that is not one is a 400 that
    says which, with the page showing the latest change instead."""

    template_name = "edf/history.html"

    def get(self, request, *args, **kwargs):
        context = self.get_context_data(**kwargs)
        return self.render_to_response(context, status=400 if context["param_errors"] else 200)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        document = _document_or_404(self.request, kwargs["owner"], kwargs["name"])
        versions = list(document.versions.order_by("-number").select_related("created_by"))
        latest = versions[0]
        params = VersionsForm(self.request.GET)
        chosen = params.cleaned_data if params.is_valid() else {}

        def number(key, default):
            value = chosen.get(key)
            return default if value is None else value

        to_version = edf_version(document, number("to", latest.number)) or latest
        from_version = edf_version(document, number("from", max(to_version.number - 1, 1))) or versions[-1]
        context.update(
            param_errors=params.problems(),
            document=document, versions=versions, from_version=from_version, to_version=to_version,
            can_edit=edf_can_edit(self.request.user, document),
            diff=unified_diff(from_version.text, to_version.text, f"v{from_version.number}", f"v{to_version.number}"),
            diff_texts={"from": from_version.text, "to": to_version.text},
        )
        return context


class EdfRestoreView(View):
    def post(self, request, owner, name, number):
        document = _document_or_404(request, owner, name)
        try:
            version = services.edf_restore(request.user, document, number)
        except PermissionDenied:
            raise
        except services.EdfGone as exc:
            raise _gone(exc) from exc
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("edf:history", owner=owner, name=name)
        messages.success(request, f"Restored version {number} as version {version.number}." if version
                         else f"Version {number} is already the current text.")
        return redirect("edf:detail", owner=owner, name=name)


class EdfDeleteView(View):
    def post(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        try:
            services.edf_delete(request.user, document)
        except services.EdfGone as exc:
            raise _gone(exc) from exc
        messages.success(request, f"Deleted {name} and its history.")
        return redirect("edf:index")


class EdfDownloadView(View):
    def get(self, request, owner, name):
        document = _document_or_404(request, owner, name)
        params = VersionsForm(request.GET)
        if not params.is_valid():
            return HttpResponse(" ".join(params.problems()) + "\n", status=400, content_type="text/plain; charset=utf-8")
        version = edf_version(document, params.cleaned_data["version"])
        if version is None:
            raise Http404("No such version.")
        response = HttpResponse(version.text, content_type="application/toml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{document.name}.toml"'
        return response


@login_not_required
@cache_control(max_age=3600, public=True)
def edf_schema_view(request):
    """JSON Schema for EDFs, for editors outside the portal (e.g. Taplo's #:schema directive)."""
    schema = edf_json_schema(request.build_absolute_uri(reverse("edf:schema")))
    return JsonResponse(schema, json_dumps_params={"indent": 2})
