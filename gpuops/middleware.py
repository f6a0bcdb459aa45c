"""Request-scoped change context and request ids."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from .context import ChangeSource, change_context, new_correlation_id
from .logs import log_scope, request_log

REQUEST_ID_HEADER = "X-Request-ID"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


class ChangeContextMiddleware:
    """Sets actor, source (by URL area) and a request id for everything the request changes, and writes the
    request's log line (gpuops.logs: method, path, status, duration, request id, user).

    A client may send its own X-Request-ID (for tracing across systems); anything that does not look like an
    id is replaced, so log lines and change records cannot be injected into.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        incoming = request.headers.get(REQUEST_ID_HEADER, "")
        request_id = incoming if _SAFE_ID.match(incoming) else new_correlation_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        path = request.path_info
        if path.startswith("/admin/"):
            source = ChangeSource.ADMIN
        elif path.startswith("/api/agent/"):
            source = ChangeSource.AGENT
        elif path.startswith("/api/integrations/"):
            source = ChangeSource.INTEGRATION
        elif path.startswith("/api/"):
            source = ChangeSource.API
        else:
            source = ChangeSource.UI
        # The user is resolved lazily: DRF token auth sets it later, so the actor is read through the request.
        with change_context(actor=_LazyActor(request), source=source, correlation_id=request_id), log_scope():
            response = self.get_response(request)
            request_log(request, response.status_code, started, request_id)
        response[REQUEST_ID_HEADER] = request_id
        return response


class _LazyActor:
    """Resolves to request.user at the time a change is recorded (after DRF authentication ran)."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    def _user(self):
        user = getattr(self._request, "user", None)
        drf_request = getattr(self._request, "_gpuops_drf_user", None)
        return drf_request or user

    def resolve(self):
        """The user itself, for permission checks (ChangeContext.user)."""
        return self._user()

    @property
    def is_authenticated(self) -> bool:
        user = self._user()
        return bool(user is not None and user.is_authenticated)

    @property
    def pk(self):
        user = self._user()
        return user.pk if user is not None and user.is_authenticated else None

    def __str__(self) -> str:
        user = self._user()
        return str(user) if user is not None else "anonymous"
