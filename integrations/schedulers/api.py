"""/api/integrations/schedulers/drift/: where a cluster's scheduler and the CMDB disagree (schedulers/sync.py);
/api/integrations/schedulers/allocation/: how many accelerators each node's scheduler has handed out."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import generics, serializers

from cmdb.models import NodeAllocation
from gpuops.api.viewsets import ApiViewMixin

from ..models import DriftKind, SchedulerDrift
from .selectors import node_allocation_list, scheduler_drift_list


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


class NodeAllocationSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.hostname")
    site = serializers.CharField(source="node.site.code", default=None)
    cluster = serializers.CharField(source="node.cluster.name", default=None)

    class Meta:
        model = NodeAllocation
        fields = ["node", "site", "cluster", "scheduler", "total", "allocated", "observed_at", "last_allocated_at"]
        read_only_fields = fields


@extend_schema_view(
    get=extend_schema(
        parameters=[
            OpenApiParameter(
                "idle_days", int, description="Only nodes with none of their accelerators allocated for this many days."
            ),
            OpenApiParameter("node", str, description="Only this node (host name)."),
            OpenApiParameter("site", str, description="Only nodes of this site (code)."),
            OpenApiParameter("cluster", str, description="Only this cluster (name)."),
        ]
    )
)
class NodeAllocationList(ApiViewMixin, generics.ListAPIView):
    """GET /api/integrations/schedulers/allocation/ - accelerators configured and allocated per node, as the
    cluster's scheduler last reported them (refreshed by the scheduler sync). A user sees the nodes they may see."""

    serializer_class = NodeAllocationSerializer

    def get_queryset(self):
        params = self.request.query_params
        idle_days = params.get("idle_days")
        if idle_days is not None and (not idle_days.isdigit() or int(idle_days) > 3650):
            raise serializers.ValidationError({"idle_days": ["A whole number of days, 0 to 3650."]})
        qs = node_allocation_list(self.request.user, idle_days=int(idle_days) if idle_days is not None else None)
        for name, lookup in (
            ("node", "node__hostname"),
            ("site", "node__site__code"),
            ("cluster", "node__cluster__name"),
        ):
            if params.get(name):
                qs = qs.filter(**{lookup: params[name]})
        return qs
