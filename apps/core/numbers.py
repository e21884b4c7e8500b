"""Numbers as the portal shows them: units, thousands separators, at most three significant digits,
durations and robust z-scores in words. Plain Python: no Django; used by templates, summaries and tests."""
from __future__ import annotations

import math
from datetime import datetime, timedelta


def finite(value) -> float | None:
    """``value`` as a float when it is a finite number (``"2.5"`` -> 2.5), else None (None, NaN, inf, text)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def significant(value: float | int | None, digits: int = 3) -> str:
    """``1.4791`` -> ``1.48``, ``32512`` -> ``32,500``, ``0.000123`` -> ``0.000123``, None -> ``–``.
    Integers below 1,000 are shown whole; large ones get separators."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    rounded = round(value, decimals if decimals else -(magnitude - digits + 1))
    if decimals == 0:
        return f"{int(rounded):,}"
    text = f"{rounded:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def quantity(value, unit: str = "", digits: int = 3) -> str:
    """``significant`` with a unit: ``quantity(1390, "MHz")`` -> ``1,390 MHz``; fractions as percent
    when ``unit`` is ``"%"`` (value 0.42 -> ``42 %``)."""
    if value is None:
        return "–"
    if unit == "%":
        return f"{significant(100 * value, digits)} %"
    return f"{significant(value, digits)} {unit}".rstrip()


def count(value: int | None, noun: str = "", plural: str | None = None) -> str:
    """``count(32512, "sample")`` -> ``32,512 samples``."""
    if value is None:
        return "–"
    word = "" if not noun else (noun if value == 1 else (plural or noun + "s"))
    return f"{int(value):,} {word}".rstrip()


def duration_words(seconds: float | timedelta | None) -> str:
    """``2700`` -> ``45 min``, ``5400`` -> ``1 h 30 min``, ``90`` -> ``2 min`` (rounded), ``20`` -> ``20 s``."""
    if seconds is None:
        return "–"
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = int(round(seconds / 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def clock(moment: datetime | None, reference: datetime | None = None) -> str:
    """``21:04 UTC``; with the date when ``moment`` is not on ``reference``'s day."""
    if moment is None:
        return "–"
    if reference is not None and moment.date() != reference.date():
        return f"{moment:%Y-%m-%d %H:%M} UTC"
    return f"{moment:%H:%M} UTC"


def z_words(z: float | None) -> str:
    """A robust z-score in words: ``-5.6`` -> ``5.6 robust SDs below its peers``."""
    if z is None or not math.isfinite(z):
        return "not compared with peers"
    side = "below" if z < 0 else "above"
    return f"{significant(abs(z), 2)} robust SDs {side} its peers"
