"""Job layout endpoints: /api/v1/jobs/<cluster>/<job_id>/layout/, .../layout/log/, .../ranks/,
.../ranks/figure/."""
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION
from apps.core.api.conditional import VARY, ProductVersion, product_response
from apps.core.api.exceptions import ErrorItem, InputError, flatten_validation_detail
from apps.core.api.params import parse_query
from apps.core.api.parsers import BoundedFormParser, BoundedJSONParser, BoundedMultiPartParser
from apps.jobs.access import job_for_request

from ..logparse import LogParseError, parse_megatron_log
from ..panel import ColourUnavailable, figure_answer, span_verdicts
from ..ranktable import DIMENSIONS, analyse_layout, boundary_verdict
from ..selection import out_of_range
from ..selectors import LayoutNoLongerFits, job_ranks
from ..services import LayoutRefused, layout_set
from .openapi import LayoutResponse, RankFigureResponse
from .serializers import LayoutSerializer, LogUploadSerializer, RankFigureParams, RankFilterParams

MAX_LOG_BYTES = 200 * 1024 * 1024


def _job_for(request, cluster: str, job_id: int, *, write: bool):
    return job_for_request(request, cluster, job_id, write=write, what="set its layout")


def _store(job, data: dict, **kwargs) -> None:
    """``layout_set``, its refusals answered as a 400 that names the fields."""
    try:
        layout_set(job, data, **kwargs)
    except LayoutRefused as exc:
        raise InputError(exc.detail, [ErrorItem(problem.message, field=problem.field) for problem in exc.problems]) from None


def _job_ranks(job):
    """``job_ranks``, a layout that no longer fits the job answered as a 409 that says so."""
    try:
        return job_ranks(job)
    except LayoutNoLongerFits as exc:
        raise InputError(str(exc), [ErrorItem(str(exc), field=None)], status_code=status.HTTP_409_CONFLICT) from None


def _job_ranks_or_404(job):
    ranks = _job_ranks(job)
    if ranks is None:
        raise InputError("This job has no layout yet: PUT its sizes to .../layout/ first.",
                         [ErrorItem("no layout", field=None)], status_code=status.HTTP_404_NOT_FOUND)
    return ranks


def layout_body(job, user=None) -> dict:
    ranks = _job_ranks(job)
    if ranks is None:
        return {"layout": None}
    stored, table = ranks.stored, ranks.table
    analysis = analyse_layout(ranks.layout, table)
    spans, boundaries = analysis.spans, analysis.boundaries
    inter = boundaries.of_class("inter-group", limit=50)
    verdicts = span_verdicts(job, ranks, spans, user)
    return {
        "layout": {"tp": stored.tp, "pp": stored.pp, "cp": stored.cp, "ep": stored.ep, "etp": stored.etp, "dp": stored.dp,
                   "vpp": stored.vpp, "order": stored.order, "world_size": stored.world_size, "source": stored.source,
                   "exact_map": stored.rank_map is not None, "warnings": stored.warnings},
        # Each kind with how it is likely to perform there (level, verdict): the words of the page's table.
        "communicators": [{**span.as_dict(), **verdicts[span.kind].as_dict()} for span in spans],
        "pipeline": {"boundaries": len(boundaries), "inter_group": boundaries.count("inter-group"),
                     "verdict": boundary_verdict(boundaries), "inter_group_examples": [b.__dict__ for b in inter]},
        # Hosts of the rank map the topology cannot place on a NIC: their ranks keep host and GPU.
        "placement": table.gaps.as_dict(table.world_size),
    }


