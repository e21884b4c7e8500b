"""Writes of the flightrec app: a rank's dump stored (checked, bounded, atomically), a folder's tar.gz unpacked into
dumps, and the job's analysis computed from every stored dump."""
from __future__ import annotations

import os
import tarfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .analysis import Analyser
from .choices import FlightAnalysisStatusChoices as Status
from .choices import FlightDumpFormatChoices as Format
from .dumps import DumpRefused, check_belongs, load_plain, from_plain, rank_from_filename, sniff_format
from .groups import GroupCatalogue
from .models import FlightAnalysis, FlightDump

GROUP_KINDS = ("tp", "pp", "dp", "cp", "ep", "edp", "etp", "dp-cp", "mp")


def dump_dir() -> Path:
    return Path(settings.FLIGHTREC_DIR)


def job_folder(job) -> Path:
    return dump_dir() / job.cluster.name / str(job.job_id)


def expected_world(job) -> int | None:
    """The job's ranks: its Megatron layout's world size, else one per GPU (else per task)."""
    from apps.ranks.selectors import job_layout_get

    layout = job_layout_get(job)
    if layout is not None:
        return layout.world_size
    return job.gpus or job.tasks or None


def job_catalogue(job, world: int | None) -> GroupCatalogue:
    """The job's Megatron groups by kind from its layout (none without one)."""
    from apps.ranks.selectors import LayoutNoLongerFits, job_ranks

    try:
        ranks = job_ranks(job)
    except LayoutNoLongerFits:
        ranks = None
    if ranks is None:
        return GroupCatalogue(world_size=world)
    groups = {kind: ranks.layout.groups(kind) for kind in GROUP_KINDS}
    return GroupCatalogue(groups, world_size=ranks.layout.world_size)


def _window_ns(job) -> tuple[int, int]:
    window = job.write_window()
    return int(window.start.timestamp() * 1e9), int(window.end.timestamp() * 1e9)


def flight_dump_store(job, rank: int, data: bytes, fmt: str = "auto") -> FlightDump:
    """Check ``data`` is a readable dump of this job's rank ``rank`` (:class:`DumpRefused` otherwise) and keep it;
    a dump posted again for the same rank replaces the first. The job's analysis is queued after the commit."""
    kind = sniff_format(data) if fmt == "auto" else fmt
    if kind not in (Format.PICKLE, Format.JSON):
        raise DumpRefused("send one rank's dump as PyTorch wrote it (pickle or JSON), or a .tar.gz of the dump folder "
                          "with ?format=tar", "format")
    dump = from_plain(load_plain(data, kind), rank=rank, frames=False)
    check_belongs(dump, rank=rank, world_size=expected_world(job), window_ns=_window_ns(job),
                  job_words=f"job {job.cluster.name}/{job.job_id}")
    folder = job_folder(job)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"rank_{rank}.{'json' if kind == Format.JSON else 'pkl'}"
    partial = folder / f".{name}.part"
    partial.write_bytes(data)
    os.replace(partial, folder / name)
    with transaction.atomic():
        previous = FlightDump.objects.filter(job=job, rank=rank).first()
        if previous is not None and previous.path != str(Path(job.cluster.name) / str(job.job_id) / name):
            (dump_dir() / previous.path).unlink(missing_ok=True)
        record, _ = FlightDump.objects.update_or_create(
            job=job, rank=rank, defaults={"format": kind, "size": len(data), "entries": len(dump.entries),
                                          "path": str(Path(job.cluster.name) / str(job.job_id) / name)})
        FlightAnalysis.objects.update_or_create(job=job, defaults={"status": Status.PENDING})
        transaction.on_commit(lambda: _queue(job.pk))
    return record


def _queue(job_pk: int) -> None:
    from .tasks import analyse_job

    analyse_job.apply_async((job_pk,), countdown=settings.FLIGHTREC_ANALYSE_DELAY_SECONDS)


def flight_tar_store(job, stream, *, max_bytes: int) -> dict:
    """Unpack a ``.tar.gz`` of a dump folder (files named ``<prefix><rank>`` as PyTorch names them): each readable
    dump is stored, each other file is listed in ``errors`` with why; ``max_bytes`` bounds each file."""
    stored, errors = [], []
    try:
        archive = tarfile.open(fileobj=stream, mode="r|gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise DumpRefused(f"not a readable .tar.gz: {exc}", "format") from None
    try:
        for member in archive:
            if not member.isfile():
                continue
            base = member.name.rsplit("/", 1)[-1]
            if base.startswith(".") or base == "store":
                continue
            rank = rank_from_filename(member.name)
            if rank is None:
                errors.append({"file": member.name[:200], "error": "no rank at the end of its name (PyTorch names a dump <prefix><rank>)"})
                continue
            if member.size > max_bytes:
                errors.append({"file": member.name[:200], "error": f"{member.size:,} bytes, more than the {max_bytes:,} read per dump"})
                continue
            handle = archive.extractfile(member)
            data = handle.read(max_bytes + 1) if handle is not None else b""
            try:
                flight_dump_store(job, rank, data)
            except DumpRefused as exc:
                errors.append({"file": member.name[:200], "rank": rank, "error": str(exc), "field": exc.where})
                continue
            stored.append(rank)
    except (tarfile.TarError, OSError, EOFError) as exc:
        errors.append({"file": "", "error": f"the archive ends early or is damaged: {exc}"})
    return {"stored": sorted(set(stored)), "errors": errors[:200]}


def job_flight_analyse(job, progress=None) -> FlightAnalysis:
    """Analyse every stored dump of ``job`` one at a time (``progress(done, total)``) and keep the body."""
    records = list(FlightDump.objects.filter(job=job).order_by("rank"))
    world = expected_world(job)
    analyser = Analyser(world_size=world, catalogue=job_catalogue(job, world))
    problems = []
    for count, record in enumerate(records, start=1):
        try:
            analyser.add_bytes(record.rank, (dump_dir() / record.path).read_bytes(), record.format)
        except (DumpRefused, OSError) as exc:
            problems.append(f"rank {record.rank}: {exc}")
        if progress is not None:
            progress(count, len(records))
    body = analyser.result()
    if problems:
        body["unreadable"] = problems[:50]
    analysis, _ = FlightAnalysis.objects.update_or_create(
        job=job, defaults={"status": body["status"], "dumps": len(records), "body": body, "computed": timezone.now(),
                           "message": "; ".join(problems)[:500]})
    return analysis
