"""Demo part: the staff triage inbox read once from what the demo planted (wasteful and straggling running jobs
that are scored, the vetting's repeat offenders and bad switch, the waiting namespace request, the catalogue's
incidents), so the staff page opens with it; beat's ``triage.sync_inbox`` keeps it in step afterwards."""
from apps.core.demo import DemoContext, demo_part


def reset() -> None:
    """The inbox is derived from the demo's sources: it goes with them (the next sync rebuilds it)."""
    from .models import TriageItem

    TriageItem.objects.all().delete()


@demo_part("triage", order=92, reset=reset)
def build(context: DemoContext) -> dict:
    from .services import triage_sync

    counts = triage_sync(now=context.now)
    return {"items": counts["found"]}
