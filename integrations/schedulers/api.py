"""/api/integrations/schedulers/drift/: where a cluster's scheduler and the CMDB disagree (schedulers/sync.py)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, serializers

from gpuops.api.viewsets import ApiViewMixin

from ..models import DriftKind, SchedulerDrift
from .selectors import scheduler_drift_list


class SchedulerDriftSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname")
    site = serializers.CharField(source="node.site.code", default=None)
    cluster = serializers.CharField(source="cluster.name")
    is_open = serializers.BooleanField()

    class Meta:
        model = SchedulerDrift
        fields = [
            "id",
            "node",
            "site",
            "cluster",
            "kind",
            "scheduler_state",
            "scheduler_reason",
            "cmdb_cordoned",
            "cmdb_cordon_reason",
            "first_seen_at",
            "last_seen_at",
            "resolved_at",
            "is_open",
        ]
        read_only_fields = fields


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter("open", str, enum=["true", "false"], description="Only open (or only resolved) drifts."),
            OpenApiParameter("kind", str, enum=list(DriftKind.values), description="Only this kind of drift."),
            OpenApiParameter("node", str, description="Only this node (host name)."),
            OpenApiParameter("site", str, description="Only nodes of this site (code)."),
            OpenApiParameter("cluster", str, description="Only this cluster (name)."),
        ]
    )
)
class SchedulerDriftList(ApiViewMixin, generics.ListAPIView):
    """GET /api/integrations/schedulers/drift/ - nodes on which the scheduler and the CMDB disagree, newest first.
    A user sees the drifts of the nodes they may see."""

    serializer_class = SchedulerDriftSerializer

    def get_queryset(self):
        qs = scheduler_drift_list(self.request.user)
        params = self.request.query_params
        is_open = params.get("open")
        if is_open is not None:
            if is_open not in ("true", "false"):
                raise serializers.ValidationError({"open": ['"true" or "false".']})
            qs = qs.filter(resolved_at__isnull=is_open == "true")
        kind = params.get("kind")
        if kind is not None:
            if kind not in DriftKind.values:
                raise serializers.ValidationError({"kind": [f"One of {', '.join(DriftKind.values)}."]})
            qs = qs.filter(kind=kind)
        for name, lookup in (("node", "node__hostname"), ("site", "node__site__code"), ("cluster", "cluster__name")):
            if params.get(name):
                qs = qs.filter(**{lookup: params[name]})
        return qs
