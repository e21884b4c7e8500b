"""The demo system: a reproducible synthetic instance of the reference machine, and what keeps it alive.

``python manage.py demo`` builds it from parts. Each app contributes a part in its own
``demo.py`` with :func:`demo_part`; the command discovers them, orders them, and gives each the
same seeded random generator, so the same seed always yields the same system. Every part builds
"as of" the same moment, ``context.now`` (the demo clock's origin).

The living demo: with the demo loaded, beat's ``core.feed_demo`` task (scheduled only when the
setting ``DEMO_FEEDER`` is on, which ``make run`` does) calls :func:`feed_demo` every
``DEMO_FEED_SECONDS``. It keeps the **demo clock** and hands each tick's span of demo time to the
feeders the apps register in their ``demo.py`` with :func:`demo_feeder`: the jobs move along
their timeline, the running jobs' GPUs and every idle node send telemetry. Demo time advances
``DEMO_CLOCK_SPEED`` times the real time since the last tick (1: real time; tests run it faster,
and then the demo's samples and job events run ahead of the wall clock). A tick feeds at most
``MAX_FEED_SPAN`` of demo time: a demo left stopped for a night resumes with a gap (honestly: it
was off), not with a night of samples. Feeding a span twice writes nothing twice: samples are
keyed by (cluster, host, gpu, field, time) on fixed grids, and the timeline's jobs by their ids.

The clock lives in the ``Heartbeat`` row named ``FEEDER_HEARTBEAT``: ``last_seen`` is the real
time of the last tick, ``details`` the demo time reached, the origin, the feeders' memory (what
the build decided and later ticks need: the silent nodes, the job kept running …) and the last
tick's cost. The build creates it (part ``clock``, last); ``--reset`` removes it.
"""
import random
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Callable, TextIO

DEFAULT_SEED = 20261121
#: The Heartbeat row holding the demo clock (the Staff page lists it with the time of the last tick).
FEEDER_HEARTBEAT = "demo feeder"
#: The most demo time one tick feeds; a longer absence of the feeder leaves a gap instead.
MAX_FEED_SPAN = timedelta(minutes=10)
#: A tick that claimed its span this long ago without finishing lost its worker: the next one redoes it.
FEED_CLAIM_SECONDS = 300


def _now() -> datetime:
    from django.utils import timezone

    return timezone.now().replace(second=0, microsecond=0)


@dataclass
class DemoContext:
    """What a part builder receives: the seeded RNG, where to report, what earlier parts made, and the
    moment the demo is built as of (a whole minute, so every part's sampling grid lines up with the
    feeders')."""

    seed: int
    rng: random.Random
    out: TextIO
    shared: dict = field(default_factory=dict)
    now: datetime = field(default_factory=_now)

    @property
    def feed_memory(self) -> dict:
        """What the feeders will need to know about this build (kept with the demo clock, JSON)."""
        return self.shared.setdefault("feed_memory", {})

    def say(self, line: str) -> None:
        self.out.write(line + "\n")

    def teammate(self, account: str, login: str = "demo") -> str:
        """A member of ``account`` other than ``login`` (the accounts part's ``memberships``; ``login`` itself when the
        account has no other): the demo's runs without GPU telemetry of their own belong to a teammate, so that every
        job the demo login owns has telemetry and a score while the demo login still sees them through the project."""
        members = self.shared.get("memberships") or {}
        others = sorted(user for user, accounts in members.items() if account in accounts and user != login)
        return others[0] if others else login


@dataclass(frozen=True)
class DemoPart:
    name: str
    order: int
    build: Callable[[DemoContext], dict]
    reset: Callable[[], None]
    #: Its share of a build's time, roughly (seconds of the full demo on a 2-core machine): the progress bar
    #: the pages show while make run builds the demo advances by it (apps/core/demo_progress.py).
    weight: float = 1.0


_parts: dict[str, DemoPart] = {}


def demo_part(name: str, *, order: int, reset: Callable[[], None], weight: float = 1.0):
    """Register ``build(context) -> summary`` as demo part ``name``; lower ``order`` builds first. ``weight``:
    about how many seconds it takes (the build's progress bar moves by it)."""

    def register(build: Callable[[DemoContext], dict]):
        _parts[name] = DemoPart(name, order, build, reset, weight)
        return build

    return register


def registered_parts() -> list[DemoPart]:
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("demo")
    return sorted(_parts.values(), key=lambda part: (part.order, part.name))


# ---------------------------------------------------------------------------------------------
# The living demo: feeders and the demo clock


@dataclass
class FeedContext:
    """What a feeder receives for one tick: the span of demo time ``(start, end]`` to feed, the clock's
    origin (when the demo was built as of), the seed, the memory the build and earlier ticks left
    (``memory``, kept between ticks: change it in place), and what earlier feeders of this tick did
    (``shared``)."""

    seed: int
    start: datetime
    end: datetime
    origin: datetime
    memory: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def grid(self, step_s: int, start: datetime | None = None, end: datetime | None = None) -> list[datetime]:
        """The moments of an epoch-aligned grid of ``step_s`` seconds in ``(start, end]`` (the span by
        default, clipped to it): feeding a span again gives the same moments, hence the same sample keys."""
        lo = max(start, self.start) if start is not None else self.start
        hi = min(end, self.end) if end is not None else self.end
        first = int(lo.timestamp()) // step_s * step_s + step_s
        last = int(hi.timestamp()) // step_s * step_s
        tz = self.end.tzinfo
        return [datetime.fromtimestamp(moment, tz) for moment in range(first, last + 1, step_s)]


@dataclass(frozen=True)
class DemoFeeder:
    name: str
    order: int
    feed: Callable[[FeedContext], dict]


_feeders: dict[str, DemoFeeder] = {}


