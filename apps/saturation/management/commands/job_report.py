"""python manage.py job_report CLUSTER JOB_ID — a job's saturation in the terminal, like a job report."""
from django.core.management.base import BaseCommand, CommandError

from apps.jobs.models import Job
from apps.saturation.choices import JobSaturationStatusChoices
from apps.saturation.models import JobSaturation
from apps.saturation.panel import LIMITER_WORDS


def _f(value, digits=2):
    return "–" if value is None else f"{value:.{digits}f}"


class Command(BaseCommand):
    help = "Print a job's saturation score, components, stragglers and per-GPU table."

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("job_id", type=int)
        parser.add_argument("--all", action="store_true", help="every GPU, not only the 10 least saturated")
        parser.add_argument("--score", action="store_true", help="score the job now from the telemetry store first")

    def handle(self, *args, cluster, job_id, all, score, **options):
        job = Job.objects.select_related("cluster").filter(cluster__name=cluster, job_id=job_id).first()
        if job is None:
            raise CommandError(f"no job {cluster}/{job_id}")
        if score:
            from apps.saturation.services import job_saturation_refresh

            job_saturation_refresh(job)
        record = JobSaturation.objects.filter(job=job).first()
        write = self.stdout.write
        write(f"Job {cluster}/{job.display_id} {job.name} ({job.user_name}, {job.account}), {job.state}, "
              f"{job.node_count or len(job.node_list or [])} nodes")
        if record is None or record.status != JobSaturationStatusChoices.STATUS_READY:
            state = record.get_status_display() if record else "not scored yet (run with --score)"
            raise CommandError(f"no saturation result: {state}" + (f": {record.message}" if record and record.message else ""))
        if record.score is None:  # a limited score: utilisation only, no profiling fields
            busy = [g["busy"] for g in record.per_gpu if g.get("busy") is not None]
            write("Limited score: these GPUs report utilisation only (no DCGM profiling fields); "
                  + (f"busy {100 * sum(busy) / len(busy):.0f} % of the time" if busy else "no busy time either")
                  + (f"; {'; '.join(record.labels)}" if record.labels else ""))
        else:
            write(f"Saturation {record.score:.0f}/100, limited by {LIMITER_WORDS.get(record.limiter, record.limiter or 'nothing')}"
                  + (f"; {'; '.join(record.labels)}" if record.labels else ""))
        write(f"  compute {_f(record.compute)}   memory {_f(record.memory)}   links {_f(record.link)}   "
              f"idle GPUs {record.idle_gpus}   imbalance {_f(record.imbalance)}")
        if record.energy_j:
            write(f"  energy {record.energy_j / 3.6e6:.1f} kWh, {100 * (record.energy_low_j or 0) / record.energy_j:.0f} % of it "
                  "while saturation was below 0.3")
        write("Stragglers:" if record.stragglers else "Stragglers: none")
        for item in record.stragglers:
            write(f"  {item['reason']}")
        gpus = sorted(record.per_gpu, key=lambda g: (g["score"] is None, g["score"] if g["score"] is not None else 0))
        if not all:
            gpus = gpus[:10]
            write(f"The {len(gpus)} least saturated of {len(record.per_gpu)} GPUs (--all for every one):")
        write(f"{'GPU':<22}{'rank':>6}{'score':>7}{'C':>6}{'M':>6}{'L':>6}  {'limiter':<8}{'busy':>6}{'clock':>7}  label")
        for g in gpus:
            write(f"{g['host'] + ' GPU ' + str(g['gpu']):<22}{'' if g['rank'] is None else g['rank']:>6}{_f(g['score'], 1):>7}"
                  f"{_f(g['compute']):>6}{_f(g['memory']):>6}{_f(g['link']):>6}  {g['limiter'] or '–':<8}{_f(g['busy']):>6}"
                  f"{_f(g['clock_factor']):>7}  {g['label']}")
