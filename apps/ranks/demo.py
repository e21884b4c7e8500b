"""Demo part: the running Megatron job reports TP=4, PP=8, DP=16 (its 128 nodes x 4 GPUs)."""
from apps.core.demo import DemoContext, demo_part

from .models import JobLayout, JobLayoutSourceChoices
from .services import layout_set


def reset() -> None:
    JobLayout.objects.filter(source=JobLayoutSourceChoices.SOURCE_DEMO).delete()


@demo_part("ranks", order=40, reset=reset)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Job

    key = context.shared.get("megatron_job")
    if not key:
        return {}
    job = Job.objects.get(cluster__name=key[0], job_id=key[1])
    layout = layout_set(job, {"tp": 4, "pp": 8, "cp": 1, "ep": 1, "order": "tp-cp-ep-dp-pp", "num_layers": 96},
                        source=JobLayoutSourceChoices.SOURCE_DEMO, submitted_by="demo")
    return {"layouts": 1, "ranks": layout.world_size}
