"""Celery tasks of the namespaces app: commit approved requests, read status back, tear down in order."""
from celery import shared_task

from apps.core.models import TaskRun
from apps.core.tasks import IDEMPOTENT


@shared_task(name="namespaces.commit_request", bind=True, max_retries=5, default_retry_delay=30, **IDEMPOTENT)
def commit_request_task(self, request_pk: int) -> dict:
    """Render an approved request into the GitOps repository (idempotent: no change, no commit)."""
    from .gitops import GitError
    from .models import NamespaceRequest
    from .services import commit

    request = NamespaceRequest.objects.select_related("requested_by", "decided_by", "namespace", "project").get(pk=request_pk)
    run = TaskRun.objects.create(name="namespaces.commit_request", subject=f"{request.number} {request.name}")
    run.start("writing the namespace's directory", total=1)
    try:
        request = commit(request)
    except GitError as exc:
        run.finish(error=str(exc)[:400])
        request.message = f"the GitOps repository refused the commit (will retry): {exc}"[:1000]
        request.save(update_fields=["message", "updated"])
        raise self.retry(exc=exc)
    run.finish()
    return {"request": request_pk, "status": request.status, "commit": request.commit}


@shared_task(name="namespaces.refresh_status", **IDEMPOTENT)
def refresh_status_task(namespace_pk: int) -> dict:
    from .models import ManagedNamespace
    from .services import refresh_status

    namespace = refresh_status(ManagedNamespace.objects.select_related("project").get(pk=namespace_pk))
    return {"namespace": namespace.name, "state": namespace.state, "message": namespace.status_message}


@shared_task(name="namespaces.refresh_statuses", **IDEMPOTENT)
def refresh_statuses_task() -> list[str]:
    """Beat: every namespace not archived gets its Argo CD status read; teardowns waiting on Argo CD move on."""
    from .models import ManagedNamespace, ManagedNamespaceStateChoices
    from .services import refresh_status, teardown_advance

    touched = []
    for namespace in ManagedNamespace.objects.exclude(state=ManagedNamespaceStateChoices.ARCHIVED).select_related("project"):
        if namespace.state == ManagedNamespaceStateChoices.TEARING_DOWN:
            teardown_advance(namespace)
        else:
            refresh_status(namespace)
        touched.append(namespace.name)
    return touched


@shared_task(name="namespaces.teardown", bind=True, max_retries=5, default_retry_delay=60, **IDEMPOTENT)
def teardown_task(self, namespace_pk: int) -> dict:
    from .gitops import GitError
    from .models import ManagedNamespace
    from .services import TEARDOWN_STEPS, teardown_advance

    namespace = ManagedNamespace.objects.select_related("project").get(pk=namespace_pk)
    run = TaskRun.objects.create(name="namespaces.teardown", subject=namespace.name)
    run.start(f"tearing down: {', '.join(TEARDOWN_STEPS)}", total=len(TEARDOWN_STEPS))
    try:
        waiting = teardown_advance(namespace)
    except GitError as exc:
        run.finish(error=str(exc)[:400])
        raise self.retry(exc=exc)
    run.report(TEARDOWN_STEPS.index(waiting) if waiting else len(TEARDOWN_STEPS),
               f"waiting at {waiting}" if waiting else "archived")
    run.finish()
    return {"namespace": namespace.name, "waiting_at": waiting}
