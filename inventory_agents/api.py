"""HTTP endpoints under /api/agent/.

- POST reports/  an agent posts its report (agent token, `Authorization: Token gpa_...`);
- POST enroll/   a new node registers itself (enrollment token, `Authorization: Token gpe_...`);
- GET  reports/ and reports/<id>/  operators read stored reports (session or API token, scoped like nodes).

Views are thin: they authenticate, bound the body and call services. Errors are JSON objects with a stable
`error` code and a `detail` sentence (plus `errors: [{path, message}]` for field-level problems).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, generics, serializers
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb import permissions
from gpuops.api.viewsets import ApiViewMixin

from .conf import setting
from .models import AgentToken, Report
from .services.ingest import report_ingest, report_too_large
from .services.tokens import EnrollmentRefused, agent_token_authenticate, node_enroll
from .services.validation import ReportProblem, report_parse, report_text_check

# The agent sends "Token" (inventory_agents/agent/transport.py); "Bearer" is accepted as well.
KEYWORDS = (b"token", b"bearer")


def _bearer(request: HttpRequest) -> str | None:
    parts = get_authorization_header(request).split()
    if len(parts) != 2 or parts[0].lower() not in KEYWORDS:
        return None
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        return None


def _error(status: int, code: str, detail: str, **extra: Any) -> Response:
    return Response({"error": code, "detail": detail, **extra}, status=status)


class AgentTokenAuthentication(BaseAuthentication):
    """`Authorization: Token <agent token>` (or Bearer); request.auth is the AgentToken, its node and the
    node's ingest state loaded with it in one query."""

    def authenticate(self, request: Request):
        token = _bearer(request._request)
        if token is None:
            return None
        row = agent_token_authenticate(token)
        if row is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked agent token.")
        # A node is not a user: changes are attributed to source "agent" and the report id, not to an actor.
        from django.contrib.auth.models import AnonymousUser

        return AnonymousUser(), row

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="gpuops-agent"'


