"""The change history (read-only)."""

from __future__ import annotations

from rest_framework import serializers

from gpuops.api.fields import BriefField

from ... import models as m
from ..base import CmdbSerializer
from .nested import BriefUserSerializer


class ChangeRecordSerializer(CmdbSerializer):
    model = serializers.SerializerMethodField(help_text="App label and model of the changed object, e.g. 'cmdb.node'.")
    actor = BriefField(BriefUserSerializer)

    class Meta:
        model = m.ChangeRecord
        fields = [
            "id",
            "at",
            "model",
            "object_id",
            "object_repr",
            "action",
            "changes",
            "actor",
            "actor_repr",
            "source",
            "correlation_id",
            "reason",
        ]
        read_only_fields = fields

    def get_model(self, obj: m.ChangeRecord) -> str:
        return f"{obj.content_type.app_label}.{obj.content_type.model}"
