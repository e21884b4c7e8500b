"""Template filters shared by every app."""
from datetime import timedelta

from django import template

register = template.Library()


@register.filter
def duration(value) -> str:
    """A timedelta or a number of minutes as '2 d 03:04' / '03:04:05'."""
    if value in (None, ""):
        return "–"
    if not isinstance(value, timedelta):
        value = timedelta(minutes=int(value))
    seconds = int(value.total_seconds())
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{days} d {hours:02d}:{minutes:02d}" if days else f"{hours:02d}:{minutes:02d}:{seconds:02d}"
