"""The OpenAPI side of the API bases: the shared error component, and an AutoSchema that documents what the
base viewset adds to every operation (error responses, ETag/If-Match, bulk bodies) so the schema matches what
the server does without per-view decorators.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from .writers import has_row_version

BULK_ACTIONS = frozenset({"bulk_update", "bulk_partial_update", "bulk_destroy"})


class RowErrorSerializer(serializers.Serializer):
    row = serializers.IntegerField(help_text="0-based index of the row in the request body.")

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # Declared here because a class attribute named `fields` would shadow Serializer.fields.
        fields["fields"] = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
        return fields


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="Stable machine-readable code: invalid, not_authenticated, "
        "permission_denied, not_found, method_not_allowed, precondition_failed, "
        "conflict, unsupported_media_type, throttled, server_error, ..."
    )
    message = serializers.CharField(help_text="Human-readable summary.")
    row = serializers.IntegerField(required=False, help_text="Bulk requests: index of the first bad row.")
    rows = RowErrorSerializer(many=True, required=False, help_text="Bulk requests: every bad row.")
    current_version = serializers.IntegerField(required=False, help_text="412 only: the version stored now.")
    request_id = serializers.CharField(
        help_text="The X-Request-ID of the request (also the correlation id of the change records it wrote)."
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["fields"] = serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            required=False,
            help_text="Field name -> reasons (validation errors).",
        )
        return fields


class ErrorSerializer(serializers.Serializer):
    """The body of every error response."""

    error = ErrorDetailSerializer()


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


ERRORS = {
    "400": _error("Invalid input (fields name the offending fields; bulk errors name the row)."),
    "401": _error("Not authenticated (send `Authorization: Token <key>` or log in)."),
    "403": _error("Authenticated but not allowed (no change permission, or the target scope is not yours)."),
    "404": _error("No such object, or it is not visible to you."),
    "409": _error("Conflicts with the stored data (e.g. the object is still referenced)."),
    "412": _error("If-Match / version does not match the current version: re-read and retry."),
    "415": _error("Unsupported media type (send application/json)."),
    "429": _error("Too many requests; retry after the Retry-After seconds."),
    "500": _error("Server error; quote the request_id."),
}

ETAG_HEADER = OpenApiParameter(
    "ETag",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    response=["200", "201"],
    description="Version tag of the returned object; send it back as If-Match to update or delete it.",
)
# Writes on held objects (cmdb.holds): the caller asks to force the change (needs cmdb.override_hold).
HOLD_OVERRIDE = [
    OpenApiParameter(
        "override_hold",
        OpenApiTypes.BOOL,
        OpenApiParameter.QUERY,
        required=False,
        description="Force a change of a node or card an open ticket holds (needs cmdb.override_hold; "
        "recorded on the ticket, which pauses).",
    ),
    OpenApiParameter(
        "force", OpenApiTypes.BOOL, OpenApiParameter.QUERY, required=False, description="Same as override_hold."
    ),
]
IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Write only if the object's current ETag is one of these (else 412 Precondition Failed).",
)
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="Answer 304 Not Modified when the object's ETag is one of these.",
)


@cache
def bulk_row_serializer(serializer_class: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """Schema-only variant of a serializer for bulk update rows: the same fields plus a required `id`.

    (Rows are validated by the ordinary serializer; the id picks the instance, so only the schema needs it.)
    """
    name = serializer_class.__name__.removesuffix("Serializer") + "BulkRowSerializer"
    version = serializers.IntegerField(required=False, help_text="Expected current version; a mismatch is a 412.")
    return type(
        name,
        (serializer_class,),
        {
            "__module__": serializer_class.__module__,
            "id": serializers.IntegerField(help_text="Id of the object to update."),
            "version": version,
        },
    )


class BulkIdSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="Id of the object to delete.")


class ApiAutoSchema(AutoSchema):
    """AutoSchema for views on gpuops.api.viewsets bases."""

    def _action(self) -> str | None:
        return getattr(self.view, "action", None)

    def _model_is_versioned(self) -> bool:
        queryset = getattr(self.view, "queryset", None)
        return queryset is not None and has_row_version(queryset.model)

    def _is_detail(self) -> bool:
        return "{" in self.path

    def get_tags(self) -> list[str]:
        # One tag per resource ("nodes", "accelerators") rather than one per app: the docs page stays navigable.
        parts = [p for p in self.path.split("/") if p and not p.startswith("{")]
        if len(parts) >= 3 and parts[0] == "api":
            return [parts[2]]
        return super().get_tags()

    def get_operation_id(self) -> str:
        operation_id = super().get_operation_id()
        action = self._action()
        if action in BULK_ACTIONS:
            # DRF-spectacular names operations by HTTP method; on the list path those are the bulk actions.
            by_method = {"bulk_update": "update", "bulk_partial_update": "partial_update", "bulk_destroy": "destroy"}
            operation_id = operation_id.removesuffix(by_method[action]) + action
        return operation_id

    def get_override_parameters(self) -> list[Any]:
        params = list(super().get_override_parameters())
        if getattr(self.view, "hold_override", False) and self.method in ("PUT", "PATCH", "DELETE", "POST"):
            params.extend(HOLD_OVERRIDE)
        if self._model_is_versioned() and self._is_detail() and self._action() != "history":
            if self.method in ("PUT", "PATCH", "DELETE", "POST"):  # POST: object actions such as cordon
                params.append(IF_MATCH)
            if self.method in ("GET", "PUT", "PATCH", "POST"):
                params.append(ETAG_HEADER)
            if self.method == "GET":
                params.append(IF_NONE_MATCH)
        return params

    def get_request_serializer(self) -> Any:
        serializer = super().get_request_serializer()
        action = self._action()
        if action in ("bulk_update", "bulk_partial_update") and isinstance(serializer, serializers.Serializer):
            return bulk_row_serializer(type(serializer))(many=True)
        if action == "bulk_destroy":
            return BulkIdSerializer(many=True)
        return serializer

    def get_response_serializers(self) -> Any:
        serializer = super().get_response_serializers()
        if self._action() in ("bulk_update", "bulk_partial_update") and isinstance(serializer, serializers.Serializer):
            return type(serializer)(many=True)
        return serializer

    def _get_request_body(self, direction: str = "request") -> Any:
        if self.method == "DELETE" and self._action() == "bulk_destroy":
            # Bulk delete takes its ids in the body (like NetBox); spectacular only documents bodies on writes.
            self.method = "POST"
            try:
                return super()._get_request_body(direction)
            finally:
                self.method = "DELETE"
        return super()._get_request_body(direction)

    def _get_request_for_media_type(self, serializer: Any, direction: str = "request") -> Any:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        if (
            self._action() == "create"
            and schema
            and "$ref" in schema
            and getattr(self.view, "bulk_create_enabled", False)
        ):
            # One object creates one row; a list creates many in one transaction.
            schema = {"oneOf": [schema, {"type": "array", "items": schema, "minItems": 1}]}
        return schema, required

    def _get_response_for_code(
        self, serializer: Any, status_code: str, media_types: Any = None, direction: str = "response"
    ) -> Any:
        response = super()._get_response_for_code(serializer, status_code, media_types, direction)
        if self._action() == "create" and status_code == "201" and getattr(self.view, "bulk_create_enabled", False):
            for media in response.get("content", {}).values():
                ref = media.get("schema")
                if ref and "$ref" in ref:
                    media["schema"] = {"oneOf": [ref, {"type": "array", "items": ref}]}
        return response

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        action = self._action()
        if action == "bulk_destroy":
            responses = {"204": {"description": "All rows deleted."}}
        # 400 everywhere: any operation refuses an unknown query parameter (gpuops.api.query_params).
        codes = ["400", "401", "403", "429", "500"]
        if self._is_detail() or action in BULK_ACTIONS:
            codes.append("404")
        if self.method in ("POST", "PUT", "PATCH", "DELETE"):
            codes.append("409")
        if self.method in ("POST", "PUT", "PATCH") or action == "bulk_destroy":
            codes.append("415")
        writes_one = self.method in ("PUT", "PATCH", "DELETE") or (self.method == "POST" and self._is_detail())
        if self._model_is_versioned() and writes_one and action != "create":
            codes.append("412")
        if self.method == "GET" and self._is_detail() and self._model_is_versioned():
            responses.setdefault("304", {"description": "Not modified (If-None-Match matched)."})
        for code in sorted(codes):
            if code not in responses:
                responses[code] = self._get_response_for_code(ERRORS[code], code, direction=direction)
        return responses
