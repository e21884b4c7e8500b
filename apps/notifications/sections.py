"""The notifications app's section of the portal's home page (apps.core.page_sections): whether mail about the
user's jobs is on for their projects, with the way to the switches."""
from apps.core.page_sections import PageSection, register_page_section

from .selectors import project_notifications_for_user


def home_notifications(request) -> dict:
    rows = project_notifications_for_user(request.user)
    on = [row for row in rows if row["settings"].waste or row["settings"].straggler]
    return {"notification_rows": rows, "notifications_on": on,
            "notifications_may_change": any(row["may_change"] for row in rows)}


def register() -> None:
    register_page_section(PageSection(page="home", key="notifications", order=20,
                                      template="notifications/_home_section.html", context=home_notifications))
