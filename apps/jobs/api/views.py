from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, permissions, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from apps.core.api.authentication import JOB_API_AUTHENTICATION

from ..authentication import token_job
from ..filtersets import JobFilterSet
from ..selectors import job_get_for_user, job_list_for_user, job_may_issue_token
from ..services import JobEvent, job_event_apply, job_token_issue
from .openapi import JobEventResponse, JobFirstScreenResponse, JobTokenResponse
from .serializers import JobDetailSerializer, JobEventSerializer, JobListSerializer


class JobListView(generics.ListAPIView):
    """Jobs visible to the caller (own, own accounts', or all for staff), with the list page's filters."""

    serializer_class = JobListSerializer
    filterset_class = JobFilterSet
    authentication_classes = JOB_API_AUTHENTICATION

    def get_queryset(self):
        return job_list_for_user(self.request.user, token_job(self.request))


class JobFirstScreenView(APIView):
    """The first screen of the job's page as data: facts, findings (most urgent first) and what panels put behind
    them (versions of the nodes, pre-flight results). 404 unless the caller may see the job."""

    authentication_classes = JOB_API_AUTHENTICATION

    @extend_schema(responses={200: JobFirstScreenResponse})
    def get(self, request, cluster, job_id):
        from ..pagecache import cached_first_screen

        job = job_get_for_user(request.user, cluster, job_id, token_job(request))
        if job is None:
            raise Http404
        first = cached_first_screen(job)
        summary = first.summary
        return Response({
            "cluster": job.cluster.name, "job_id": job.job_id, "computed": first.computed,
            "facts": [{"label": f.label, "value": f.value, "detail": f.detail, "level": f.level, "link": f.link}
                      for f in summary.facts],
            "findings": [{"level": f.level, "title": f.title, "action": f.action, "link": f.link, "source": f.source}
                         for f in summary.findings],
            "versions": summary.data.get("versions"), "preflight": summary.data.get("preflight"),
            "retention": summary.data.get("retention"),
        })


class JobDetailView(generics.RetrieveAPIView):
    """One job with its steps. 404 unless the caller may see it."""

    serializer_class = JobDetailSerializer
    authentication_classes = JOB_API_AUTHENTICATION

    def get_object(self):
        job = job_get_for_user(self.request.user, self.kwargs["cluster"], self.kwargs["job_id"], token_job(self.request))
        if job is None:
            raise Http404
        return job


class CanPostJobEvents(permissions.BasePermission):
    message = "Posting job events needs staff rights or the jobs.add_job permission (the prolog's service token)."

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_authenticated and token_job(request) is None and (user.is_staff or user.has_perm("jobs.add_job")))


class JobEventView(APIView):
    """Job start/end and step start/end events, posted by the Slurm prolog/epilog."""

    permission_classes = [CanPostJobEvents]

    @extend_schema(request=JobEventSerializer, responses={200: JobEventResponse})
    def post(self, request):
        serializer = JobEventSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        issue_token = data.pop("token")
        job = job_event_apply(JobEvent(**data))
        body = {"cluster": job.cluster.name, "job_id": job.job_id, "state": job.state,
                "url": request.build_absolute_uri(f"/jobs/{job.cluster.name}/{job.job_id}/")}
        if issue_token and data["event"] == "start":
            body["job_token"] = job_token_issue(job, created_by=request.user.get_username())
        return Response(body)


class JobTokenView(APIView):
    """Issue a job token for one of your own jobs (shown once); staff may issue one for any job.
    Code inside the job then uses ``Authorization: JobToken <key>`` to read and post data for that
    job only. Members of the job's account see the job but get 403 here: a token can write."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "job_token"

    @extend_schema(request=None, responses={201: JobTokenResponse})
    def post(self, request, cluster: str, job_id: int):
        job = job_get_for_user(request.user, cluster, job_id, token_job(request))
        if job is None:
            raise Http404
        if not job_may_issue_token(request.user, job):
            raise exceptions.PermissionDenied(
                f"Only the job's user ({job.user_name}) or staff may issue a token for job {cluster}/{job_id}.")
        key = job_token_issue(job, created_by=request.user.get_username())
        return Response({"job_token": key, "cluster": cluster, "job_id": job_id, "header": f"Authorization: JobToken {key}"},
                        status=status.HTTP_201_CREATED)
