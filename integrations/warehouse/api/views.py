"""Warehouse REST API under /api/integrations/warehouse/: the ledger (read, and manual moves), reservations,
minimum stock, the stock overview per site, stock takes and discrepancies. Views parse, call a service, serialise.

Visibility follows the CMDB's site scopes (cmdb.permissions): a technician of site A sees and moves site A's
stock only. Writing a move needs `change_scope` on every site it touches (or the global
`cmdb.change_stocklocation`); minimum stock levels are policy and need the global warehouse permissions.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb import permissions
from cmdb.models import (
    Accelerator,
    AcceleratorModel,
    Node,
    PartItem,
    PartModel,
    Site,
    StockLocation,
    StockMovement,
    StockReservation,
)
from cmdb.services import stock as cmdb_stock
from gpuops.api.viewsets import ApiViewMixin
from gpuops.context import ChangeSource, change_context, current_context
from integrations.procurement.api.views import service_errors

from ..models import MinimumStock, StockDiscrepancy
from ..services.moves import MoveRequest, movement_apply
from ..services.stock import stock_lines
from ..services.wms import stocktake_apply
from .serializers import (
    IssueInputSerializer,
    MinimumStockSerializer,
    MovementInputSerializer,
    MovementSerializer,
    ReasonSerializer,
    ReservationInputSerializer,
    ReservationSerializer,
    StockDiscrepancySerializer,
    StockLineSerializer,
    StockOverviewSerializer,
    StocktakeInputSerializer,
    StocktakeResultSerializer,
)


def visible_site_ids(user) -> list[int]:
    return list(permissions.restrict(Site.objects.all(), user, "view").values_list("pk", flat=True))


def require_change(user, site_ids: set[int]) -> None:
    """403 unless the user may change stock at every one of these sites."""
    if not site_ids:
        return
    allowed = set(
        permissions.restrict(Site.objects.filter(pk__in=site_ids), user, "change").values_list("pk", flat=True)
    )
    if not site_ids <= allowed and not permissions.has_global(user, StockLocation, "change"):
        raise exceptions.PermissionDenied("You may not change stock at this site.")


def after_outflow(site_ids: set[int]) -> None:
    """On commit: check minimum stock at the sites a move touched (a task, so the request does not wait)."""
    from ..tasks import minimum_stock_check

    for site_id in site_ids:
        minimum_stock_check.apply_async_on_commit(args=[site_id])


def _location(pk: int | None, field: str) -> StockLocation | None:
    if pk is None:
        return None
    location = StockLocation.objects.filter(pk=pk).first()
    if location is None:
        raise exceptions.ValidationError({field: f"No stock location {pk}."})
    return location


def _node(ref: str | None) -> Node | None:
    if not ref:
        return None
    node = Node.objects.filter(Q(hostname=ref) | Q(pk=int(ref)) if ref.isdigit() else Q(hostname=ref)).first()
    if node is None:
        raise exceptions.ValidationError({"node": f"No node {ref!r}."})
    return node


def _filters(**described: str) -> list[OpenApiParameter]:
    # Documented so the schema lists them, and so the unknown-parameter check (gpuops.api.query_params) accepts them.
    return [OpenApiParameter(name, OpenApiTypes.STR, description=text) for name, text in described.items()]


@extend_schema_view(
    list=extend_schema(
        parameters=_filters(
            site="Site code (of the location or the node).",
            kind="Movement kind.",
            serial="Card or part serial.",
            ticket_ref="Ticket reference.",
            location="Stock location id (either side).",
        )
    )
)
class MovementViewSet(
    ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """The stock ledger. GET lists movements (?site=, ?kind=, ?serial=, ?ticket_ref=, ?location=); POST makes a
    manual move and answers with the ledger rows it wrote. Send `Idempotency-Key` to make a retry safe."""

    serializer_class = MovementSerializer
    queryset = StockMovement.objects.none()  # the real one depends on the user's sites (get_queryset)

    def get_queryset(self) -> QuerySet[StockMovement]:
        if getattr(self, "swagger_fake_view", False):  # OpenAPI generation: no user
            return StockMovement.objects.none()
        sites = visible_site_ids(self.request.user)
        qs = (
            StockMovement.objects.filter(Q(location__site_id__in=sites) | Q(node__site_id__in=sites))
            .select_related(
                "accelerator",
                "part_item",
                "part_model",
                "accelerator_model",
                "location__site",
                "to_location__site",
                "node",
                "actor",
            )
            .order_by("-at", "-id")
        )
        params = self.request.query_params
        if site := params.get("site"):
            qs = qs.filter(Q(location__site__code=site) | Q(node__site__code=site))
        if kind := params.get("kind"):
            qs = qs.filter(kind=kind)
        if serial := params.get("serial"):
            qs = qs.filter(Q(accelerator__serial=serial) | Q(part_item__serial=serial))
        if ticket := params.get("ticket_ref"):
            qs = qs.filter(ticket_ref=ticket)
        if (location := params.get("location")) and location.isdigit() and len(location) <= 18:
            qs = qs.filter(location_id=int(location))
        return qs

    @extend_schema(request=MovementInputSerializer, responses={201: MovementSerializer(many=True)})
    def create(self, request: Request, *args, **kwargs) -> Response:
        body = MovementInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        key = request.headers.get("Idempotency-Key") or None
        move = MoveRequest(
            kind=data["kind"],
            reason=data["reason"],
            serial=data.get("serial", ""),
            model=data.get("model", ""),
            sku=data.get("sku", ""),
            quantity=data.get("quantity"),
            counted=data.get("counted"),
            location=_location(data.get("location"), "location"),
            to_location=_location(data.get("to_location"), "to_location"),
            node=_node(data.get("node")),
            slot_index=data.get("slot_index"),
            ticket_ref=data["ticket_ref"],
            key=f"api:{request.user.pk}:{key}" if key else None,
        )
        sites = move.touched_sites
        if move.serial:
            item = (
                Accelerator.objects.filter(serial=move.serial).values_list("site_id", flat=True).first()
                or PartItem.objects.filter(serial=move.serial).values_list("stock_location__site_id", flat=True).first()
            )
            sites |= {item} if item else set()
        with transaction.atomic(), change_context(actor=request.user, source=ChangeSource.API):
            require_change(request.user, sites)
            before = StockMovement.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
            with service_errors():
                movement_apply(move)
            after_outflow(sites)
            correlation = current_context().correlation_id
        rows = self.get_queryset().filter(pk__gt=before, correlation_id=correlation).order_by("pk")
        if key and not rows:  # a retried request: answer with what the first one wrote
            rows = self.get_queryset().filter(idempotency_key__startswith=move.key).order_by("pk")
        return Response(MovementSerializer(rows, many=True).data, status=status.HTTP_201_CREATED)


@extend_schema_view(
    list=extend_schema(
        parameters=_filters(
            status="Reservation status (active, ...).",
            site="Site code.",
            reserved_for="Ticket or purpose reserved for.",
        )
    )
)
class ReservationViewSet(
    ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Spare reservations (cmdb.services.stock). POST reserves a free spare of a model at a site; the database
    makes sure two callers never get the same card (the loser gets 409 when no other spare is free).
    Filters: ?status=active, ?site=, ?reserved_for=."""

    serializer_class = ReservationSerializer
    queryset = StockReservation.objects.none()

    def get_queryset(self) -> QuerySet[StockReservation]:
        if getattr(self, "swagger_fake_view", False):
            return StockReservation.objects.none()
        qs = StockReservation.objects.filter(site_id__in=visible_site_ids(self.request.user)).select_related(
            "accelerator__model", "accelerator__stock_location__site", "site"
        )
        params = self.request.query_params
        for name, field in (("status", "status"), ("site", "site__code"), ("reserved_for", "reserved_for")):
            if value := params.get(name):
                qs = qs.filter(**{field: value})
        return qs

    @extend_schema(
        request=ReservationInputSerializer,
        responses={
            201: ReservationSerializer,
            409: OpenApiResponse(description="No free spare of that model at the site."),
        },
    )
    def create(self, request: Request, *args, **kwargs) -> Response:
        body = ReservationInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        site = Site.objects.filter(code=data["site"]).first()
        model = AcceleratorModel.objects.filter(name=data["model"]).first()
        if site is None or model is None:
            raise exceptions.ValidationError({"site" if site is None else "model": "Not found."})
        require_change(request.user, {site.pk})
        key = request.headers.get("Idempotency-Key") or f"api-reserve:{data['reserved_for']}:{model.pk}"
        with change_context(actor=request.user, source=ChangeSource.API):
            try:
                reservation = cmdb_stock.spare_reserve(
                    site=site,
                    model=model,
                    reserved_for=data["reserved_for"],
                    key=key,
                    ttl=dt.timedelta(hours=data["ttl_hours"]),
                )
            except cmdb_stock.NoSpareError as exc:
                return Response({"error": {"code": "no_spare", "message": str(exc)}}, status=status.HTTP_409_CONFLICT)
            after_outflow({site.pk})
        return Response(self.get_serializer(reservation).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReasonSerializer, responses=ReservationSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        reservation = self.get_object()
        require_change(request.user, {reservation.site_id})
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with change_context(actor=request.user, source=ChangeSource.API):
            cmdb_stock.reservation_release(reservation=reservation, reason=body.validated_data["reason"])
        reservation.refresh_from_db()
        return Response(self.get_serializer(reservation).data)

    @extend_schema(request=IssueInputSerializer, responses=ReservationSerializer)
    @action(detail=True, methods=["post"])
    def issue(self, request: Request, pk: str | None = None) -> Response:
        """Install the reserved card into a node slot (ledger row `issue`, placement history)."""
        reservation = self.get_object()
        body = IssueInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        node = _node(body.validated_data["node"])
        require_change(request.user, {reservation.site_id, node.site_id})
        key = request.headers.get("Idempotency-Key") or f"api-issue:{reservation.pk}"
        with service_errors(), change_context(actor=request.user, source=ChangeSource.API):
            cmdb_stock.reservation_issue(
                reservation=reservation, node=node, slot_index=body.validated_data["slot_index"], key=key
            )
        reservation.refresh_from_db()
        return Response(self.get_serializer(reservation).data)


class IsGlobalWarehouseEditor(BasePermission):
    """Reads for everyone signed in; writes need the global model permission (levels are policy)."""

    def has_permission(self, request: Request, view) -> bool:
        if request.method in SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        action_name = {"POST": "add", "DELETE": "delete"}.get(request.method, "change")
        return request.user.has_perm(f"warehouse.{action_name}_minimumstock")


@extend_schema_view(list=extend_schema(parameters=_filters(site="Site code.")))
class MinimumStockViewSet(ApiViewMixin, viewsets.ModelViewSet):
    """Minimum stock per site and model. Filters: ?site=<code>."""

    serializer_class = MinimumStockSerializer
    permission_classes = [IsGlobalWarehouseEditor]
    queryset = MinimumStock.objects.none()

    def get_queryset(self) -> QuerySet[MinimumStock]:
        if getattr(self, "swagger_fake_view", False):
            return MinimumStock.objects.none()
        qs = MinimumStock.objects.filter(site_id__in=visible_site_ids(self.request.user)).select_related(
            "site", "accelerator_model", "part_model"
        )
        if site := self.request.query_params.get("site"):
            qs = qs.filter(site__code=site)
        return qs


class StockOverviewView(ApiViewMixin, APIView):
    """Spares per site and model against the installed base, e.g. "H100-SXM5-80GB: 2,048 installed, 31 spares,
    1.5%". Filters: ?site=<code>, ?below_minimum=true."""

    @extend_schema(
        responses=StockOverviewSerializer,
        parameters=[
            OpenApiParameter("site", OpenApiTypes.STR, description="Only this site (code)."),
            OpenApiParameter("below_minimum", OpenApiTypes.BOOL, description="Only lines below their minimum."),
        ],
    )
    def get(self, request: Request) -> Response:
        sites = visible_site_ids(request.user)
        if code := request.query_params.get("site"):
            sites = list(Site.objects.filter(pk__in=sites, code=code).values_list("pk", flat=True))
        lines = stock_lines(site_ids=sites)
        if request.query_params.get("below_minimum", "").lower() in {"1", "true", "yes"}:
            lines = [ln for ln in lines if ln.is_below_minimum]
        return Response({"count": len(lines), "results": StockLineSerializer(lines, many=True).data})


class StocktakeView(ApiViewMixin, APIView):
    """POST a stock take of one location: consumable counts become `adjust` movements; serials found or not
    found where the ledger expects them become discrepancies (never silent adjustments)."""

    @extend_schema(request=StocktakeInputSerializer, responses=StocktakeResultSerializer)
    def post(self, request: Request) -> Response:
        body = StocktakeInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        location = _location(data["location"], "location")
        require_change(request.user, {location.site_id})
        models = PartModel.objects.in_bulk(list(data["counts"]), field_name="sku")
        unknown = sorted(set(data["counts"]) - set(models))
        if unknown:
            raise exceptions.ValidationError({"counts": f"Unknown SKU(s): {', '.join(unknown)}."})
        key = request.headers.get("Idempotency-Key") or None
        with service_errors(), transaction.atomic(), change_context(actor=request.user, source=ChangeSource.API):
            result = stocktake_apply(
                location=location,
                counts={models[s]: n for s, n in data["counts"].items()},
                serials=data["serials"],
                reason=data["reason"],
                ticket_ref=data["ticket_ref"],
                key=f"api:{request.user.pk}:{key}" if key else None,
            )
            after_outflow({location.site_id})
        return Response(
            {
                "adjustments": MovementSerializer(result.adjustments, many=True).data,
                "missing": result.missing,
                "unexpected": result.unexpected,
            }
        )


@extend_schema_view(
    list=extend_schema(parameters=_filters(status="open or resolved.", site="Site code.", kind="Discrepancy kind."))
)
class StockDiscrepancyViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Differences with the WMS and stock takes. Filters: ?status=open, ?site=, ?kind=."""

    serializer_class = StockDiscrepancySerializer
    queryset = StockDiscrepancy.objects.none()

    def get_queryset(self) -> QuerySet[StockDiscrepancy]:
        if getattr(self, "swagger_fake_view", False):
            return StockDiscrepancy.objects.none()
        qs = StockDiscrepancy.objects.filter(site_id__in=visible_site_ids(self.request.user)).select_related(
            "site", "location__site"
        )
        params = self.request.query_params
        for name, field in (("status", "status"), ("site", "site__code"), ("kind", "kind")):
            if value := params.get(name):
                qs = qs.filter(**{field: value})
        return qs

    @extend_schema(request=ReasonSerializer, responses=StockDiscrepancySerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        row = self.get_object()
        require_change(request.user, {row.site_id})
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        StockDiscrepancy.objects.filter(pk=row.pk, status="open").update(
            status="resolved",
            resolved_at=timezone.now(),
            resolved_by=request.user,
            resolution=body.validated_data["reason"],
        )
        row.refresh_from_db()
        return Response(self.get_serializer(row).data)
