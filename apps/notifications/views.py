"""The notifications page: which of your projects mail their users about wasteful or straggling running jobs
(switched in place by the projects' managers and staff), and the mails sent about your jobs."""
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.utils import timezone
from django.views.generic import TemplateView

from .choices import NotificationSentStatusChoices
from .forms import JobEndForm, ProjectNotificationsForm
from .selectors import (last_check, mail_leaves, notifications_sent_counts, notifications_sent_for_user,
                        project_get_for_user, project_notifications_for_user, project_notifications_may_change)
from .services import project_notifications_update, user_notifications_get, user_notifications_update


class NotificationsIndexView(TemplateView):
    template_name = "notifications/index.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        projects = project_notifications_for_user(user)
        sent = list(notifications_sent_for_user(user, limit=50, counted_since=timezone.now() - timedelta(days=7)))
        week_counts = notifications_sent_counts(sent)  # over every mail of the week, not only the 50 listed
        on = [row for row in projects if row["settings"].any_on]
        context.update(
            projects=projects, on=on, off=[row for row in projects if not row["settings"].any_on], sent=sent,
            sent_week=week_counts[NotificationSentStatusChoices.STATUS_SENT],
            skipped_week=week_counts[NotificationSentStatusChoices.STATUS_SKIPPED],
            failed_week=week_counts[NotificationSentStatusChoices.STATUS_FAILED],
            email=(user.email or "").strip(), may_change_any=any(row["may_change"] for row in projects),
            score_below=settings.WASTE_SCORE_BELOW, idle_share=settings.WASTE_IDLE_SHARE,
            rate_hours=settings.NOTIFY_RATE_LIMIT_HOURS, straggler_minutes=settings.NOTIFY_STRAGGLER_MINUTES,
            every_minutes=settings.NOTIFY_SECONDS / 60, last_check=last_check(), mail_leaves=mail_leaves(),
            mine=user_notifications_get(user),
        )
        return context

    def post(self, request, *args, **kwargs):
        if request.POST.get("kind") == "job_end":
            job_end = JobEndForm(request.POST)
            job_end.is_valid()
            row = user_notifications_update(request.user, job_end=bool(job_end.cleaned_data.get("job_end")))
            messages.success(request, "A summary will be mailed when each of your jobs ends." if row.job_end
                             else "No more summaries when your jobs end.")
            return redirect("notifications:index")
        form = ProjectNotificationsForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Say which project to switch.")
            return redirect("notifications:index")
        project = project_get_for_user(request.user, form.cleaned_data["account"])
        if project is None:
            raise Http404
        if not project_notifications_may_change(request.user, project):
            raise PermissionDenied("Only the project's managers and staff may switch its notifications.")
        project_notifications_update(project, actor=request.user.get_username(), waste=form.cleaned_data["waste"],
                                     straggler=form.cleaned_data["straggler"])
        messages.success(request, f"Notifications of {project.slurm_account} saved.")
        return redirect("notifications:index")
