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


def ingest_net_bodies(store, bodies: list, now, workdir, tag: str) -> dict:
    """Post each of ``bodies`` (NDJSON samples of NIC or host fields) through the samples endpoint's parser into
    ``store.write_net``, one at a time, and the floor: a bare DuckDB INSERT of the last batch's rows into a table
    without a key (one thread). Returns the median seconds per body, the floor, the last batch and how many ran."""
    import duckdb

    from apps.telemetry import ingest

    state = {"next": 0, "frames": []}

    def one():
        body = bodies[state["next"]]
        state["next"] += 1
        samples = ingest.iter_samples((body,), "application/x-ndjson", max_samples=10**7)
        parsed = ingest.parse_batch(samples, now=now, default_cluster="alps")
        assert not parsed.errors and len(parsed.frame) == 0, parsed.errors[:3]
        store.write_net(parsed.net)
        state["frames"].append(parsed.net)

    seconds = median_seconds(one, repeats=len(bodies))
    frame = state["frames"][-1]
    plain = frame.assign(ts=frame["ts"].astype("int64"))[["cluster", "host", "nic", "field", "ts", "value"]]
    bare = {"run": 0}

    def bare_setup():
        bare["run"] += 1
        bare["db"] = duckdb.connect(str(workdir / f"bare-{tag}-{bare['run']}.duckdb"))
        bare["db"].execute("SET threads = 1")
        bare["db"].execute("CREATE TABLE s (cluster VARCHAR, host VARCHAR, nic VARCHAR, field VARCHAR, ts BIGINT, "
                           "value DOUBLE)")
        bare["db"].register("plain", plain)

    floor = median_seconds(lambda: bare["db"].execute("INSERT INTO s SELECT * FROM plain"), repeats=3, setup=bare_setup)
    bare["db"].close()
    return {"seconds": seconds, "floor": floor, "frame": frame}
