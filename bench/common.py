"""Shared helpers for benchmarks: timing with repeats, and the Figure row printed by the runner."""
import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Figure:
    name: str
    seconds: float
    floor_seconds: float
    floor_name: str
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.seconds / self.floor_seconds if self.floor_seconds else float("inf")


def median_seconds(action: Callable[[], object], repeats: int = 3, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``action`` over ``repeats`` runs, each after an untimed ``setup``."""
    timings = []
    for _ in range(repeats):
        if setup is not None:
            setup()
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)
