"""Flight Recorder endpoint: POST one rank's dump (or a tar.gz of the dump folder) to
/api/v1/jobs/<cluster>/<job_id>/flight-recorder/; GET the analysis. Thin: validate, call a service or selector."""
from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.exceptions import ErrorItem, InputError
from apps.core.api.negotiation import FormatIsOurs
from apps.core.api.params import parse_query
from apps.core.api.parsers import BoundedStream, StreamParser
from apps.jobs.access import job_for_request

from .. import selectors, services
from ..dumps import DumpRefused
from .openapi import FlightIngestResponse, FlightResponse
from .serializers import FlightPostParams

NO_DUMPS = ("no Flight Recorder dumps for this job yet: run with TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE set, and the epilog (or deploy/flightrec/belvedere-post-flightrec.sh) "
            "posts the files here")


def _refused(exc: DumpRefused, rank=None) -> InputError:
    where = f"rank {rank}: " if rank is not None else ""
    return InputError(f"The dump was not stored: {where}{exc}", [ErrorItem(str(exc), field=exc.where)])


class FlightRecorderView(APIView):
    """A job's PyTorch Flight Recorder dumps and the stuck or mismatched collective they show: the first collective
    the members of a process group disagree on, its culprit ranks placed on host, GPU, NIC, switch and dragonfly
    group, with the hardware's evidence. POST one rank's dump as PyTorch wrote it (pickle or JSON; ``?rank=N``), or a
    ``.tar.gz`` of the dump folder (``?format=tar``); the job's token, its user or staff. Pickles are read with an
    unpickler that builds plain data only."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [StreamParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = FormatIsOurs  # ?format= names what is posted

    @extend_schema(responses={200: FlightResponse})
    def get(self, request, cluster: str, job_id: int):
        job = job_for_request(request, cluster, job_id)
        body = selectors.flight_body(job)
        if body is None:
            raise InputError(NO_DUMPS, status_code=404)
        return Response({"job": f"{cluster}/{job_id}", **body})

    @extend_schema(parameters=[FlightPostParams],
                   request={"application/octet-stream": {"type": "string", "format": "binary"},
                            "application/json": {"type": "object"}, "application/gzip": {"type": "string", "format": "binary"}},
                   responses={201: FlightIngestResponse})
    def post(self, request, cluster: str, job_id: int):
        job = job_for_request(request, cluster, job_id, write=True, what="send its Flight Recorder dumps")
        params = parse_query(request, FlightPostParams)
        stream = request.data if hasattr(request.data, "read") else None
        if stream is None:
            raise InputError("Send the dump as the request body (application/octet-stream), as PyTorch wrote it.",
                             [ErrorItem("no body", field="body")])
        limit = settings.FLIGHTREC_MAX_DUMP_BYTES
        if params["format"] == "tar":
            try:
                answer = services.flight_tar_store(job, BoundedStream(stream, settings.FLIGHTREC_MAX_TAR_BYTES), max_bytes=limit)
            except DumpRefused as exc:
                raise _refused(exc) from None
            if not answer["stored"] and answer["errors"]:
                raise InputError(f"No dump in the archive was stored: {answer['errors'][0]['error']}",
                                 [ErrorItem(f"{e.get('file')}: {e['error']}", field=e.get("field") or "body")
                                  for e in answer["errors"][:20]])
        else:
            rank = params.get("rank")
            if rank is None:
                raise InputError("Name the rank whose dump this is: ?rank=N (or send a .tar.gz of the folder with ?format=tar).",
                                 [ErrorItem("required for one dump", field="rank")])
            data = BoundedStream(stream, limit).read()
            try:
                services.flight_dump_store(job, rank, data, params["format"])
            except DumpRefused as exc:
                raise _refused(exc, rank) from None
            answer = {"stored": [rank], "errors": []}
        return Response({"job": f"{cluster}/{job_id}", **answer, "analysis": "queued"}, status=status.HTTP_201_CREATED)
