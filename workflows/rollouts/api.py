"""REST API of the rollouts app, mounted at /api/rollouts/ (workflows/rollouts/api_urls.py).

    GET  /api/rollouts/                  rollouts the user may see (newest first)
    GET  /api/rollouts/<id>/             one rollout: package, selector, options, the plan (refused with reasons)
    GET  /api/rollouts/<id>/progress/    live progress: per wave and node state, failures with logs, ETA
                                         (?nodes=all lists every node of every wave)
    POST /api/rollouts/plan-preview/     the plan a package + selector + options would give now (nothing saved)
    GET  /api/rollouts/provisioning/<id>/progress/   a provisioning run's steps and log
    POST /api/rollouts/os-install/callback/          the OS install system reports a job's end (HMAC-signed)

Operator actions (start, pause, resume, abort, roll back all) are ticket transitions
(POST /api/workflows/tickets/<id>/transitions/<name>/), so they are permission-checked and audited once.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb.models import DriverPackage
from gpuops.api.pagination import FleetPagination
from gpuops.api.viewsets import ApiViewMixin

from .access import can_see, visible
from .models import ProvisioningRun, Rollout
from .options import RolloutOptions
from .progress import rollout_progress
from .selectors import NodeSelector
from .services import RolloutError, rollout_plan_preview


class RolloutSerializer(serializers.ModelSerializer):
    label = serializers.CharField(read_only=True)
    package = serializers.StringRelatedField()
    status_label = serializers.CharField(source="get_status_display", read_only=True)

    class Meta:
        model = Rollout
        fields = [
            "id",
            "label",
            "ticket",
            "package",
            "component",
            "target_version",
            "status",
            "status_label",
            "paused_reason",
            "selector",
            "options",
            "plan",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields


class RolloutBriefSerializer(RolloutSerializer):
    node_count = serializers.SerializerMethodField()

    class Meta(RolloutSerializer.Meta):
        fields = [
            "id",
            "label",
            "ticket",
            "package",
            "status",
            "status_label",
            "node_count",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_node_count(self, obj: Rollout) -> int:
        return int(obj.plan.get("node_count", 0))


class RolloutViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """Rollouts, read-only; the plan and live progress."""

    permission_classes = [IsAuthenticated]
    pagination_class = FleetPagination

    def get_queryset(self) -> QuerySet[Rollout]:
        return visible(self.request.user, Rollout).select_related("package", "ticket").order_by("-created_at", "-id")

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return RolloutBriefSerializer if self.action == "list" else RolloutSerializer

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[OpenApiParameter("nodes", str, description="'all': list every node of every wave (large).")],
    )
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, pk: str | None = None) -> Response:
        rollout = self.get_object()
        return Response(rollout_progress(rollout, all_nodes=request.query_params.get("nodes") == "all"))


class PlanPreviewInputSerializer(serializers.Serializer):
    package = serializers.CharField(help_text="'<component> <version>', e.g. 'nvidia-driver 570.133.20', or an id.")
    selector = serializers.DictField(help_text="clusters, sites, accelerator_models, tags, hostnames (lists).")
    options = serializers.DictField(required=False, default=dict)
    hostnames = serializers.BooleanField(required=False, default=False, help_text="List each wave's hostnames.")


def package_lookup(text: str) -> DriverPackage:
    """'nvidia-driver 570.133.20', 'nvidia-driver=570.133.20' or a package id. ValueError when unknown."""
    text = text.strip()
    if text.isdigit():
        package = DriverPackage.objects.filter(pk=int(text)).first()
    else:
        parts = text.replace("=", " ").split()
        package = (
            DriverPackage.objects.filter(component=parts[0], version=parts[1]).first() if len(parts) == 2 else None
        )
    if package is None:
        raise ValueError(f"no driver package {text!r} (write '<component> <version>')")
    return package


class PlanPreviewView(ApiViewMixin, APIView):
    """The plan these inputs would give now: waves, refused nodes with reasons, limits. Saves and locks nothing.
    Needs `workflows.add_ticket` (the same people who may open the rollout ticket)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=PlanPreviewInputSerializer, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request) -> Response:
        user = request.user
        if not (user.is_superuser or user.has_perm("workflows.add_ticket")):
            raise exceptions.PermissionDenied("You may not plan changes.")
        data = PlanPreviewInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            package = package_lookup(data.validated_data["package"])
            options = RolloutOptions.from_dict(data.validated_data["options"])
            selector = NodeSelector.from_dict(data.validated_data["selector"])
            problems = selector.problems() + options.plan.problems()
            if selector.is_empty:
                problems.append("the selector selects nothing")
            if problems:
                raise RolloutError(problems)
            plan = rollout_plan_preview(package=package, selector=selector, options=options)
        except (ValueError, RolloutError) as exc:
            raise exceptions.ValidationError({"detail": str(exc)}) from exc
        names: dict[int, str] = {}
        if data.validated_data["hostnames"]:
            from cmdb.models import Node

            names = dict(Node.objects.filter(pk__in=plan.node_ids).values_list("pk", "hostname"))
        return Response(
            {
                "package": str(package),
                "options": options.as_dict(),
                "node_count": plan.node_count,
                "waves": [
                    {
                        "index": w.index,
                        "kind": w.kind,
                        "size": len(w.node_ids),
                        "failure_budget": w.failure_budget,
                        **({"hostnames": [names[n] for n in w.node_ids]} if names else {}),
                    }
                    for w in plan.waves
                ],
                "refused": [r.as_dict() for r in plan.refused],
                "skipped": [r.as_dict() for r in plan.skipped],
                "cluster_limits": {str(k): v for k, v in plan.cluster_limits.items() if k is not None},
            }
        )


