"""How long each tier of telemetry is kept, and which tier a read of a window can use (issue 40). Plain: no Django.

Three tiers per source (GPU samples, network and host samples):

* ``raw``  — every sample as sent, kept ``raw_days`` (default 30);
* ``1m``   — 1-minute rollups (count, sum → mean, min, max; network and host: also first and last), kept ``m1_days``
  (default 90);
* ``10m``  — 10-minute rollups (the same statistics; the embedded store also keeps 1-hour rollups inside this tier),
  kept ``m10_days`` (default 365).

A tier's *horizon* at time ``now`` is ``now - its retention``: a store never answers from a tier before its horizon,
whether or not the retention pass has removed the data yet, so what a read returns does not depend on when the pass
last ran. Whole partitions (a day table, a daily index) go once they lie wholly before the horizon.

Which tier answers ``aggregate(step)`` for a window: for each part of the window, the finest tier still holding it
whose resolution divides the step (raw divides every step). ``step_for`` tells a caller the finest step it may ask
for a window; asking finer for a part only rollups hold is a ``TierError`` that names the tier and its retention.
Percentiles need raw samples: rollups keep no percentiles (no product reads them from the store), so asking one for a
window older than the raw horizon is a ``TierError`` too.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

NS = 1_000_000_000
DAY_NS = 86_400 * NS

TIERS = ("raw", "1m", "10m")
TIER_SECONDS = {"raw": 0, "1m": 60, "10m": 600}
TIER_WORDS = {"raw": "raw samples", "1m": "1-minute rollups", "10m": "10-minute rollups"}


class TierError(ValueError):
    """A read asks for a resolution (or a percentile) the tiers still holding its window no longer have."""


def _days(value: float) -> str:
    value = float(value)
    if value < 1 and (value * 24) == int(value * 24):
        hours = int(value * 24)
        return f"{hours} hour" + ("s" if hours != 1 else "")
    if value % 365 == 0:
        years = int(value // 365)
        return f"{years} year" + ("s" if years != 1 else "")
    if value == int(value):
        return f"{int(value)} day" + ("s" if value != 1 else "")
    return f"{value:g} days"


def as_ns(moment) -> int:
    """Nanoseconds since the epoch of a datetime (naive = UTC), a pandas Timestamp or an int (already ns)."""
    if isinstance(moment, int):
        return moment
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return int(moment.timestamp()) * NS + moment.microsecond * 1000
    value = getattr(moment, "value", None)  # pandas.Timestamp
    if isinstance(value, int):
        return value
    raise TypeError(f"not a time: {moment!r}")


@dataclass(frozen=True)
class Retention:
    """Days each tier is kept. ``raw_days <= m1_days <= m10_days`` (a coarser tier never goes before a finer one)."""

    raw_days: float = 30
    m1_days: float = 90
    m10_days: float = 365

    def __post_init__(self):
        for name in ("raw_days", "m1_days", "m10_days"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"telemetry retention {name} must be a positive number of days, not {value!r}")
        if not self.raw_days <= self.m1_days <= self.m10_days:
            raise ValueError(f"telemetry retention must not shrink with coarser tiers: raw {self.raw_days} days, "
                             f"1-minute {self.m1_days}, 10-minute {self.m10_days}")

    @classmethod
    def from_options(cls, options: dict | None) -> "Retention":
        """From a backend's ``retention`` option: None (the defaults), a Retention, or a dict of the three day counts."""
        if options is None:
            return cls()
        if isinstance(options, Retention):
            return options
        unknown = set(options) - {"raw_days", "m1_days", "m10_days"}
        if unknown:
            raise ValueError(f"unknown telemetry retention option(s) {sorted(unknown)}; use raw_days, m1_days, m10_days")
        return cls(**{key: float(value) for key, value in options.items()})

    def days(self, tier: str) -> float:
        return {"raw": self.raw_days, "1m": self.m1_days, "10m": self.m10_days}[tier]

    def horizon_ns(self, tier: str, now) -> int:
        """The first instant ``tier`` still answers for at ``now`` (ns)."""
        return as_ns(now) - int(self.days(tier) * DAY_NS)

    def horizon(self, tier: str, now) -> datetime:
        return datetime.fromtimestamp(self.horizon_ns(tier, now) / NS, tz=timezone.utc)

    def describe(self) -> str:
        """'raw for 30 days, 1-min to 90 days, 10-min to 1 year' (the catalogue's words)."""
        return (f"raw for {_days(self.raw_days)}, 1-min to {_days(self.m1_days)}, "
                f"10-min to {_days(self.m10_days)}")

    def tier_at(self, moment, now) -> str | None:
        """The finest tier holding ``moment`` at ``now``; None when every tier has let it go."""
        at = as_ns(moment)
        for tier in TIERS:
            if at >= self.horizon_ns(tier, now):
                return tier
        return None

    def step_for(self, start, now, step: int = 0) -> int | None:
        """The finest step (seconds) a read of a window beginning at ``start`` can be answered at, never finer than
        ``step``: ``step`` itself while raw samples cover the start, else the next multiple of the tier's resolution
        (60 or 600); None when nothing of the start is kept."""
        tier = self.tier_at(start, now)
        if tier is None:
            return None
        resolution = TIER_SECONDS[tier]
        if not resolution or (step and step % resolution == 0):
            return step or resolution
        return max(resolution, -(-int(step or 0) // resolution) * resolution)

    def check_step(self, start, now, step: int, percentiles: bool = False, end=None) -> None:
        """Raise TierError when ``step`` (seconds; 0 = raw) cannot be answered for a window beginning at ``start``
        (the part of it some tier still keeps: a window reaching back past every tier is answered from where the
        coarsest begins; one wholly past them, ``end`` before that, is simply empty and never an error)."""
        oldest = self.horizon_ns("10m", now)
        if end is not None and as_ns(end) <= oldest:
            return
        tier = self.tier_at(max(as_ns(start), oldest), now)
        if tier == "raw":
            return
        if percentiles:
            raise TierError(f"percentiles need raw samples, kept for {_days(self.raw_days)} (since "
                            f"{self.horizon('raw', now):%Y-%m-%d %H:%M} UTC); ask for mean, min or max before that")
        resolution = TIER_SECONDS[tier]
        if not step or step % resolution:
            raise TierError(f"samples before {self.horizon('raw', now):%Y-%m-%d %H:%M} UTC are kept only as "
                            f"{TIER_WORDS[tier]} ({self.describe()}): ask for a step that is a multiple of "
                            f"{resolution} s, not {step or 'raw samples'}")


def _dt(moment) -> datetime:
    return datetime.fromtimestamp(as_ns(moment) / NS, tz=timezone.utc)


def day_of(ts_ns: int) -> int:
    """The UTC day number (days since the epoch) a nanosecond timestamp falls in."""
    return ts_ns // DAY_NS


def day_name(day: int) -> str:
    """Day number → 'YYYYMMDD'."""
    return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(days=int(day))).strftime("%Y%m%d")


@dataclass(frozen=True)
class Expiry:
    """One partition the retention pass removes (or, dry-run, would remove)."""

    source: str       # "gpu", "net" (network and host samples)
    tier: str         # "raw", "1m", "10m"
    partition: str    # a table name or an index name
    first: datetime   # the partition's span
    last: datetime
    rows: int | None  # samples or rollup rows in it, when the store knows cheaply

    def line(self) -> str:
        rows = f"{self.rows:,} rows" if self.rows is not None else "rows unknown"
        return (f"{self.source:<4} {self.tier:<4} {self.partition:<40} {self.first:%Y-%m-%d %H:%M} – "
                f"{self.last:%Y-%m-%d %H:%M} UTC  {rows}")