def demo_feeder(name: str, *, order: int):
    """Register ``feed(context: FeedContext) -> summary`` as demo feeder ``name``; lower ``order`` feeds first."""

    def register(feed: Callable[[FeedContext], dict]):
        _feeders[name] = DemoFeeder(name, order, feed)
        return feed

    return register


def registered_feeders() -> list[DemoFeeder]:
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("demo")
    return sorted(_feeders.values(), key=lambda feeder: (feeder.order, feeder.name))


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


def reset_clock() -> None:
    from .models import Heartbeat

    Heartbeat.objects.filter(name=FEEDER_HEARTBEAT).delete()


@demo_part("clock", order=1000, reset=reset_clock)
def build_clock(context: DemoContext) -> dict:
    """Last part: start the demo clock at the moment the demo was built as of, with the feeders' memory."""
    from django.utils import timezone

    from .models import Heartbeat

    # last_seen is real time (the end of the build); the demo time starts at the origin
    Heartbeat.objects.update_or_create(name=FEEDER_HEARTBEAT, defaults={"last_seen": timezone.now(), "details": {
        "seed": context.seed, "origin": _iso(context.now), "demo_time": _iso(context.now), "ticks": 0,
        "memory": context.feed_memory, "claim": None, "last": None}})
    return {"origin": f"{context.now:%H:%M} UTC"}


def demo_clock() -> dict | None:
    """The demo clock as stored (origin, demo time reached, last tick), or None without a loaded demo."""
    from .models import DemoState, Heartbeat

    if not DemoState.objects.exists():
        return None
    clock = Heartbeat.objects.filter(name=FEEDER_HEARTBEAT).first()
    return None if clock is None else {"last_tick": clock.last_seen, **clock.details}


def run_feeders(context: FeedContext) -> dict:
    """Every registered feeder on ``context``'s span, in order; their summaries with each one's cost.
    Feeding a span again writes nothing twice (tests use this directly; ticks go through feed_demo)."""
    from django.db import transaction

    summaries = {}
    for feeder in registered_feeders():
        cpu, wall = time.process_time(), time.perf_counter()
        with transaction.atomic():
            summary = dict(feeder.feed(context) or {})
        summary["cpu_s"] = round(time.process_time() - cpu, 3)
        summary["wall_s"] = round(time.perf_counter() - wall, 3)
        summaries[feeder.name] = summary
    return summaries


def feed_demo(*, now: datetime | None = None, speed: float | None = None) -> dict:
    """One tick of the living demo: advance the demo clock and run every registered feeder on the new span.

    Does nothing (and says why) without a loaded demo, with a clock that does not move, or while another
    tick is feeding. The span is claimed first (a compare-and-set on the clock's row, so two ticks never
    feed the same span at once); a feeder that raises hands the span back for the next tick."""
    from django.conf import settings
    from django.utils import timezone

    from .models import DemoState, Heartbeat

    state = DemoState.objects.first()
    if state is None:
        return {"fed": False, "reason": "no demo loaded (python manage.py demo builds it)"}
    real_now = now or timezone.now()
    speed = float(settings.DEMO_CLOCK_SPEED if speed is None else speed)
    clock = Heartbeat.objects.filter(name=FEEDER_HEARTBEAT).first()
    if clock is None:
        return {"fed": False, "reason": "this demo was built before it had a clock: python manage.py demo --reset rebuilds it alive"}
    details = dict(clock.details)
    claim = details.get("claim")
    if claim and (real_now - _parse(claim["at"])).total_seconds() < FEED_CLAIM_SECONDS:
        return {"fed": False, "reason": f"another tick is feeding {claim['start']} – {claim['end']} (since {claim['at']})"}
    # A claim older than FEED_CLAIM_SECONDS: its worker was lost; its span is fed again from where it began.
    demo_time = _parse(claim["start"]) if claim else _parse(details["demo_time"])
    since = _parse(claim["since"]) if claim else clock.last_seen
    elapsed = (real_now - since).total_seconds()
    if speed <= 0 or elapsed <= 0:
        return {"fed": False, "reason": "the demo clock stands still (DEMO_CLOCK_SPEED <= 0 or no time passed since the last tick)"}
    target = demo_time + timedelta(seconds=elapsed * speed)
    if speed >= 1:  # never behind the wall clock: not after the build, nor after a night switched off
        target = max(target, real_now)
    start = max(demo_time, target - MAX_FEED_SPAN)
    claimed = dict(details, claim={"start": _iso(demo_time), "end": _iso(target), "at": _iso(real_now), "since": _iso(since)})
    if not Heartbeat.objects.filter(pk=clock.pk, last_seen=clock.last_seen).update(last_seen=real_now, details=claimed):
        return {"fed": False, "reason": "another tick moved the clock meanwhile"}
    context = FeedContext(seed=int(details.get("seed") or state.seed), start=start, end=target,
                          origin=_parse(details["origin"]), memory=details.get("memory") or {})
    cpu, wall = time.process_time(), time.perf_counter()
    try:
        summaries = run_feeders(context)
    except Exception:  # the span goes back to the clock: the next tick feeds it
        Heartbeat.objects.filter(pk=clock.pk).update(last_seen=since, details=dict(details, claim=None))
        raise
    result = {"fed": True, "demo_from": _iso(start), "demo_to": _iso(target), "demo_seconds": round((target - start).total_seconds(), 1),
              "skipped_s": round((start - demo_time).total_seconds(), 1), "speed": speed,
              "cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3), "feeders": summaries}
    done = dict(details, demo_time=_iso(target), claim=None, ticks=int(details.get("ticks") or 0) + 1, memory=context.memory,
                last={key: value for key, value in result.items() if key != "feeders"})
    Heartbeat.objects.filter(pk=clock.pk).update(details=done)
    return result