class ProvisioningProgressView(ApiViewMixin, APIView):
    """A provisioning run's steps, state and log."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        from .provisioning.progress import provisioning_progress

        run = ProvisioningRun.objects.select_related("ticket", "rack", "cluster").filter(pk=pk).first()
        if run is None or not can_see(request.user, run):
            raise exceptions.NotFound("No such provisioning run.")
        return Response(provisioning_progress(run))


class OsInstallCallbackView(ApiViewMixin, APIView):
    """The install system's callback: {"id", "status", "message"}, signed (X-Gpuops-Signature: sha256=<hmac>) with
    the shared secret from the environment variable OS_INSTALL_CALLBACK_SECRET_ENV. No session or token: the
    signature is the authentication, checked over the raw body before anything is parsed. 202 when recorded,
    404 for a job no open provisioning run knows, 403 for a bad signature."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={202: OpenApiTypes.OBJECT}, auth=[])
    def post(self, request: Request) -> Response:
        from integrations.os_install.webhook import SIGNATURE_HEADER, callback_secret, callback_verify

        from .conf import rollouts_setting
        from .provisioning.services import ProvisioningError, os_install_callback_record

        body = request.body  # the raw bytes the signature covers
        secret = callback_secret(rollouts_setting("OS_INSTALL_CALLBACK_SECRET_ENV"))
        if not callback_verify(body, request.headers.get(SIGNATURE_HEADER, ""), secret):
            raise exceptions.PermissionDenied("bad or missing signature")
        data = request.data
        try:
            run = os_install_callback_record(
                ref=str(data.get("id", "")), status=str(data.get("status", "")), message=str(data.get("message", ""))
            )
        except ProvisioningError as exc:
            raise exceptions.ValidationError({"status": str(exc)}) from exc
        if run is None:
            raise exceptions.NotFound("no open provisioning run has this install job")
        return Response({"recorded": True, "provisioning_id": run.pk}, status=202)


__all__ = ["OsInstallCallbackView", "PlanPreviewView", "ProvisioningProgressView", "RolloutViewSet", "package_lookup"]
