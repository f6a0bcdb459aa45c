"""Serializers of the procurement API: output forms of requests (with lines, approvals, shipments and
discrepancies) and the input forms of the commands."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cmdb.models import AcceleratorModel, PartModel, ServerModel, Site

from ..models import (
    ApprovalRule,
    Discrepancy,
    InboundEvent,
    ProcurementRequest,
    RequestApproval,
    RequestLine,
    Shipment,
)
from ..services.requests import LineInput, approval_progress


class RequestLineSerializer(serializers.ModelSerializer):
    line_ref = serializers.CharField(read_only=True)
    item_kind = serializers.CharField(read_only=True)
    item = serializers.SerializerMethodField()
    site = serializers.CharField(source="site.code", read_only=True)

    class Meta:
        model = RequestLine
        fields = [
            "id",
            "line_no",
            "line_ref",
            "item_kind",
            "item",
            "quantity",
            "site",
            "unit_price",
            "received_quantity",
            "po_line_ref",
            "po_state",
        ]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_item(self, line: RequestLine) -> dict[str, Any]:
        item = line.item
        return {"id": item.pk, "name": str(item)}


class ApprovalSerializer(serializers.ModelSerializer):
    class Meta:
        model = RequestApproval
        fields = ["round", "rule", "approver_repr", "decision", "comment", "at"]


# Several models have a `status` with different choices; plain strings here keep the OpenAPI enum names
# unambiguous (the values are documented in help_text).
class ShipmentSerializer(serializers.ModelSerializer):
    site = serializers.CharField(source="site.code", read_only=True, default=None)
    status = serializers.CharField(read_only=True, help_text="dispatched, delivered")

    class Meta:
        model = Shipment
        fields = [
            "id",
            "shipment_ref",
            "status",
            "carrier",
            "tracking",
            "is_dispatch_known",
            "dispatched_at",
            "expected_at",
            "delivered_at",
            "site",
        ]


class DiscrepancySerializer(serializers.ModelSerializer):
    request_ref = serializers.CharField(source="request.reference", read_only=True)
    shipment_ref = serializers.CharField(source="shipment.shipment_ref", read_only=True, default=None)

    class Meta:
        model = Discrepancy
        fields = [
            "id",
            "request",
            "request_ref",
            "shipment_ref",
            "kind",
            "serial",
            "expected_quantity",
            "actual_quantity",
            "detail",
            "status",
            "created_at",
            "resolved_at",
            "resolution",
        ]
        read_only_fields = fields


class ProcurementRequestSerializer(serializers.ModelSerializer):
    reference = serializers.CharField(read_only=True)
    total_amount = serializers.DecimalField(max_digits=14, decimal_places=2, read_only=True)
    lines = RequestLineSerializer(many=True, read_only=True)
    approvals = ApprovalSerializer(many=True, read_only=True)
    approval_progress = serializers.SerializerMethodField()
    shipments = ShipmentSerializer(many=True, read_only=True)
    discrepancies = DiscrepancySerializer(many=True, read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True, default=None)

    class Meta:
        model = ProcurementRequest
        fields = [
            "id",
            "reference",
            "title",
            "justification",
            "budget_code",
            "currency",
            "total_amount",
            "state",
            "is_open",
            "requested_by",
            "ticket_ref",
            "approval_round",
            "approval_progress",
            "approvals",
            "submitted_at",
            "approved_at",
            "po_number",
            "po_state",
            "po_created_at",
            "po_error",
            "supplier",
            "invoice_number",
            "invoiced_amount",
            "trigger_count",
            "notes",
            "lines",
            "shipments",
            "discrepancies",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_approval_progress(self, req: ProcurementRequest) -> list[dict[str, Any]]:
        return [
            {
                "level": p.level,
                "rule": p.name,
                "required": p.required,
                "approvers": list(p.approvers),
                "is_satisfied": p.is_satisfied,
            }
            for p in approval_progress(req)
        ]


class LineInputSerializer(serializers.Serializer):
    """One line: `kind` (server / accelerator / part) with `model` (an id, or a name / SKU), quantity, site code."""

    kind = serializers.ChoiceField(choices=["server", "accelerator", "part"])
    model = serializers.CharField(help_text="Model id, or its name (part: its SKU).")
    quantity = serializers.IntegerField(min_value=1)
    site = serializers.CharField(help_text="Site code (or id).")
    unit_price = serializers.DecimalField(max_digits=14, decimal_places=2, min_value=0, required=False)

    _MODELS = {"server": (ServerModel, "name"), "accelerator": (AcceleratorModel, "name"), "part": (PartModel, "sku")}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        model_cls, natural = self._MODELS[attrs["kind"]]
        ref = attrs["model"]
        item = model_cls.objects.filter(**({"pk": int(ref)} if ref.isdigit() else {natural: ref})).first()
        if item is None:
            raise serializers.ValidationError({"model": f"No {attrs['kind']} model {ref!r}."})
        site_ref = attrs["site"]
        site = Site.objects.filter(**({"pk": int(site_ref)} if site_ref.isdigit() else {"code": site_ref})).first()
        if site is None:
            raise serializers.ValidationError({"site": f"No site {site_ref!r}."})
        attrs["item"], attrs["site_obj"] = item, site
        return attrs

    def to_line(self, attrs: dict[str, Any]) -> LineInput:
        key = {"server": "server_model", "accelerator": "accelerator_model", "part": "part_model"}[attrs["kind"]]
        return LineInput(
            quantity=attrs["quantity"],
            site=attrs["site_obj"],
            unit_price=attrs.get("unit_price"),
            **{key: attrs["item"]},
        )


class RequestCreateInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    justification = serializers.CharField()
    budget_code = serializers.CharField(max_length=64)
    lines = LineInputSerializer(many=True, allow_empty=False)
    submit = serializers.BooleanField(default=False, help_text="Submit for approval at once.")


class CommentInputSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class ReasonInputSerializer(serializers.Serializer):
    reason = serializers.CharField()


class ApprovalRuleSerializer(serializers.ModelSerializer):
    group = serializers.CharField(source="group.name", read_only=True)

    class Meta:
        model = ApprovalRule
        fields = ["id", "name", "level", "min_amount", "max_amount", "approvers_required", "group", "is_active"]
        read_only_fields = fields


class InboundEventSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True, help_text="pending, processing, processed, deferred, failed")

    class Meta:
        model = InboundEvent
        fields = [
            "id",
            "source",
            "event_id",
            "type",
            "status",
            "waits_for",
            "signed_with",
            "occurred_at",
            "received_at",
            "processed_at",
            "attempts",
            "error",
            "request",
            "payload",
        ]
        read_only_fields = fields
