"""Template filters shared by every app."""
from datetime import timedelta

from django import template
from django.utils.html import format_html

from apps.core import statuses
from apps.core.numbers import quantity, significant

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


@register.filter
def diff_lines(text: str) -> list[tuple[str, str]]:
    """A unified diff as (kind, line) pairs, kind one of add, remove, file, hunk, context, for colouring."""
    out = []
    for line in (text or "").splitlines():
        if line.startswith(("+++", "---")):
            kind = "file"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "remove"
        else:
            kind = "context"
        out.append((kind, line))
    return out


@register.filter
def span(seconds) -> str:
    """A number of seconds as people say it: '45 s', '10 min', '6 h', '90 d'."""
    if seconds in (None, ""):
        return "–"
    seconds = float(seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size and seconds % size == 0 or seconds >= 2 * size:
            value = seconds / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{seconds:.0f} s"


@register.filter
def percent(fraction) -> str:
    """0.995 -> '99.5 %'."""
    if fraction in (None, ""):
        return "–"
    return f"{float(fraction) * 100:.4g} %"


@register.filter
def sig(value, digits=3) -> str:
    """At most ``digits`` significant digits with thousands separators: 1.4791 -> '1.48', 32512 -> '32,500'."""
    return significant(None if value in (None, "") else float(value), int(digits))


@register.filter
def thousands(value) -> str:
    """A count with thousands separators: 32512 -> '32,512'."""
    if value in (None, ""):
        return "–"
    return f"{int(value):,}"


@register.filter
def qty(value, unit="") -> str:
    """A quantity with its unit, at most three significant digits: (1390, 'MHz') -> '1,390 MHz'."""
    return quantity(None if value in (None, "") else float(value), unit)


@register.filter
def replace_name(url: str, name: str) -> str:
    """A URL reversed with the placeholder NAME, for one of several figures: '…/NAME.json' -> '…/bands.json'."""
    return str(url).replace("NAME", str(name))


@register.simple_tag
def status_badge(value, label=None, title=None) -> str:
    """A state as one badge in the portal's one vocabulary: ``{% status_badge run.status %}`` shows "FAILED",
    "Fail" or "failed" as "Failed" with the colour of failure (apps.core.statuses). ``label`` replaces the
    words (a sentence such as "3 of 8 failed") while the colour still follows ``value``."""
    found = statuses.status(value)
    text = found.words if label in (None, "") else label
    if title:
        return format_html('<span class="status status--{}" data-state="{}" title="{}">{}</span>',
                           found.meaning, found.state, title, text)
    return format_html('<span class="status status--{}" data-state="{}">{}</span>', found.meaning, found.state, text)


@register.filter
def status_words(value) -> str:
    """A state's words only: 'NODE_FAIL' -> 'Node fail'."""
    return statuses.words(value)


@register.filter
def status_meaning(value) -> str:
    """A state's colour class only (ok, active, waiting, warn, fail, neutral, info), for a row or a cell."""
    return statuses.meaning(value)


@register.filter
def freshness_badge(item, now=None):
    """The badge of a data source's freshness (``item``: anything with ``state`` and ``last``): "live" only while its
    newest sample is within a few of the job page's refresh intervals (JOB_PAGE_LIVE_SECONDS) of ``now``, else
    "updated N min ago"; see :func:`apps.core.coverage.badge`."""
    from django.conf import settings
    from django.utils import timezone

    from apps.core.coverage import badge

    return badge(getattr(item, "state", ""), getattr(item, "last", None), now or timezone.now(),
                 float(getattr(settings, "JOB_PAGE_LIVE_SECONDS", 30)))
