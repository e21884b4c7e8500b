"""Synthetic Lustre job statistics for the demo, printed as ``lctl get_param obdfilter.*.job_stats mdt.*.job_stats``
prints them (the demo feeds its readings through the real parser, ``apps.telemetry.lustre``).

Plain Python: no Django.

A job's counters are closed-form functions of its run seconds, so any reading of any moment is the same whoever
computes it (the build, a later tick of the feeder): steady reads and writes at the job's rates, striped over its
OSTs with a small fixed imbalance, and steady metadata operations on the MDT. A training run (``checkpoint_bytes``)
also writes a checkpoint every ``checkpoint_every_s`` seconds of the run from ``checkpoint_every_s`` on — the
moments where the GPU telemetry's synthetic run (``apps.telemetry.synthetic_jobs``) idles its SMs for 90 s — in
``checkpoint_write_s`` seconds starting ``checkpoint_delay_s`` in, with a directory, one open/close per rank
and a getattr storm on the MDT; none while the run evaluates (``skip``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

OPS_OST = ("getattr", "setattr", "punch", "sync")
OPS_MDT = ("open", "close", "mknod", "unlink", "mkdir", "getattr", "setattr", "statfs")


@dataclass(frozen=True)
class IoProfile:
    job_id: str  # as Lustre prints it (jobid_name=<cluster>.%j: "alps.1200772")
    osts: tuple[str, ...]
    mdt: str
    read_bps: float  # steady, bytes/s over all OSTs
    write_bps: float
    read_size: int = 1 << 20  # bytes per RPC
    write_size: int = 1 << 20
    meta_per_s: float = 2.0  # steady MDT operations per second (open/close/getattr)
    checkpoint_bytes: float = 0.0
    checkpoint_every_s: float = 1800.0
    checkpoint_delay_s: float = 5.0
    checkpoint_write_s: float = 80.0
    checkpoint_files: int = 512  # one file per rank (torch_dist)
    skip: tuple[float, float] | None = None  # run seconds without checkpoints (evaluation)
    start_epoch: float = 0.0  # the job's start

    def checkpoints(self, until_s: float) -> list[float]:
        """Run seconds at which checkpoint writes start up to ``until_s``."""
        if self.checkpoint_bytes <= 0:
            return []
        out, moment = [], self.checkpoint_every_s
        while moment <= until_s:
            if self.skip is None or not self.skip[0] <= moment < self.skip[1]:
                out.append(moment)
            moment += self.checkpoint_every_s
        return out


def _imbalance(index: int, count: int) -> float:
    """A fixed share per OST around 1/count (some stripes a little fuller), summing to 1."""
    weights = [1.0 + 0.08 * ((index * 7 + 3) % 5 - 2) for index in range(count)]
    return weights[index] / sum(weights)


def _done(profile: IoProfile, run_s: float) -> float:
    """Checkpoints written by ``run_s`` (fractions for one in progress)."""
    total = 0.0
    for start in profile.checkpoints(run_s):
        into = run_s - start - profile.checkpoint_delay_s
        total += min(max(into / profile.checkpoint_write_s, 0.0), 1.0)
    return total


def counters(profile: IoProfile, run_s: float) -> dict[str, dict[str, tuple[int, int]]]:
    """{target: {stat: (samples, sum)}} of the job at ``run_s`` seconds of its run (cumulative)."""
    run_s = max(run_s, 0.0)
    done = _done(profile, run_s)
    written = profile.write_bps * run_s + profile.checkpoint_bytes * done
    read = profile.read_bps * run_s
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for index, target in enumerate(profile.osts):
        share = _imbalance(index, len(profile.osts))
        w = int(written * share)
        r = int(read * share)
        wn = int(profile.write_bps * run_s * share / profile.write_size) + int(profile.checkpoint_bytes * done * share / (4 << 20))
        rn = int(r / profile.read_size)
        out[target] = {"read_bytes": (rn, r), "write_bytes": (wn, w), "getattr": (int(run_s / 600) + 1, 0),
                       "setattr": (0, 0), "punch": (int(done), 0), "sync": (int(done), 0)}
    steady = profile.meta_per_s * run_s
    files = profile.checkpoint_files * done
    out[profile.mdt] = {"open": (int(steady / 3 + files), 0), "close": (int(steady / 3 + files), 0), "mknod": (int(files), 0),
                        "unlink": (0, 0), "mkdir": (int(done), 0), "getattr": (int(steady / 3 + 4 * files), 0),
                        "setattr": (int(files), 0), "statfs": (int(run_s / 300), 0)}
    return out


@dataclass
class Reading:
    """One ``lctl get_param`` run on the servers: every target with its jobs' entries."""

    epoch: float
    entries: dict[str, list[tuple[str, float, dict[str, tuple[int, int]]]]] = field(default_factory=dict)

    def add(self, profile: IoProfile, run_s: float) -> None:
        for target, stats in counters(profile, run_s).items():
            self.entries.setdefault(target, []).append((profile.job_id, profile.start_epoch, stats))

    def add_raw(self, target: str, job_id: str, start_epoch: float, stats: dict[str, tuple[int, int]]) -> None:
        self.entries.setdefault(target, []).append((job_id, start_epoch, stats))

    def text(self) -> str:
        """The reading as Lustre 2.15 prints it (OSTs under ``obdfilter.``, MDTs under ``mdt.``)."""
        lines = []
        for target in sorted(self.entries, key=lambda t: ("-MDT" in t, t)):
            kind = "mdt" if "-MDT" in target else "obdfilter"
            lines += [f"{kind}.{target}.job_stats=", "job_stats:"]
            for job_id, start, stats in self.entries[target]:
                quote = '"' if ":" in job_id else ""
                lines.append(f"- {'job_id:':<16} {quote}{job_id}{quote}")
                lines.append(f"  {'snapshot_time:':<16} {self.epoch:.9f} secs.nsecs")
                lines.append(f"  {'start_time:':<16} {start:.9f} secs.nsecs")
                lines.append(f"  {'elapsed_time:':<16} {max(self.epoch - start, 0):.9f} secs.nsecs")
                for name, (samples, total) in stats.items():
                    if name.endswith("_bytes"):
                        lines.append(f"  {name + ':':<16} {{ samples: {samples:>11}, unit: bytes, min: {4096 if samples else 0:>8}, "
                                     f"max: {(4 << 20) if samples else 0:>8}, sum: {total:>16}, sumsq: {0:>18} }}")
                    else:
                        lines.append(f"  {name + ':':<16} {{ samples: {samples:>11}, unit: usecs, min: {0:>8}, max: {0:>8}, "
                                     f"sum: {samples * 40:>16}, sumsq: {0:>18} }}")
        return "\n".join(lines) + "\n"