class HasAgentToken(BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        return isinstance(request.auth, AgentToken)


class _JsonErrorsMixin:
    """DRF's own errors (401, 403, 405) in the agent protocol's {error, detail} shape, for what agents send (POST);
    people reading reports (GET) get the API's error envelope like every other list."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)  # type: ignore[misc]
        if getattr(self.request, "method", "POST") != "POST":
            return response
        if isinstance(exc, exceptions.APIException) and isinstance(response.data, dict):
            response.data = {
                "error": exc.get_codes() if isinstance(exc.get_codes(), str) else "error",
                "detail": str(exc.detail),
            }
        return response


def _read_body(request: Request) -> bytes | None:
    """The body, or None when it is larger than AGENT_REPORT_MAX_BYTES. A declared Content-Length above the
    limit is refused before anything is read; an undeclared or lying one is cut after limit + 1 bytes."""
    limit = setting("AGENT_REPORT_MAX_BYTES")
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    environ = request._request.META
    if not declared and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        # Django reads nothing without a Content-Length (its stream is limited to 0 bytes): take the WSGI input.
        stream = environ.get("wsgi.input")
        if stream is None:
            return b""
        # wsgi.input_terminated: the server de-chunked the body and ends the stream (gunicorn, mod_wsgi).
        body = stream.read(limit + 1) if environ.get("wsgi.input_terminated") else _dechunk(stream, limit)
        return None if body is None or len(body) > limit else body
    body = request._request.read(limit + 1)
    return None if len(body) > limit else body


def _dechunk(stream: Any, limit: int) -> bytes | None:
    """Decode `Transfer-Encoding: chunked` from a raw WSGI input (servers that pass the framing through, such
    as wsgiref), reading at most `limit` bytes of data. None: larger than the limit; a broken frame ends it."""
    parts: list[bytes] = []
    size = 0
    while True:
        line = stream.readline(1026)
        try:
            length = int(line.split(b";", 1)[0].strip() or b"x", 16)
        except ValueError:
            break  # not a chunk header: what came so far is the body (the JSON check refuses half a report)
        if length == 0:
            break
        size += length
        if size > limit:
            return None
        parts.append(stream.read(length))
        stream.readline(3)  # the CRLF after the chunk
    return b"".join(parts)


class EnrollView(_JsonErrorsMixin, APIView):
    """A node registers itself with the shared enrollment token and receives its own agent token (once)."""

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []

    @extend_schema(
        summary="Enroll a node",
        request={"application/json": {"type": "object"}},
        responses={201: OpenApiResponse(description="node registered, agent token issued")},
    )
    def post(self, request: Request) -> Response:
        token = _bearer(request._request)
        if token is None:
            return _error(401, "not_authenticated", "Send the enrollment token as 'Authorization: Token gpe_...'.")
        body = _read_body(request)
        if body is None:
            return _error(413, "report_too_large", "The body is too large.")
        try:
            payload = report_parse(body)
            report_text_check(payload, body)
        except ReportProblem as problem:
            return Response(problem.as_json(), status=problem.status)
        system = payload.get("system") if isinstance(payload.get("system"), dict) else {}
        hostname = payload.get("hostname")
        serial = payload.get("serial", system.get("serial_raw") or system.get("serial"))
        if not isinstance(hostname, str) or (serial is not None and not isinstance(serial, str)):
            return _error(
                400,
                "invalid_request",
                "hostname (string) is required; serial must be a string.",
                errors=[{"path": "$.hostname", "message": "required string"}],
            )
        try:
            with transaction.atomic():
                enrollment = node_enroll(enrollment_token=token, hostname=hostname, serial_raw=serial)
        except EnrollmentRefused as refusal:
            return _error(refusal.status, "enrollment_refused", str(refusal))
        except ValidationError as exc:
            return _error(400, "invalid_request", "; ".join(exc.messages))
        return Response(
            {
                "node_id": enrollment.node.pk,
                "hostname": enrollment.node.hostname,
                "created": enrollment.created,
                "status": enrollment.node.status,
                "token": enrollment.issued.token,
                "report_url": request.build_absolute_uri("/api/agent/reports/"),
            },
            status=201,
        )


class ReportSerializer(serializers.ModelSerializer):
    node = serializers.SlugRelatedField(slug_field="hostname", read_only=True)

    class Meta:
        model = Report
        fields = [
            "id",
            "node",
            "received_at",
            "collected_at",
            "schema",
            "agent_version",
            "report_hash",
            "size_bytes",
            "status",
            "errors",
            "summary",
            "duration_ms",
        ]


class ReportDetailSerializer(ReportSerializer):
    class Meta(ReportSerializer.Meta):
        fields = [*ReportSerializer.Meta.fields, "payload"]


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter("node", str, description="Node hostname."),
            OpenApiParameter("status", str, description="applied, rejected or failed."),
        ]
    )
)
class ReportsView(_JsonErrorsMixin, ApiViewMixin, generics.ListAPIView):
    """One URL, two audiences: an agent POSTs its report with its agent token; people GET the stored reports
    (newest first, `?node=<hostname>&status=applied|rejected|failed`) with their session or API token, scoped
    by site / cluster / tenant grants like the nodes themselves."""

    serializer_class = ReportSerializer
    filter_backends: list = []
    parser_classes: list = []

    def initialize_request(self, request: HttpRequest, *args, **kwargs) -> Request:
        # get_authenticators() runs before self.request exists; remember the method for it.
        self._agent_post = request.method == "POST"
        return super().initialize_request(request, *args, **kwargs)

    def get_authenticators(self):
        if getattr(self, "_agent_post", False):
            return [AgentTokenAuthentication()]
        return super().get_authenticators()

    def get_permissions(self):
        if self.request.method == "POST":
            return [HasAgentToken()]
        return super().get_permissions()

    def get_queryset(self):
        return _reports_visible(self.request)

    @extend_schema(
        summary="Post an agent report (schema gpuops.agent-report/1)",
        request={"application/json": {"type": "object"}},
        responses={
            200: OpenApiResponse(description="applied or unchanged"),
            400: None,
            401: None,
            403: None,
            413: None,
        },
    )
    def post(self, request: Request) -> Response:
        token: AgentToken = request.auth
        body = _read_body(request)
        if body is None:
            size = int(request.META.get("CONTENT_LENGTH") or 0) or setting("AGENT_REPORT_MAX_BYTES") + 1
            result = report_too_large(token=token, size=size)
            response = Response(result.body, status=result.status)
            response["Connection"] = "close"  # the unread body must not be taken for the next request
            return response
        result = report_ingest(token=token, body=body)
        response = Response(result.body, status=result.status)
        for name, value in result.headers.items():
            response[name] = value
        return response


class ReportDetailView(ApiViewMixin, generics.RetrieveAPIView):
    """One stored report with its raw payload."""

    serializer_class = ReportDetailSerializer

    def get_queryset(self):
        return _reports_visible(self.request)


def _reports_visible(request: Request):
    qs = Report.objects.select_related("node").order_by("-received_at")
    params = request.query_params
    if params.get("node"):
        qs = qs.filter(node__hostname=params["node"])
    if params.get("status"):
        qs = qs.filter(status=params["status"])
    return permissions.restrict(qs, request.user, "view")
