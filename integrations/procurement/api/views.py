"""Procurement REST API: requests (create, submit, approve, reject, cancel, retry the PO), discrepancies,
approval rules (read) and inbound events (read). Views parse, call one service, serialise.

Permissions: reading requires `procurement.view_procurementrequest` or membership of an approval group
(requesters always see their own);
creating, submitting and cancelling require `procurement.add_procurementrequest`; voting requires being in the
group of an open level of the request's approval chain (checked by the service); resolving a discrepancy
requires `procurement.change_discrepancy`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import Prefetch, Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from gpuops.api.viewsets import ApiViewMixin
from gpuops.context import ChangeSource, change_context

from ..inbound import event_enqueue, event_requeue
from ..models import (
    ApprovalRule,
    Discrepancy,
    InboundEvent,
    ProcurementRequest,
    RequestLine,
    RequestState,
)
from ..services import requests as svc
from ..services.receiving import discrepancy_resolve
from .serializers import (
    ApprovalRuleSerializer,
    CommentInputSerializer,
    DiscrepancySerializer,
    InboundEventSerializer,
    LineInputSerializer,
    ProcurementRequestSerializer,
    ReasonInputSerializer,
    RequestCreateInputSerializer,
)


@contextlib.contextmanager
def service_errors() -> Iterator[None]:
    """Django ValidationError from a service -> DRF 400 with the same field names."""
    try:
        yield
    except DjangoValidationError as exc:
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        raise exceptions.ValidationError(detail) from exc


def can_see_all_requests(user) -> bool:
    """The global view permission, or membership of an approval group (approvers must see what they vote on)."""
    return (
        user.has_perm("procurement.view_procurementrequest")
        or ApprovalRule.objects.filter(is_active=True, group__in=user.groups.all()).exists()
    )


def _require(request: Request, perm: str) -> None:
    if not request.user.has_perm(perm):
        raise exceptions.PermissionDenied(f"Requires {perm}.")


def _filters(**described: str) -> list[OpenApiParameter]:
    # Documented so the schema lists them, and so the unknown-parameter check (gpuops.api.query_params) accepts them.
    return [OpenApiParameter(name, OpenApiTypes.STR, description=text) for name, text in described.items()]


@extend_schema_view(
    list=extend_schema(
        parameters=_filters(
            state="Request state.", is_open="true or false.", site="Site code of a line.", po_number="PO number."
        )
    )
)
class ProcurementRequestViewSet(
    ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Procurement requests. Filters: ?state=, ?is_open=true|false, ?site=<code>, ?po_number=."""

    serializer_class = ProcurementRequestSerializer
    queryset = ProcurementRequest.objects.none()  # the real one depends on the user (get_queryset)

    def get_queryset(self) -> QuerySet[ProcurementRequest]:
        if getattr(self, "swagger_fake_view", False):  # OpenAPI generation: no user
            return ProcurementRequest.objects.none()
        qs = ProcurementRequest.objects.select_related("requested_by").prefetch_related(
            Prefetch(
                "lines",
                queryset=RequestLine.objects.select_related("site", "server_model", "accelerator_model", "part_model"),
            ),
            "approvals",
            "shipments__site",
            "discrepancies__shipment",
        )
        user = self.request.user
        if not can_see_all_requests(user):
            qs = qs.filter(requested_by=user)
        params = self.request.query_params
        if state := params.get("state"):
            qs = qs.filter(state=state)
        if (is_open := params.get("is_open")) is not None:
            qs = qs.filter(is_open=is_open.lower() in {"1", "true", "yes"})
        if site := params.get("site"):
            qs = qs.filter(lines__site__code=site).distinct()
        if po := params.get("po_number"):
            qs = qs.filter(po_number=po)
        return qs

    @extend_schema(request=RequestCreateInputSerializer, responses={201: ProcurementRequestSerializer})
    def create(self, request: Request, *args, **kwargs) -> Response:
        _require(request, "procurement.add_procurementrequest")
        data = RequestCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        lines_in = LineInputSerializer()
        with service_errors(), transaction.atomic(), change_context(actor=request.user, source=ChangeSource.API):
            req = svc.request_create(
                title=data.validated_data["title"],
                justification=data.validated_data["justification"],
                budget_code=data.validated_data["budget_code"],
                requested_by=request.user,
                lines=[lines_in.to_line(line) for line in data.validated_data["lines"]],
            )
            if data.validated_data["submit"]:
                req = svc.request_submit(request=req, actor=request.user)
        return Response(self.get_serializer(self.get_queryset().get(pk=req.pk)).data, status=status.HTTP_201_CREATED)

    def _command(self, request: Request, run) -> Response:
        req = self.get_object()
        with service_errors(), change_context(actor=request.user, source=ChangeSource.API):
            run(req)
        return Response(self.get_serializer(self.get_queryset().get(pk=req.pk)).data)

    @extend_schema(request=None, responses=ProcurementRequestSerializer)
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str | None = None) -> Response:
        """Send a draft into its approval chain (chosen by amount from the approval rules)."""
        _require(request, "procurement.add_procurementrequest")
        return self._command(request, lambda req: svc.request_submit(request=req, actor=request.user))

    @extend_schema(request=CommentInputSerializer, responses=ProcurementRequestSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Vote for the request; the vote that completes the chain places the PO (asynchronously)."""
        body = CommentInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._command(
            request,
            lambda req: svc.request_approve(request=req, approver=request.user, comment=body.validated_data["comment"]),
        )

    @extend_schema(request=CommentInputSerializer, responses=ProcurementRequestSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        body = CommentInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._command(
            request,
            lambda req: svc.request_reject(request=req, approver=request.user, comment=body.validated_data["comment"]),
        )

    @extend_schema(request=ReasonInputSerializer, responses=ProcurementRequestSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        _require(request, "procurement.add_procurementrequest")
        body = ReasonInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._command(
            request,
            lambda req: svc.request_cancel(request=req, actor=request.user, reason=body.validated_data["reason"]),
        )

    @extend_schema(request=None, responses={202: ProcurementRequestSerializer})
    @action(detail=True, methods=["post"], url_path="retry-order")
    def retry_order(self, request: Request, pk: str | None = None) -> Response:
        """Place the PO again after an error (same idempotency key: never a second PO)."""
        _require(request, "procurement.change_procurementrequest")
        req = self.get_object()
        if req.state != RequestState.APPROVED or req.po_number:
            raise exceptions.ValidationError({"state": f"{req.reference} has no PO to place."})
        from ..tasks import place_order

        ProcurementRequest.objects.filter(pk=req.pk).update(po_error="")
        place_order.delay(req.pk)
        return Response(self.get_serializer(self.get_queryset().get(pk=req.pk)).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(
    list=extend_schema(
        parameters=_filters(status="open or resolved.", request="Request id or PO number.", kind="Discrepancy kind.")
    )
)
class DiscrepancyViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Discrepancies of deliveries and invoices. Filters: ?status=open|resolved, ?request=<id>, ?kind=."""

    serializer_class = DiscrepancySerializer
    queryset = Discrepancy.objects.none()

    def get_queryset(self) -> QuerySet[Discrepancy]:
        if getattr(self, "swagger_fake_view", False):
            return Discrepancy.objects.none()
        qs = Discrepancy.objects.select_related("request", "shipment")
        user = self.request.user
        if not can_see_all_requests(user):
            qs = qs.filter(request__requested_by=user)
        params = self.request.query_params
        for name in ("status", "kind"):
            if value := params.get(name):
                qs = qs.filter(**{name: value})
        if value := params.get("request"):
            by_id = value.isdigit() and len(value) <= 18  # a longer number cannot be an id (and overflows SQLite)
            qs = qs.filter(Q(request_id=value) if by_id else Q(request__po_number=value))
        return qs

    @extend_schema(request=ReasonInputSerializer, responses=DiscrepancySerializer)
    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, pk: str | None = None) -> Response:
        """Close a discrepancy with what was done about it."""
        _require(request, "procurement.change_discrepancy")
        body = ReasonInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with service_errors(), change_context(actor=request.user, source=ChangeSource.API):
            row = discrepancy_resolve(
                discrepancy=self.get_object(), actor=request.user, resolution=body.validated_data["reason"]
            )
        return Response(self.get_serializer(row).data)


class ApprovalRuleViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """The approval chain by amount (edited in the admin)."""

    serializer_class = ApprovalRuleSerializer
    queryset = ApprovalRule.objects.select_related("group")


@extend_schema_view(
    list=extend_schema(parameters=_filters(status="Event status.", type="Event type.", source="Sending system."))
)
class InboundEventViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """Stored inbound events (procurement and WMS). Requires procurement.view_inboundevent.
    Filters: ?status=, ?type=, ?source=."""

    serializer_class = InboundEventSerializer
    queryset = InboundEvent.objects.none()

    def get_queryset(self) -> QuerySet[InboundEvent]:
        if getattr(self, "swagger_fake_view", False):
            return InboundEvent.objects.none()
        _require(self.request, "procurement.view_inboundevent")
        qs = InboundEvent.objects.all()
        for name in ("status", "type", "source"):
            if value := self.request.query_params.get(name):
                qs = qs.filter(**{name: value})
        return qs

    @extend_schema(
        request=None,
        responses={202: InboundEventSerializer, 400: OpenApiResponse(description="The event has not failed.")},
    )
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        """Re-run a failed event (after fixing what made it fail)."""
        _require(request, "procurement.change_inboundevent")
        event = self.get_object()
        if not event_requeue(event.pk):
            raise exceptions.ValidationError({"status": f"Only a failed event is re-run (this one is {event.status})."})
        event_enqueue(event)
        event.refresh_from_db()
        return Response(self.get_serializer(event).data, status=status.HTTP_202_ACCEPTED)
