"""Signed inbound webhooks: verify, validate, store, answer 202, process on commit in a Celery task.

`SignedEventWebhook` is shared by the procurement endpoint (below) and the WMS endpoint
(integrations.warehouse.webhooks): a subclass names its channel (which picks the processing task, see
inbound.CHANNEL_TASKS), its sources setting and its per-type data schemas. Nothing is processed inside the
request, so the peer gets its answer in milliseconds and a slow or failing handler never makes the peer retry a
delivery we already hold.

Answers (body: the house error shape {"error": {"code", "message", "fields"?}}):
    202 accepted (stored, processing enqueued)    200 duplicate event id (nothing changed)
    400 missing/malformed signature headers, body not JSON, schema errors (fields name each offending field)
    401 unknown source, stale timestamp, signature mismatch (wrong secret, altered body)
    413 body too large
Every refusal of authenticity is a line on the `gpuops.security` logger; nothing is written to the database.
"""

from __future__ import annotations

import json
import logging
from typing import Any, ClassVar

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from gpuops.context import ChangeSource, change_context

from .conf import procurement_setting, webhook_secrets
from .inbound import event_enqueue, event_record
from .schemas import PROCUREMENT_DATA_SCHEMAS, event_validate
from .signatures import SOURCE_HEADER, SignatureError, signature_verify

security_log = logging.getLogger("gpuops.security")
logger = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str, fields: dict[str, list[str]] | None = None) -> JsonResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return JsonResponse({"error": body}, status=status)


def _client_ip(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "?")


@method_decorator(csrf_exempt, name="dispatch")  # authenticated by the HMAC signature, not by a session
class SignedEventWebhook(View):
    """POST-only endpoint for signed events. Subclasses set the class attributes."""

    http_method_names: ClassVar[list[str]] = ["post"]
    channel: ClassVar[str] = ""
    data_schemas: ClassVar[dict[str, dict[str, Any]]] = {}

    # Hooks a subclass provides (kept as methods so settings are read per request).
    def sources(self) -> dict[str, Any]:
        raise NotImplementedError

    def window_s(self) -> int:
        return int(procurement_setting("REPLAY_WINDOW_S"))

    def max_body_bytes(self) -> int:
        return int(procurement_setting("MAX_BODY_BYTES"))

    def post(self, request: HttpRequest) -> JsonResponse:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > self.max_body_bytes():
            return error_response(413, "too_large", f"Body over {self.max_body_bytes()} bytes.")
        body = request.body
        sources = self.sources()
        try:
            verified = signature_verify(
                headers=request.headers,
                body=body,
                window_s=self.window_s(),
                secrets_for={name: webhook_secrets(sources, name) for name in sources},
            )
        except SignatureError as exc:
            security_log.warning(
                "%s webhook refused: %s (%s) source=%r ip=%s path=%s",
                self.channel,
                exc.reason,
                exc,
                request.headers.get(SOURCE_HEADER, "")[:64],
                _client_ip(request),
                request.path,
            )
            code = "not_authenticated" if exc.status == 401 else "invalid_signature_headers"
            return error_response(exc.status, code, str(exc))
        try:
            event = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return error_response(400, "invalid", "The body is not JSON.", {"body": ["Not valid JSON."]})
        fields = event_validate(event, self.data_schemas)
        if fields:
            first = next(iter(fields))
            return error_response(400, "invalid", f"{first}: {fields[first][0]}", fields)
        with transaction.atomic(), change_context(source=ChangeSource.INTEGRATION):
            row, created = event_record(
                channel=self.channel, source=verified.source, event=event, signed_with=verified.secret_index
            )
            if created:
                transaction.on_commit(lambda: event_enqueue(row))
        if not created:
            same = row.payload == event
            security_log.info(
                "%s webhook: replayed event id %s from %s (%s payload); ignored",
                self.channel,
                event["id"],
                verified.source,
                "same" if same else "DIFFERENT",
            )
            return JsonResponse({"status": "duplicate", "event_id": event["id"]}, status=200)
        if verified.secret_index > 0:
            logger.info(
                "%s event %s verified with the previous secret of %s (rotation in progress)",
                self.channel,
                event["id"],
                verified.source,
            )
        return JsonResponse({"status": "accepted", "event_id": event["id"]}, status=202)


class ProcurementEventWebhook(SignedEventWebhook):
    """POST /api/integrations/procurement/events/ - events from the procurement system."""

    channel = "procurement"
    data_schemas = PROCUREMENT_DATA_SCHEMAS

    def sources(self) -> dict[str, Any]:
        return procurement_setting("WEBHOOK_SOURCES")
