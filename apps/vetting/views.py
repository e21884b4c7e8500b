"""Vetting pages: the history browser, a node's timeline, a run, staff triage, the rules, the protocol check.
Views only assemble; queries live in selectors, changes in services."""
import json
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.generic import TemplateView

from .choices import NodeHealthStateChoices, VettingResultKindChoices, VettingResultOutcomeChoices
from .figures import failures_heatmap, node_timeline
from .filtersets import VettingResultFilterSet
from .models import NodeHealth, Rule, VettingRun
from .node_states import STATE_WORDS, STATES, TransitionError, allowed_actions, switch_rows
from .protocol import validate_protocol
from .records import BAD_OUTCOMES, OUTCOMES
from .rules import KIND_PARAMS
from .scontrol import ActionRefused
from .selectors import (failure_rates, failures_by_node_and_day, history_page, job_visibility, job_visible,
                        node_timeline as timeline_rows,
                        open_recommendations, repeat_offenders, restrict_private_filters, results_for_user, triage_nodes)
from .services import ActionFailed, RuleInvalid, node_act, rule_save, rules_ensure_built_in, switch_act
from .tables import VettingResultTable, gpu_rank_words

PAGE_SIZE = 100
DEFAULT_DAYS = 14


def _cursor(value: str):
    """'<iso time>_<id>' of the last row shown; None when absent or unreadable."""
    moment, _, pk = (value or "").rpartition("_")
    try:
        return datetime.fromisoformat(moment), int(pk)
    except ValueError:
        return None


class VettingIndexView(TemplateView):
    """History browser: filters, failure rate per evaluation, failures per node and day, the results."""

    template_name = "vetting/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        request = self.request
        params = request.GET.copy()
        defaulted = not params.get("since") and not params.get("until")
        if defaulted:
            params["since"] = (timezone.now() - timedelta(days=DEFAULT_DAYS)).strftime("%Y-%m-%dT%H:%M")
        queryset = restrict_private_filters(results_for_user(request.user), request.user, job=params.get("job"),
                                            user_name=params.get("user"))
        filterset = VettingResultFilterSet(params, queryset=queryset)
        filtered = filterset.qs if filterset.is_valid() else queryset.none()
        rows, more = history_page(filtered, before=_cursor(request.GET.get("before", "")), size=PAGE_SIZE)
        viewer = job_visibility(request.user)
        for row in rows:
            row.job_shown = job_visible(viewer, row.user_name, row.account)
        next_query = request.GET.copy()
        if more and rows:
            next_query["before"] = f"{rows[-1].time.isoformat()}_{rows[-1].id}"
        hosts, days, cells = failures_by_node_and_day(filtered)
        context.update(
            filterset=filterset, results=rows, table=VettingResultTable(rows), more=more, next_query=next_query.urlencode(), window_defaulted=defaulted,
            since_value=params.get("since"), rates=failure_rates(filtered)[:30], kinds=VettingResultKindChoices.choices,
            outcomes=[("bad", "failed or critical"), *[(o, o) for o in OUTCOMES]],
            heatmap=json.loads(failures_heatmap(hosts, days, cells).to_json()) if hosts else None,
            runs=VettingRun.objects.filter(started__gte=timezone.now() - timedelta(days=DEFAULT_DAYS)).count(),
            states=NodeHealth.objects.exclude(state=NodeHealthStateChoices.HEALTHY).count(),
            node_url=reverse("vetting:node", args=["HOSTNAME"]),
        )
        return context


class NodeTimelineView(TemplateView):
    template_name = "vetting/node.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        host = kwargs["host"]
        results, events = timeline_rows(host)
        health = NodeHealth.objects.filter(host=host).first()
        if not results and health is None:
            from apps.topology.models import Node

            if not Node.objects.filter(hostname=host).exists():
                raise Http404("no such node")
        rows = [{"time": r.time, "eval_name": r.eval_name, "outcome": r.outcome, "status": r.status, "gpu": r.gpu,
                 "bandwidth_gbs": r.bandwidth_gbs, "message": r.message} for r in results]
        recent = sorted(results, key=lambda r: (r.time, r.id), reverse=True)[:50]
        viewer = job_visibility(self.request.user)
        for row in recent:
            row.job_shown = job_visible(viewer, row.user_name, row.account)
            row.gpu_rank = gpu_rank_words(row.gpu, row.rank, row.local_rank)
        context.update(
            host=host, health=health, events=list(reversed(events)), recent=recent, results_count=len(results),
            failures=sum(1 for r in results if r.outcome in BAD_OUTCOMES),
            figure=json.loads(node_timeline(rows, [{"created": e.created, "to_state": e.to_state} for e in events if not e.dry_run]).to_json()) if rows else None,
            actions=allowed_actions(health.state if health else "healthy"), state_words=STATE_WORDS,
            recommendations=[r for r in open_recommendations() if host in r.hosts],
        )
        return context


