"""Import of the fabric manager's switch-port counters through ``POST /api/v1/telemetry/import/?format=fabric-manager``.

The text is the fabric manager's telemetry events (JSON, see :mod:`apps.telemetry.fabric`); the counters go to the
network-samples table of the telemetry store. Switch ports belong to the whole machine, not to a job: only staff
and service tokens (``telemetry.add_ingestbatch``) may import them.
"""
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from apps.core.api.exceptions import ErrorItem, InputError
from apps.jobs.authentication import token_job

from .. import ingest
from ..backends.base import TelemetryUnavailable
from ..fabric import parse_fabric_export
from ..store import telemetry_store

JOB_TOKEN_REFUSED = ("a job token may not import switch port counters: switches are shared by every job; "
                     "use a service token with the telemetry.add_ingestbatch permission")


def import_text(request, text: str, *, params: dict, cluster: str, scope, nbytes: int):
    if token_job(request) is not None or scope.hosts is not None or scope.window is not None:
        raise PermissionDenied(JOB_TOKEN_REFUSED)
    ts = None
    if params.get("ts"):
        try:
            ts = ingest.parse_timestamp(params["ts"])
        except ValueError as exc:
            raise InputError(f"ts: {exc}", [ErrorItem(message=str(exc), field="ts")]) from exc
    try:
        result = parse_fabric_export(text, cluster=cluster, ts=ts)
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    errors = result.errors
    if not len(result.frame):
        detail = (f"no port counter was accepted; first problem: line {errors[0]['line']}: {errors[0]['message']}"
                  if errors else f"no port counter in the export ({result.skipped} other metrics skipped)")
        raise InputError(detail, [ErrorItem(message=error["message"], line=error["line"],
                                            field=error["column"] if isinstance(error["column"], str) else None)
                                  for error in errors[:20]])
    try:
        written = telemetry_store().write_net(result.frame)
    except TelemetryUnavailable as exc:
        raise InputError(str(exc), status_code=503) from exc
    except ValueError as exc:  # the store's own validation: the importer should never let this through
        raise InputError(f"the store refused the counters: {exc}") from exc
    shown = errors[:ingest.MAX_REPORTED_ERRORS]
    body = {"accepted": int(written), "rejected": result.error_count, "skipped": result.skipped,
            "ports": len({(host, nic) for host, nic in zip(result.frame["host"], result.frame["nic"])}),
            "errors": shown, "errors_truncated": result.error_count > len(shown)}
    return Response(body, status=status.HTTP_200_OK)
