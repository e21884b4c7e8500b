"""Vetting pages: the history browser, a node's timeline, a run, staff triage, the rules, the protocol check.
Views only assemble; queries live in selectors, changes in services."""
import json
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.views.generic import TemplateView

from .choices import NodeHealthStateChoices, VettingResultKindChoices, VettingResultOutcomeChoices
from .figures import failures_heatmap, node_timeline
from .filtersets import VettingResultFilterSet
from .models import NodeHealth, Rule, VettingRun
from .node_states import STATE_WORDS, STATES, TransitionError, allowed_actions
from .protocol import validate_protocol
from .records import BAD_OUTCOMES, OUTCOMES
from .rules import KIND_PARAMS
from .scontrol import ActionRefused
from .selectors import (failure_rates, failures_by_node_and_day, history_page, job_visibility, job_visible,
                        node_timeline as timeline_rows,
                        open_recommendations, repeat_offenders, restrict_private_filters, results_for_user, triage_nodes)
from .services import ActionFailed, RuleInvalid, node_act, rule_save, rules_ensure_built_in
from .tables import VettingResultTable

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
        for node in nodes:
            node.actions = allowed_actions(node.state)
        since = timezone.now() - timedelta(days=2)
        context.update(
            nodes=nodes, offenders=repeat_offenders(), recommendations=list(open_recommendations()),
            recent=list(results_for_user(self.request.user).filter(time__gte=since, outcome__in=BAD_OUTCOMES).order_by("-time", "-id")[:30]),
            counts=[(STATE_WORDS[state], sum(1 for n in nodes if n.state == state)) for state in STATES if state != NodeHealthStateChoices.HEALTHY],
            dry_run=settings.VETTING_ACTIONS_DRY_RUN,
        )
        return context

    def post(self, request, *args, **kwargs):
        host, action, reason = request.POST.get("host", ""), request.POST.get("action", ""), request.POST.get("reason", "")
        back = request.POST.get("next") or reverse("vetting:triage")
        if not back.startswith("/"):
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
