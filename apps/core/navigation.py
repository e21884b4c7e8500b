"""The portal's main navigation, in one place: the base template and the smoke test read it."""
from dataclasses import dataclass

from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    url_name: str
    staff_only: bool = False


NAVIGATION = (
    NavItem("jobs", _("Jobs"), "jobs:index"),
    NavItem("campaigns", _("Campaigns"), "campaigns:index"),
    NavItem("system", _("System"), "system:index"),
    NavItem("topology", _("Topology"), "topology:index"),
    NavItem("vetting", _("Vetting"), "vetting:index"),
    NavItem("edf", _("EDF"), "edf:index"),
    NavItem("namespaces", _("Namespaces"), "namespaces:index"),
    NavItem("catalog", _("Catalog"), "catalog:index"),
    NavItem("reports", _("Reports"), "reports:index"),
    NavItem("staff", _("Staff"), "core:staff", staff_only=True),
    NavItem("api", _("API docs"), "api-docs"),
)


def navigation_for(user) -> list[NavItem]:
    is_staff = bool(getattr(user, "is_staff", False))
    return [item for item in NAVIGATION if is_staff or not item.staff_only]