class LayoutView(APIView):
    """The job's Megatron layout (sizes, and the exact rank map when given) and its placement."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [BoundedJSONParser]

    @extend_schema(responses={200: LayoutResponse})
    def get(self, request, cluster: str, job_id: int):
        return Response(layout_body(_job_for(request, cluster, job_id, write=False), request.user))

    @extend_schema(request=LayoutSerializer, responses={200: LayoutResponse})
    def put(self, request, cluster: str, job_id: int):
        job = _job_for(request, cluster, job_id, write=True)
        serializer = LayoutSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        _store(job, data, source="map" if data.get("ranks") else "sizes", submitted_by=request.user.get_username())
        return Response(layout_body(job, request.user))


class LayoutLogView(APIView):
    """Upload rank 0's output (Megatron argument dump, srun -l labels, NCCL INFO lines) as ``log``
    (multipart) or as the text/plain body; Belvedere reads the layout and rank map from it."""

    authentication_classes = JOB_API_AUTHENTICATION
    parser_classes = [BoundedMultiPartParser, BoundedFormParser]

    @extend_schema(request={"multipart/form-data": LogUploadSerializer}, responses={200: LayoutResponse})
    def post(self, request, cluster: str, job_id: int):
        job = _job_for(request, cluster, job_id, write=True)
        upload = request.FILES.get("log")
        if upload is None:
            raise InputError("Send the log as the multipart field 'log'.", [ErrorItem("required", field="log")])
        if upload.size > MAX_LOG_BYTES:
            raise InputError(f"The log is {upload.size // 2**20} MiB; at most {MAX_LOG_BYTES // 2**20} MiB are read.",
                             [ErrorItem("too large", field="log")], status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        text = upload.read().decode("utf-8", errors="replace")
        try:
            parsed = parse_megatron_log(text)
        except LogParseError as exc:
            raise InputError(f"Could not read a layout from the log: {exc}", [ErrorItem(str(exc), field="log")]) from None
        # The sizes read from the log meet the bounds a PUT meets (a 12-digit num_layers would overflow
        # PostgreSQL's integer column: a 500). The rank map is the parser's own, bounded output.
        sizes = LayoutSerializer(data={key: value for key, value in parsed.sizes.items() if key != "world_size"})
        if not sizes.is_valid():
            problems = flatten_validation_detail(sizes.errors)
            raise InputError(f"The layout read from the log is out of range: {problems[0].field}: {problems[0].message}",
                             [ErrorItem(f"{problem.field}: {problem.message}", field="log") for problem in problems])
        data = dict(sizes.validated_data)
        if parsed.ranks:
            data["ranks"] = parsed.ranks
        _store(job, data, source="log", submitted_by=request.user.get_username(), warnings=parsed.warnings)
        return Response(layout_body(job, request.user))


class RanksView(APIView):
    """Ranks of the job with coordinates and hardware, optionally only some (e.g. ?dp=1&pp=6,7). A value
    the layout does not have is a 400 that names the parameter and the range ("stage 8 does not exist:
    stages 0–7"), not an empty list."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[RankFilterParams], responses={200: {"type": "array", "items": {"type": "object"}}})
    def get(self, request, cluster: str, job_id: int):
        job = _job_for(request, cluster, job_id, write=False)
        params = parse_query(request, RankFilterParams)
        wanted = {name: params.get(name) or None for name in DIMENSIONS}
        ranks = _job_ranks_or_404(job)
        sizes = ranks.layout.sizes_by_name
        problems = [ErrorItem(message, field=name) for name, values in wanted.items()
                    if values and (message := out_of_range(values, sizes[name], name))]
        if problems:
            raise InputError(f"{len(problems)} problem{'s' if len(problems) > 1 else ''} in the request: "
                             + "; ".join(f"{item.field}: {item.message}" for item in problems), problems)
        return Response(ranks.table.rows(ranks.table.select(**wanted)))


class RankFigureView(APIView):
    """The rank map as Plotly figure JSON, coloured by a coordinate (pp, dp, tp, ...) or by a GPU
    colouring the job offers (saturation, limiter, straggler), with the selection sel_dp, sel_pp,
    sel_tp marked. The job page draws it after the first paint and redraws it in place.

    A selection field with a problem is answered 200 with the figure drawn without that field and
    the reason in ``errors`` under its name (what the page shows next to the field); an unknown or
    unavailable ``colour`` is a 400 naming ``colour``; a job without a layout is a 404. Answers carry
    an ETag (If-None-Match gets a 304) and are cached under it."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(parameters=[RankFigureParams], responses={200: RankFigureResponse})
    def get(self, request, cluster: str, job_id: int):
        job = _job_for(request, cluster, job_id, write=False)
        params = parse_query(request, RankFigureParams)
        ranks = _job_ranks_or_404(job)
        fields = {name: params.get(f"sel_{name}") or "" for name in ("dp", "pp", "tp")}
        try:
            version, build = figure_answer(job, ranks, params.get("colour") or "pp", fields)
        except ColourUnavailable as exc:
            raise InputError(f"colour: {exc}", [ErrorItem(str(exc), field="colour")]) from None
        renderer = request.accepted_renderer
        if getattr(renderer, "format", None) != "json":  # the browsable API: not cached
            return Response(build())
        media_type = renderer.media_type + (f"; charset={renderer.charset}" if renderer.charset else "")
        return product_response(
            request, name="ranks-api:ranks-figure", version=ProductVersion(tag=version, job=job.pk), params=params,
            content_type=media_type, representation=request.accepted_media_type or media_type, vary=VARY + ("Accept",),
            render=lambda: renderer.render(build(), request.accepted_media_type, self.get_renderer_context()))
