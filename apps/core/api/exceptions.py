"""One error format for every 4xx answer of the API.

    {"detail": "one sentence for a human",
     "errors": [{"field": "nodes", "line": null, "message": "..."}, ...]}

``field`` is a dotted path into the request body (``ranks.3.host``) or null for errors about
the request as a whole; ``line`` (and, where known, ``column``) point into an uploaded text such
as an EDF or a log. Raise :class:`InputError` to report positioned problems.
"""
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


@dataclass(frozen=True)
class ErrorItem:
    message: str
    field: str | None = None
    line: int | None = None
    column: int | None = None

    def as_dict(self) -> dict:
        item = {"field": self.field, "line": self.line, "message": self.message}
        if self.column is not None:
            item["column"] = self.column
        return item


class InputError(exceptions.APIException):
    """A 400 whose problems are already positioned (field, line, column)."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The request could not be processed."

    def __init__(self, detail: str, errors: list[ErrorItem] | None = None, status_code: int | None = None):
        super().__init__(detail)
        self.errors = list(errors or [])
        if status_code is not None:
            self.status_code = status_code


def flatten_validation_detail(detail, prefix: str | None = None) -> list[ErrorItem]:
    """Turn DRF's nested ``{field: [messages]}`` structure into a flat list of ErrorItems."""
    items: list[ErrorItem] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            if key in ("non_field_errors", "__all__"):
                child = prefix
            else:
                child = f"{prefix}.{key}" if prefix else str(key)
            items.extend(flatten_validation_detail(value, child))
    elif isinstance(detail, list):
        if all(not isinstance(value, (dict, list)) for value in detail):
            items.extend(ErrorItem(message=str(value), field=prefix) for value in detail)
        else:
            for index, value in enumerate(detail):
                if value:
                    items.extend(flatten_validation_detail(value, f"{prefix}.{index}" if prefix else str(index)))
    else:
        items.append(ErrorItem(message=str(detail), field=prefix))
    return items


def error_body(detail: str, errors: list[ErrorItem] | None = None) -> dict:
    return {"detail": detail, "errors": [error.as_dict() for error in errors or []]}


def api_exception_handler(exc, context):
    """DRF exception handler producing the common error body for every handled exception."""
    if isinstance(exc, RequestDataTooBig):
        # Django refuses a body past DATA_UPLOAD_MAX_MEMORY_SIZE (DRF reads JSON and form bodies
        # through request.body): the API says so with a 413 instead of Django's generic 400.
        exc = InputError(f"The request body is larger than this API accepts (at most "
                         f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes per request).", status_code=413)
    elif isinstance(exc, TooManyFieldsSent):
        exc = InputError(f"The request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields.")
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, DjangoValidationError):
        # Services raise Django's ValidationError so forms and the API share one rule set.
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, InputError):
        response.data = error_body(str(exc.detail), exc.errors)
    elif isinstance(exc, exceptions.ValidationError):
        errors = flatten_validation_detail(exc.detail)
        count = len(errors)
        summary = errors[0].message if count == 1 and errors[0].field is None else (
            f"{count} problem{'s' if count != 1 else ''} in the request: "
            + "; ".join(f"{e.field or 'request'}: {e.message}" for e in errors[:3])
            + ("; ..." if count > 3 else "")
        )
        response.data = error_body(summary, errors)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        if isinstance(detail, (dict, list)):
            errors = flatten_validation_detail(detail)
            response.data = error_body(errors[0].message if errors else "Request failed.", errors)
        else:
            response.data = error_body(str(detail))
    return response


def json_error_response(status_code: int, detail: str) -> Response:
    return Response(error_body(detail), status=status_code)
