"""The job in context: a section of the job page (registered in apps.py). Being built (issue 19)."""


def register() -> None:
    """Register the job-in-context panel with apps.core.panels."""