class RunDetailView(TemplateView):
    template_name = "vetting/run.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        run = get_object_or_404(VettingRun.objects.select_related("cluster", "job"), pk=kwargs["pk"])
        results = list(run.results.order_by("host", "rank", "local_rank", "gpu", "eval_name")[:20000])
        evaluations = sorted({r.eval_name for r in results})
        grid: dict = {}
        for result in results:
            cell = grid.setdefault(result.host, {}).setdefault(result.eval_name, {"outcomes": [], "messages": []})
            cell["outcomes"].append(result.outcome)
            if result.message and result.outcome != VettingResultOutcomeChoices.PASS:
                cell["messages"].append(result.message)
        order = ["critical", "fail", "unknown", "warn", "skipped", "pass"]
        table = []
        for host in sorted(grid, key=lambda h: (h not in run.failed_hosts, h)):
            cells = []
            for name in evaluations:
                cell = grid[host].get(name)
                if cell is None:
                    cells.append(None)
                    continue
                worst = min(cell["outcomes"], key=order.index)
                cells.append({"worst": worst, "count": len(cell["outcomes"]), "bad": sum(1 for o in cell["outcomes"] if o in BAD_OUTCOMES),
                              "message": "; ".join(dict.fromkeys(cell["messages"]))[:300]})
            table.append({"host": host, "cells": cells})
        context.update(run=run, evaluations=evaluations, table=table,
                       job_shown=job_visible(job_visibility(self.request.user), run.user_name, run.account))
        return context


class StaffRequired(UserPassesTestMixin):
    def test_func(self):
        return self.request.user.is_staff


class TriageView(StaffRequired, TemplateView):
    """Staff: nodes by state and severity, repeat offenders, what the rules recommend; act with a reason."""

    template_name = "vetting/triage.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        nodes = triage_nodes()
        recommendations = list(open_recommendations())
        # A switch finding is one row with its nodes and one action; the nodes only it names are not rows of their own.
        switches, absorbed = switch_rows(
            [(rec.subject, rec.hosts, {"recommendation": rec}) for rec in recommendations if rec.subject_kind == "switch"],
            {node.host: node.state for node in nodes},
            own_findings={host for rec in recommendations if rec.subject_kind != "switch" for host in rec.hosts})
        preview = self.request.GET.get("preview", "")
        for row in switches:
            row["previewed"] = row["switch"] == preview  # the dry run was answered (the page without JavaScript)
            row["shown"] = [(host, state, STATE_WORDS.get(state, state)) for host, state in row["nodes"]]
        listed = [node for node in nodes if node.host not in absorbed]
        for node in listed:
            node.actions = allowed_actions(node.state)
        since = timezone.now() - timedelta(days=2)
        recent = list(results_for_user(self.request.user).filter(time__gte=since, outcome__in=BAD_OUTCOMES).order_by("-time", "-id")[:30])
        for row in recent:
            row.gpu_rank = gpu_rank_words(row.gpu, row.rank, row.local_rank)
        context.update(
            nodes=listed, switches=switches, offenders=repeat_offenders(), recommendations=recommendations,
            recent=recent,
            counts=[(STATE_WORDS[state], sum(1 for n in nodes if n.state == state)) for state in STATES if state != NodeHealthStateChoices.HEALTHY],
            dry_run=settings.VETTING_ACTIONS_DRY_RUN,
        )
        return context

    def post(self, request, *args, **kwargs):
        if request.content_type == "application/json" or request.POST.get("switch"):
            return self.post_switch(request)
        host, action, reason = request.POST.get("host", ""), request.POST.get("action", ""), request.POST.get("reason", "")
        back = request.POST.get("next") or reverse("vetting:triage")
        if not back.startswith("/") or back.startswith("//"):
            back = reverse("vetting:triage")
        try:
            event = node_act(host, action, actor=request.user.get_username(), reason=reason)
        except (TransitionError, ActionRefused, ActionFailed) as exc:
            messages.error(request, f"{host}: {exc}")
        else:
            if event.dry_run:
                messages.info(request, f"{host}: would {action} (dry run: nothing changed in Slurm or here): {event.command}")
            else:
                what = f" — ran: {event.command}" if event.executed else (f" — not run: {event.command}" if event.command else "")
                messages.success(request, f"{host}: {STATE_WORDS[event.from_state]} → {STATE_WORDS[event.to_state]} ({action}){what}")
        return HttpResponseRedirect(back)


    def post_switch(self, request):
        """One action over a switch's nodes: form fields or a JSON body ``{"switch", "action", "reason", "dry_run",
        "expect"}``; JSON asked, JSON answered (``SwitchActed.as_dict``; a refusal is a 400 naming the field)."""
        wants_json = request.content_type == "application/json" or request.headers.get("Accept", "").startswith("application/json")
        if request.content_type == "application/json":
            try:
                data = json.loads(request.body or b"{}")
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return JsonResponse({"errors": [{"field": "body", "message": f"not JSON: {exc}"}]}, status=400)
            if not isinstance(data, dict):
                return JsonResponse({"errors": [{"field": "body", "message": "a JSON object"}]}, status=400)
        else:
            data = {**request.POST.dict(), "dry_run": request.POST.get("dry_run") == "1"}
        switch, action, reason = str(data.get("switch") or ""), str(data.get("action") or "drain"), str(data.get("reason") or "")
        expect = data.get("expect")
        try:
            expect = None if expect in (None, "") else int(expect)
        except (TypeError, ValueError):
            return JsonResponse({"errors": [{"field": "expect", "message": "a whole number"}]}, status=400) if wants_json \
                else self._back_with(messages.error, f"switch {switch}: expect is not a whole number", switch)
        try:
            acted = switch_act(switch, action, actor=request.user.get_username(), reason=reason,
                               dry_run=data.get("dry_run") is not False, expect=expect)
        except (TransitionError, ActionRefused, ActionFailed) as exc:
            field = "reason" if "reason" in str(exc) else ("expect" if "dry run first" in str(exc) else "switch")
            if wants_json:
                return JsonResponse({"errors": [{"field": field, "message": str(exc)}]}, status=400)
            return self._back_with(messages.error, f"switch {switch}: {exc}", switch)
        if wants_json:
            return JsonResponse(acted.as_dict())
        return self._back_with(messages.info if acted.dry_run else messages.success, acted.words, switch if acted.dry_run else "")

    def _back_with(self, say, text: str, preview: str):
        say(self.request, text)
        query = f"?{urlencode({'preview': preview})}" if preview else ""
        return HttpResponseRedirect(reverse("vetting:triage") + query + (f"#switch-{preview}" if preview else ""))


