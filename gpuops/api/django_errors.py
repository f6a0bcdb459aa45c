"""Errors Django answers itself (outside DRF's exception handler) in the API's JSON shape for /api/ paths.

DRF views answer their own errors through gpuops.api.exceptions; what reaches these handlers is what DRF never
sees: an unknown path, an exception in a plain Django view or middleware (500), Django's CSRF check on a plain
view. A script calling /api/ must never get an HTML page, so for /api/ paths each answers the error envelope;
everywhere else Django's own pages stay.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import csrf as django_csrf
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from .exceptions import error_body

API_PREFIX = "/api/"


def is_api_path(request: HttpRequest) -> bool:
    return request.path_info.startswith(API_PREFIX)


def api_error(request: HttpRequest, status: int, code: str, message: str) -> JsonResponse:
    body = error_body(code=code, message=message, request_id=getattr(request, "request_id", ""))
    return JsonResponse(body, status=status)


@csrf_exempt  # a stray POST to an unknown path must get the JSON 404, not Django's HTML CSRF page
def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """Unknown paths under /api/ answer in the API's error shape."""
    hint = " (API paths end with a slash)" if not request.path.endswith("/") else ""
    return api_error(request, 404, "not_found", f"No API endpoint at {request.path}{hint}.")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return api_not_found(request)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_path(request):
        return api_error(request, 500, "server_error", "Internal server error; quote the request id when reporting it.")
    return defaults.server_error(request)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return api_error(request, 400, "bad_request", "Bad request.")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_path(request):
        return api_error(request, 403, "permission_denied", "You do not have permission to perform this action.")
    return defaults.permission_denied(request, exception)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a session-authenticated unsafe request without the CSRF token."""
    if is_api_path(request):
        return api_error(
            request,
            403,
            "permission_denied",
            f"CSRF check failed ({reason}); send the X-CSRFToken header, or use a token.",
        )
    return django_csrf.csrf_failure(request, reason)


_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    412: "precondition_failed",
    413: "too_large",
    415: "unsupported_media_type",
    429: "throttled",
    500: "server_error",
}


class ApiErrorEnvelopeMiddleware:
    """Any error response under /api/ that is not JSON (Django's 405 of a plain view, an HTML page from a
    handler we do not own) leaves as the JSON envelope, with its status and headers (Allow, WWW-Authenticate)
    kept: one mechanism, so a new plain view cannot leak an HTML error page."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not is_api_path(request) or getattr(response, "streaming", False):
            return response
        content_type = response.get("Content-Type", "")
        if "json" in content_type:
            return response
        status = response.status_code
        message = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        if status == 405:
            message = f"Method {request.method} not allowed; use {response.get('Allow', 'another method')}."
        envelope = api_error(request, status, _CODES.get(status, "error"), f"{message}.".replace("..", "."))
        for header in ("Allow", "WWW-Authenticate", "Retry-After", "X-Request-ID"):
            if header in response:
                envelope[header] = response[header]
        return envelope
