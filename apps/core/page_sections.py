"""The page-section registry: how apps put a section on the portal's own pages (home, staff) without core
importing them.

Core draws the frame of its pages (the greeting, the services' readiness, the background work); what
the other apps know (projects, people, Slurm clusters) they register from their ``AppConfig.ready()``::

    register_page_section(PageSection(page="staff", key="clusters", order=10, template="jobs/_staff_clusters.html",
                                      context=staff_clusters))

``context(request)`` gives the section's template what it draws; the template renders one whole
``<section>``. Sections appear in ``order`` (lower first). On the staff page a ``half`` section shares
the two-column row with core's "Background work"; the others span the page, after the services, except
those of ``order`` 0 or less: they are the page's verdict and come first (the triage inbox).

Plain Python: no Django import, so the registry can be tested on its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .registry import OrderedRegistry

PAGES = ("home", "staff")


@dataclass(frozen=True)
class PageSection:
    page: str  # one of PAGES
    key: str
    order: int
    template: str
    context: Callable[[Any], dict]  # (request) -> template context
    half: bool = False  # staff page: in the two-column row beside "Background work"

    def __post_init__(self):
        if self.page not in PAGES:
            raise ValueError(f"page {self.page!r} is not one of {', '.join(PAGES)}")


_sections: OrderedRegistry[PageSection] = OrderedRegistry(key=lambda section: (section.page, section.key),
                                                          sort_key=lambda section: (section.order, section.key))


def register_page_section(section: PageSection) -> PageSection:
    """Add ``section`` to its page; the same page and key again replaces it."""
    return _sections.add(section)


def unregister_page_section(page: str, key: str) -> None:
    """Remove a section (tests that register their own)."""
    _sections.remove((page, key))


def page_sections(page: str) -> list[PageSection]:
    """The sections registered for ``page``, in page order."""
    return _sections.entries(lambda section: section.page == page)