class RulesView(TemplateView):
    template_name = "vetting/rules.html"

    def get_context_data(self, **kwargs):
        rules_ensure_built_in()
        context = super().get_context_data(**kwargs)
        context.update(rules=Rule.objects.prefetch_related("versions"), kinds=KIND_PARAMS)
        return context


class RuleEditView(StaffRequired, TemplateView):
    template_name = "vetting/rule_edit.html"

    def get_context_data(self, **kwargs):
        rules_ensure_built_in()
        context = super().get_context_data(**kwargs)
        rule = get_object_or_404(Rule, slug=kwargs["slug"])
        context.update(rule=rule, params_text=json.dumps(rule.params, indent=2), kinds=KIND_PARAMS,
                       actions=Rule._meta.get_field("action").choices, severities=Rule._meta.get_field("severity").choices)
        return context

    def post(self, request, *args, **kwargs):
        rule = get_object_or_404(Rule, slug=kwargs["slug"])
        form = request.POST
        problems = []
        try:
            params = json.loads(form.get("params") or "{}")
        except json.JSONDecodeError as exc:
            params = None
            problems.append(("params", f"not JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"))
        if not problems:
            try:
                rule_save(rule, {"name": form.get("name", ""), "description": form.get("description", ""), "params": params,
                                 "action": form.get("action", ""), "severity": form.get("severity", ""),
                                 "enabled": form.get("enabled") == "on"}, user=request.user.get_username(),
                          comment=form.get("comment", ""))
            except RuleInvalid as exc:
                problems = exc.problems
        if problems:
            context = self.get_context_data(**kwargs)
            context.update(problems=problems, params_text=form.get("params", ""))
            return self.render_to_response(context, status=400)
        messages.success(request, f"Saved {rule.name}; the next evaluation uses the new version.")
        return HttpResponseRedirect(reverse("vetting:rules"))


class ProtocolCheckView(TemplateView):
    """Paste a vetnode protocol and see what vetnode would do with it."""

    template_name = "vetting/protocol.html"

    def post(self, request, *args, **kwargs):
        text = request.POST.get("text", "")[:200_000]
        context = self.get_context_data(**kwargs)
        context.update(text=text, report=validate_protocol(text) if text.strip() else None)
        return self.render_to_response(context)


def vetting_context(job) -> dict:
    """The job page's section (the vetting panel's context, ``panel.context``), until the page reads the panel registry."""
    from .panel import context

    return context(job)
