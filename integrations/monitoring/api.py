"""/api/integrations/alerts/: the Alertmanager webhook, the generic intake, and the list of received alerts.

Intake answers (body: the house error shape {"error": {"code", "message", "fields"?}}):
    200 {"received": n, "outcomes": {"applied": 1, "unmatched": 1, ...}, "ids": [...]}
    400 the body is not JSON or a field is malformed (`fields` names it, e.g. "alerts[0].startsAt")
    401 no `Authorization: Bearer <token>`, or a token of no active alert source
    413 body too large
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar

from django.http import HttpRequest, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, serializers

from gpuops.api.viewsets import ApiViewMixin

from .models import ReceivedAlert, SourceKind
from .selectors import received_alert_list
from .services.intake import alerts_receive
from .services.payloads import IncomingAlert, PayloadError, alertmanager_parse, generic_parse
from .services.sources import alert_source_authenticate

security_log = logging.getLogger("gpuops.security")
MAX_BODY_BYTES = 5 * 1024 * 1024


def _error(status: int, code: str, message: str, fields: dict[str, list[str]] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    response = JsonResponse({"error": body}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="gpuops alerts"'
    return response


@method_decorator(csrf_exempt, name="dispatch")  # authenticated by the source's bearer token, not a session
class AlertIntakeView(View):
    http_method_names: ClassVar[list[str]] = ["post"]
    parse: ClassVar[Callable[[Any], list[IncomingAlert]]]
    kinds: ClassVar[tuple[str, ...]] = (SourceKind.ALERTMANAGER, SourceKind.GENERIC)

    def post(self, request: HttpRequest) -> JsonResponse:
        source = alert_source_authenticate(request.headers.get("Authorization", ""))
        if source is None:
            security_log.warning("alert intake refused: bad or missing token ip=%s", request.META.get("REMOTE_ADDR"))
            return _error(401, "not_authenticated", "Send Authorization: Bearer <the alert source's token>.")
        if int(request.META.get("CONTENT_LENGTH") or 0) > MAX_BODY_BYTES:
            return _error(413, "too_large", f"Body over {MAX_BODY_BYTES} bytes.")
        try:
            body = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "invalid", "The body is not JSON.", {"body": ["Not valid JSON."]})
        try:
            alerts = type(self).parse(body)
        except PayloadError as exc:
            return _error(400, "invalid", str(exc), {exc.field: [exc.reason]})
        result = alerts_receive(source=source, alerts=alerts)
        return JsonResponse(result.as_json(), status=200)


class AlertmanagerWebhookView(AlertIntakeView):
    """POST /api/integrations/alerts/alertmanager/ - Alertmanager's webhook_config (body version "4")."""

    parse = staticmethod(alertmanager_parse)


class GenericAlertView(AlertIntakeView):
    """POST /api/integrations/alerts/generic/ - other monitors (docs/monitoring.md)."""

    parse = staticmethod(generic_parse)


class ReceivedAlertSerializer(serializers.ModelSerializer):
    source = serializers.CharField(source="source.name", default=None)
    node = serializers.CharField(source="node.hostname", default=None)
    accelerator = serializers.CharField(source="accelerator.serial", default=None)
    rule = serializers.CharField(source="rule.name", default=None)

    class Meta:
        model = ReceivedAlert
        fields = [
            "id",
            "source",
            "alertname",
            "status",
            "fingerprint",
            "starts_at",
            "ends_at",
            "labels",
            "annotations",
            "value",
            "rule",
            "is_matched",
            "unmatched_reason",
            "node",
            "accelerator",
            "health_event",
            "error",
            "notifications",
            "received_at",
            "updated_at",
        ]
        read_only_fields = fields


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=["firing", "resolved"], description="Only alerts in this state."),
            OpenApiParameter("matched", str, enum=["true", "false"], description="Matched a node or card, or not."),
        ]
    )
)
class ReceivedAlertList(ApiViewMixin, generics.ListAPIView):
    """GET /api/integrations/alerts/ - received alerts, newest first; `?status=firing|resolved`,
    `?matched=true|false`. A user sees the alerts of the nodes they may see; unmatched alerts with no node
    only with the global view permission on received alerts."""

    serializer_class = ReceivedAlertSerializer

    def get_queryset(self):
        qs = received_alert_list(self.request.user)
        status = self.request.query_params.get("status")
        if status:
            if status not in ("firing", "resolved"):
                raise serializers.ValidationError({"status": ['One of "firing", "resolved".']})
            qs = qs.filter(status=status)
        matched = self.request.query_params.get("matched")
        if matched is not None:
            if matched not in ("true", "false"):
                raise serializers.ValidationError({"matched": ['"true" or "false".']})
            qs = qs.filter(is_matched=matched == "true")
        return qs
