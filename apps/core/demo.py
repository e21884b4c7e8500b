"""The demo system: a reproducible synthetic instance of the reference machine.

``python manage.py demo`` builds it from parts. Each app contributes a part in its own
``demo.py`` with :func:`demo_part`; the command discovers them, orders them, and gives each the
same seeded random generator, so the same seed always yields the same system.
"""
import random
from dataclasses import dataclass, field
from typing import Callable, TextIO

DEFAULT_SEED = 20261121


@dataclass
class DemoContext:
    """What a part builder receives: the seeded RNG, where to report, and what earlier parts made."""

    seed: int
    rng: random.Random
    out: TextIO
    shared: dict = field(default_factory=dict)

    def say(self, line: str) -> None:
        self.out.write(line + "\n")


@dataclass(frozen=True)
class DemoPart:
    name: str
    order: int
    build: Callable[[DemoContext], dict]
    reset: Callable[[], None]


_parts: dict[str, DemoPart] = {}


def demo_part(name: str, *, order: int, reset: Callable[[], None]):
    """Register ``build(context) -> summary`` as demo part ``name``; lower ``order`` builds first."""

    def register(build: Callable[[DemoContext], dict]):
        _parts[name] = DemoPart(name, order, build, reset)
        return build

    return register


def registered_parts() -> list[DemoPart]:
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("demo")
    return sorted(_parts.values(), key=lambda part: (part.order, part.name))


def feed_demo() -> dict:
    """One tick of the living demo; implemented with the demo feeder registry (see the README)."""
    raise NotImplementedError("the demo feeder is being built")
