"""Serializers of the warehouse API: ledger rows, reservations, minimum stock, the overview, discrepancies, and
the inputs of manual moves and stock takes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from cmdb.models import MovementKind, StockMovement, StockReservation

from ..models import MinimumStock, StockDiscrepancy

# Related objects are shown by their str() with `source="<relation>"` (CharField renders str(value)), never
# `source="<relation>.__str__"`: for an empty relation that looked up None.__str__ and printed the method wrapper.


class MovementSerializer(serializers.ModelSerializer):
    serial = serializers.SerializerMethodField()
    model = serializers.SerializerMethodField()
    location = serializers.CharField(read_only=True, default=None)
    to_location = serializers.CharField(read_only=True, default=None)
    node = serializers.CharField(source="node.hostname", read_only=True, default=None)
    actor = serializers.CharField(source="actor.username", read_only=True, default=None)

    class Meta:
        model = StockMovement
        fields = [
            "id",
            "at",
            "kind",
            "serial",
            "model",
            "quantity",
            "location",
            "to_location",
            "node",
            "actor",
            "reason",
            "ticket_ref",
            "correlation_id",
        ]
        read_only_fields = fields

    def get_serial(self, mv: StockMovement) -> str | None:
        if mv.accelerator_id:
            return mv.accelerator.serial
        return mv.part_item.serial if mv.part_item_id else None

    def get_model(self, mv: StockMovement) -> str | None:
        if mv.accelerator_model_id:
            return mv.accelerator_model.name
        return mv.part_model.sku if mv.part_model_id else None


class MovementInputSerializer(serializers.Serializer):
    """A manual move. Cards and serialised parts by `serial`; consumables by `sku` and `quantity`.

    receive: a new card needs `model` (accelerator model name) or a new part `sku`; goes to `location`.
    issue: to `node` (+ `slot_index` for a card). return / rma_back: into `location`. rma_out / scrap: out.
    transfer: to `to_location`. adjust: a card is written off (lost); a consumable is set to `counted`.
    """

    kind = serializers.ChoiceField(choices=[k for k in MovementKind.values if k not in ("reserve", "release")])
    serial = serializers.CharField(required=False, max_length=100)
    model = serializers.CharField(required=False, help_text="Accelerator model name (receiving a new card).")
    sku = serializers.CharField(required=False, help_text="Part model SKU (consumables; receiving a new part).")
    quantity = serializers.IntegerField(required=False, min_value=1)
    counted = serializers.IntegerField(required=False, min_value=0, help_text="adjust of a consumable: the count.")
    location = serializers.IntegerField(required=False, help_text="Stock location id.")
    to_location = serializers.IntegerField(required=False, help_text="Stock location id (transfer).")
    node = serializers.CharField(required=False, help_text="Node hostname or id (issue).")
    slot_index = serializers.IntegerField(required=False, min_value=0)
    reason = serializers.CharField(max_length=300)
    ticket_ref = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("serial") and not attrs.get("sku"):
            raise serializers.ValidationError({"serial": "Give a serial (cards, serialised parts) or a sku."})
        return attrs


class ReservationSerializer(serializers.ModelSerializer):
    serial = serializers.CharField(source="accelerator.serial", read_only=True)
    model = serializers.CharField(source="accelerator.model.name", read_only=True)
    site = serializers.CharField(source="site.code", read_only=True)
    location = serializers.CharField(source="accelerator.stock_location", read_only=True, default=None)
    # A plain string: several models have a `status` with different choices (OpenAPI enum names).
    status = serializers.CharField(read_only=True, help_text="active, issued, released, expired")

    class Meta:
        model = StockReservation
        fields = [
            "id",
            "serial",
            "model",
            "site",
            "location",
            "status",
            "reserved_for",
            "reserved_at",
            "expires_at",
            "closed_at",
        ]
        read_only_fields = fields


class ReservationInputSerializer(serializers.Serializer):
    site = serializers.CharField(help_text="Site code.")
    model = serializers.CharField(help_text="Accelerator model name.")
    reserved_for = serializers.CharField(max_length=64, help_text="What holds it, e.g. 'ticket:42'.")
    ttl_hours = serializers.IntegerField(required=False, min_value=1, max_value=24 * 30, default=72)


class IssueInputSerializer(serializers.Serializer):
    node = serializers.CharField(help_text="Node hostname or id.")
    slot_index = serializers.IntegerField(min_value=0)


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=300)


class MinimumStockSerializer(serializers.ModelSerializer):
    site_code = serializers.CharField(source="site.code", read_only=True)
    item = serializers.CharField(read_only=True)

    class Meta:
        model = MinimumStock
        fields = [
            "id",
            "site",
            "site_code",
            "accelerator_model",
            "part_model",
            "item",
            "minimum",
            "target",
            "is_active",
            "updated_at",
        ]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        instance = MinimumStock(
            **{
                **(
                    {f.name: getattr(self.instance, f.name) for f in MinimumStock._meta.fields} if self.instance else {}
                ),
                **attrs,
            }
        )
        instance.clean()
        return attrs


class StockLineSerializer(serializers.Serializer):
    site = serializers.CharField(source="site_code")
    kind = serializers.CharField()
    model = serializers.CharField(source="model_name")
    installed = serializers.IntegerField(allow_null=True)
    on_hand = serializers.IntegerField(help_text="Spares on hand, from the ledger.")
    reserved = serializers.IntegerField()
    free = serializers.IntegerField()
    spare_ratio_percent = serializers.FloatField(allow_null=True)
    minimum = serializers.IntegerField(allow_null=True)
    is_below_minimum = serializers.BooleanField()
    summary = serializers.CharField()


class StockOverviewSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    results = StockLineSerializer(many=True)


class StockDiscrepancySerializer(serializers.ModelSerializer):
    site = serializers.CharField(source="site.code", read_only=True)
    location = serializers.CharField(read_only=True, default=None)

    class Meta:
        model = StockDiscrepancy
        fields = [
            "id",
            "site",
            "location",
            "kind",
            "sku",
            "serial",
            "ledger_quantity",
            "other_quantity",
            "detail",
            "status",
            "detected_at",
            "last_seen_at",
            "resolved_at",
            "resolution",
        ]
        read_only_fields = fields


class StocktakeInputSerializer(serializers.Serializer):
    location = serializers.IntegerField()
    counts = serializers.DictField(
        child=serializers.IntegerField(min_value=0),
        required=False,
        default=dict,
        help_text="Consumables: SKU -> units counted.",
    )
    serials = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        allow_null=True,
        default=None,
        help_text="Every serial found at the location (omit to skip).",
    )
    reason = serializers.CharField(max_length=300)
    ticket_ref = serializers.CharField(required=False, allow_blank=True, default="", max_length=64)


class StocktakeResultSerializer(serializers.Serializer):
    adjustments = MovementSerializer(many=True, help_text="The adjust movements written for consumables.")
    missing = serializers.ListField(child=serializers.CharField(), help_text="Expected here, not counted.")
    unexpected = serializers.ListField(child=serializers.CharField(), help_text="Counted, not expected here.")
