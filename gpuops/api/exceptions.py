"""One JSON error shape for every API error, and the exceptions our views raise beyond DRF's own.

Every error response body is::

    {"error": {"code": "invalid", "message": "serial: This field is required.",
               "fields": {"serial": ["This field is required."]},
               "row": 3, "rows": [{"row": 3, "fields": {...}}],        # bulk requests only
               "request_id": "4f0c..."}}

`code` is stable and machine-readable, `message` is for people, `fields` names the offending fields, `row` is
the 0-based index of the first bad row of a bulk request, and `request_id` is the X-Request-ID of the request
(also the correlation id of any change records it wrote).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from gpuops.context import current_context

logger = logging.getLogger("gpuops.api")


class PreconditionFailed(exceptions.APIException):
    """412: the client's If-Match / `version` does not match the stored version (someone changed it since)."""

    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object was changed since you read it; fetch it again and retry."
    default_code = "precondition_failed"

    def __init__(self, detail: str | None = None, *, row: int | None = None, current_version: int | None = None):
        super().__init__(detail)
        self.row = row
        self.current_version = current_version


class Conflict(exceptions.APIException):
    """409: the write collides with the state of the database (a protected reference, a unique row)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the data."
    default_code = "conflict"

    def __init__(
        self,
        detail: str | None = None,
        *,
        row: int | None = None,
        code: str | None = None,
        extra: dict[str, Any] | None = None,
    ):
        super().__init__(detail, code)
        self.row = row
        self.extra = dict(extra or {})


class RowPermissionDenied(exceptions.PermissionDenied):
    """403 for one row of a bulk request."""

    def __init__(self, detail: str | None = None, *, row: int | None = None):
        super().__init__(detail)
        self.row = row


class RowNotFound(exceptions.NotFound):
    """404 for one row of a bulk request (the id does not exist or is not visible to the user)."""

    def __init__(self, detail: str | None = None, *, row: int | None = None):
        super().__init__(detail)
        self.row = row


class BulkValidationError(exceptions.ValidationError):
    """400 for a bulk request: `rows` maps each bad row's index to its field errors."""

    def __init__(self, rows: dict[int, Any]):
        self.rows = {idx: _as_field_errors(errors) for idx, errors in sorted(rows.items())}
        first = next(iter(self.rows))
        super().__init__(self.rows[first])
        self.row = first


def _as_field_errors(detail: Any) -> dict[str, list[str]]:
    """DRF/Django error details -> {field: [messages]}, nested serializers flattened to dotted names."""
    if isinstance(detail, DjangoValidationError):
        detail = detail.message_dict if hasattr(detail, "error_dict") else {"non_field_errors": detail.messages}
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = "non_field_errors" if key in ("__all__", None) else str(key)
            if isinstance(value, dict):
                for sub, messages in _as_field_errors(value).items():
                    out[f"{name}.{sub}"] = messages
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                # A list of nested objects (many=True): name the index of each bad item.
                for i, item in enumerate(value):
                    for sub, messages in _as_field_errors(item).items():
                        out[f"{name}.{i}.{sub}"] = messages
            elif isinstance(value, list | tuple):
                out[name] = [str(v) for v in value]
            else:
                out[name] = [str(value)]
        return out
    if isinstance(detail, list | tuple):
        return {"non_field_errors": [str(v) for v in detail]}
    return {"non_field_errors": [str(detail)]}


def _summary(fields: dict[str, list[str]]) -> str:
    parts = []
    for name, messages in fields.items():
        text = " ".join(messages)
        parts.append(text if name == "non_field_errors" else f"{name}: {text}")
    return "; ".join(parts) or "Invalid input."


def _request_id(context: dict[str, Any]) -> str:
    request = context.get("request")
    django_request = getattr(request, "_request", request)
    return getattr(django_request, "request_id", "") or current_context().correlation_id


def error_body(
    *,
    code: str,
    message: str,
    request_id: str,
    fields: dict[str, list[str]] | None = None,
    row: int | None = None,
    rows: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    if row is not None:
        body["row"] = row
    if rows:
        body["rows"] = rows
    if extra:
        body.update(extra)
    body["request_id"] = request_id
    return {"error": body}


def _translate(exc: Exception) -> Exception:
    """Map Django and database exceptions that escape a view onto API exceptions."""
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if getattr(exc, "http_conflict", False):
        # A domain refusal from an app's service (e.g. cmdb.holds.HeldError: the node is held by a ticket). The
        # exception carries its code and extra body fields; gpuops does not import the apps.
        return Conflict(str(exc), code=getattr(exc, "code", None), extra=getattr(exc, "extra", None))
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied(*exc.args)
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(_as_field_errors(exc))
    if isinstance(exc, ProtectedError | RestrictedError):
        blockers = sorted({str(o) for o in list(exc.args[1])[:5]}) if len(exc.args) > 1 else []
        suffix = f" Still referenced by: {', '.join(blockers)}." if blockers else ""
        return Conflict(f"Cannot delete: other objects depend on it.{suffix}", row=getattr(exc, "row", None))
    if isinstance(exc, IntegrityError):
        # Validation runs before every write, so this is a race with a concurrent writer (or a rule the
        # validators do not know). The database message names the constraint; it holds no user data.
        return Conflict(
            f"The database refused the write: {str(exc).splitlines()[0][:200]}", row=getattr(exc, "row", None)
        )
    return exc


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF EXCEPTION_HANDLER: every error, including unexpected ones, leaves as the JSON error shape."""
    exc = _translate(exc)
    request_id = _request_id(context)
    response = drf_exception_handler(exc, context)  # keeps DRF's WWW-Authenticate / Retry-After headers
    if response is None:
        logger.exception("Unhandled API error (request %s)", request_id, exc_info=exc)
        set_rollback()
        return Response(
            error_body(
                code="server_error",
                message="Internal server error; quote the request id when reporting it.",
                request_id=request_id,
            ),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    assert isinstance(exc, exceptions.APIException)
    row = getattr(exc, "row", None)
    rows: list[dict[str, Any]] | None = None
    extra: dict[str, Any] = {}
    if isinstance(exc, exceptions.ValidationError):
        fields = _as_field_errors(exc.detail)
        code = "invalid"
        message = _summary(fields)
        if isinstance(exc, BulkValidationError):
            rows = [{"row": idx, "fields": errs} for idx, errs in exc.rows.items()]
            message = f"Row {row}: {message}" + (f" (and {len(rows) - 1} more bad rows)" if len(rows) > 1 else "")
    else:
        fields = None
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        message = str(exc.detail) if not isinstance(exc.detail, list | dict) else _summary(_as_field_errors(exc.detail))
        if row is not None:
            message = f"Row {row}: {message}"
        if isinstance(exc, PreconditionFailed) and exc.current_version is not None:
            extra["current_version"] = exc.current_version
        if isinstance(exc, Conflict):
            extra.update(exc.extra)
    response.data = error_body(
        code=str(code), message=message, request_id=request_id, fields=fields, row=row, rows=rows, extra=extra
    )
    return response
