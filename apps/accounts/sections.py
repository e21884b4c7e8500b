"""What the accounts app shows on the portal's own pages (apps.core.page_sections): the user's projects on the
home page, people and projects on the staff page.

``register()`` is called from AccountsConfig.ready().
"""
from __future__ import annotations

from django.contrib.auth import get_user_model

from apps.core.page_sections import PageSection, register_page_section

from .models import Project
from .selectors import project_list_for_user

STAFF_PROJECTS_SHOWN = 50


def home_projects(request) -> dict:
    return {"projects": project_list_for_user(request.user)}


def staff_people(request) -> dict:
    users = get_user_model().objects
    return {"user_count": users.count(), "staff_count": users.filter(is_staff=True).count(),
            "projects": Project.objects.order_by("slurm_account").prefetch_related("members")[:STAFF_PROJECTS_SHOWN]}


def register() -> None:
    register_page_section(PageSection(page="home", key="projects", order=10, template="accounts/_home_projects.html",
                                      context=home_projects))
    register_page_section(PageSection(page="staff", key="people", order=20, template="accounts/_staff_people.html",
                                      context=staff_people, half=True))
