"""Schemathesis over the whole API as a researcher and as staff (issue 16, acceptance 1).

Requests are generated from /api/schema/ itself, valid ones and deliberately invalid ones, and sent
in-process through the WSGI application onto the demo system. Every answer is checked against the
schema: no 5xx, a documented status code, a documented content type, a body that matches the
documented schema. Path parameters point at real demo objects for half of the requests (the rest
stay random, which probes the 404 paths), so query and body fuzzing reaches the code behind them.

Generation is derandomized: the same schema gives the same requests on every run.
"""
import itertools
from collections import Counter, defaultdict

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given
from hypothesis.errors import Unsatisfiable
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.demo_snapshot import load_demo

pytestmark = [pytest.mark.django_db]

# Examples per operation, identity and generation mode; Hypothesis stops early for operations whose
# inputs have fewer distinct values, which is why the total is counted and asserted below.
EXAMPLES = 15
MIN_REQUESTS = 3000
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def _known_values(researcher) -> dict:
    """Real demo objects for each path parameter name, by the path's first segment."""
    from apps.catalog.models import DataProduct
    from apps.edf.models import EdfDocument
    from apps.jobs.models import Job
    from apps.namespaces.models import ManagedNamespace, NamespaceRequest
    from apps.vetting.models import Recommendation, Rule, VettingRun

    job = Job.objects.select_related("cluster").filter(user_name=researcher.get_username()).order_by("-submit_time").first()
    host = (job.node_list or [""])[0] if job else ""
    document = EdfDocument.objects.filter(owner=researcher).first()
    namespace = ManagedNamespace.objects.first()
    values = {
        "cluster": job.cluster.name if job else "alps",
        "job_id": job.job_id if job else 1,
        "owner": researcher.get_username(),
        "table": "gpus",
        "extension": "csv",
        "hostname": host,
        "host": host,
        "slug": getattr(Rule.objects.first(), "slug", "x"),
        ("edf", "name"): document.name if document else "x",
        ("catalog", "name"): getattr(DataProduct.objects.first(), "name", "x"),
        ("namespaces", "name"): namespace.name if namespace else "x",
        ("namespaces", "id"): getattr(NamespaceRequest.objects.first(), "pk", 1),
        ("vetting", "id"): getattr(VettingRun.objects.first(), "pk", 1),
        ("recommendations", "id"): getattr(Recommendation.objects.first(), "pk", 1),
        ("projects", "id"): researcher.memberships.first().project_id if researcher.memberships.exists() else 1,
    }
    return values


def _value_for(values: dict, path: str, name: str):
    segments = [segment for segment in path.split("/") if segment and not segment.startswith("{")]
    for segment in reversed(segments):
        if (segment, name) in values:
            return values[(segment, name)]
    return values.get(name)


def _fuzz(schema, identity: str, headers: dict, values: dict, counts: Counter, failures: dict,
          statuses: Counter, modes: tuple) -> None:
    toggle = itertools.count()
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in modes:
            strategy = operation.as_strategy(generation_mode=mode)

            @given(case=strategy)
            @hypothesis_settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                                 phases=[Phase.explicit, Phase.generate],
                                 suppress_health_check=list(HealthCheck))
            def run(case):
                if case.path_parameters and next(toggle) % 2 == 0:
                    for name in case.path_parameters:
                        real = _value_for(values, operation.path, name)
                        if real is not None:
                            case.path_parameters[name] = real
                counts[identity] += 1
                try:
                    # The in-process WSGI transport does not undo Content-Encoding; compression has tests of its own.
                    response = case.call(headers={**headers, "Accept-Encoding": "identity"})
                    statuses[response.status_code // 100] += 1
                    case.validate_response(response, checks=CHECKS)
                except (AssertionError, FailureGroup) as exc:
                    kinds = [type(item).__name__ for item in getattr(exc, "exceptions", [exc])]
                    key = (identity, operation.label, mode.value, ",".join(sorted(kinds)))
                    failures.setdefault(key, f"{str(exc)[:400]}\n    reproduce: {case.as_curl_command()}")

            try:
                run()
            except Unsatisfiable:
                # No invalid request can be expressed for an operation without parameters or body.
                assert mode is GenerationMode.NEGATIVE, f"{operation.label}: no valid request could be generated"


@pytest.fixture
def in_process_wsgi():
    """Requests made straight to the WSGI application end with Django closing the database
    connection, which would end the test's transaction; Django's own test client disconnects the
    same handlers while it runs."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_the_whole_api_answers_as_documented_for_a_researcher_and_for_staff(transactional_db, django_user_model, in_process_wsgi):
    from rest_framework.authtoken.models import Token

    from portal.wsgi import application

    load_demo()
    researcher = django_user_model.objects.get(username="demo")
    staff = django_user_model.objects.get(username="staff")
    values = _known_values(researcher)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

    counts: Counter = Counter()
    failures: dict = {}
    statuses: Counter = Counter()
    # Valid requests as both: what each may see differs. Invalid ones as staff only: they test the validation
    # in front of the code, the same for both, and staff reach the validation of every operation (a researcher
    # is refused the staff-only ones before it), so sending them twice repeated the same work (about a minute).
    for identity, user, modes in (("researcher", researcher, (GenerationMode.POSITIVE,)),
                                  ("staff", staff, (GenerationMode.POSITIVE, GenerationMode.NEGATIVE))):
        token, _ = Token.objects.get_or_create(user=user)
        _fuzz(schema, identity, {"Authorization": f"Token {token.key}"}, values, counts, failures, statuses, modes)

    print(f"schemathesis: {sum(counts.values())} requests ({dict(counts)}), answers by class "
          f"{ {f'{k}xx': v for k, v in sorted(statuses.items())} }, {len(failures)} distinct failures")
    by_operation = defaultdict(list)
    for (identity, label, mode, kind), text in sorted(failures.items()):
        by_operation[label].append(f"[{identity}, {mode}] {kind}: {text}")
    report = "\n\n".join(f"{label}\n  " + "\n  ".join(items) for label, items in by_operation.items())
    assert not failures, f"{len(failures)} schemathesis failures:\n{report}"
    assert sum(counts.values()) >= MIN_REQUESTS, f"only {sum(counts.values())} requests were generated"
    # The fuzzing reached the code behind the checks, not only the refusals in front of it.
    assert statuses[2] >= 500, statuses
