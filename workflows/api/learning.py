"""API of learning from failures and change governance: incident postmortems, emergency approvals of changes
(ticket actions mixed into TicketViewSet) and the failure analytics (/api/workflows/failures/...)."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cmdb.lifecycle import ReportQueryError, days_param
from gpuops.api.viewsets import ApiViewMixin

from .. import engine
from ..failures import (
    DIMENSIONS,
    FailureQueryError,
    FailureScope,
    failure_rates,
    offenders_in_scope,
    root_cause_counts,
    top_signals,
)
from ..learning_views import markdown_response
from ..services.governance import emergency_approval_record
from ..services.postmortems import postmortem_action_add, postmortem_report, postmortem_save
from ..services.spares_forecast import spares_forecast, spares_refill_raise


class PostmortemInputSerializer(serializers.Serializer):
    summary = serializers.CharField(required=False, allow_blank=True)
    root_cause = serializers.CharField(required=False, allow_blank=True, help_text="A root cause category slug.")
    root_cause_detail = serializers.CharField(required=False, allow_blank=True)
    started_at = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    ended_at = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    window_hours = serializers.IntegerField(required=False, help_text="'What changed' window before the start.")
    impact_nodes = serializers.IntegerField(required=False, allow_null=True)
    impact_cards = serializers.IntegerField(required=False, allow_null=True)
    impact_tenants = serializers.IntegerField(required=False, allow_null=True)
    impact_minutes = serializers.IntegerField(required=False, allow_null=True)


class ActionItemInputSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    priority = serializers.ChoiceField(choices=["critical", "high", "normal", "low"], default="normal")


class EmergencyInputSerializer(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True)


class TicketLearningActions:
    """Postmortem and emergency-approval actions of TicketViewSet (it provides `_ticket`, `_input`, `_detail`)."""

    @extend_schema(methods=["GET"], responses=OpenApiTypes.OBJECT)
    @extend_schema(methods=["PUT", "PATCH"], request=PostmortemInputSerializer, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["get", "put", "patch"])
    def postmortem(self, request: Request, pk: str) -> Response:
        """An incident's postmortem: impact, timeline, what changed before it, root cause, action items, and
        what is still missing before the ticket may close. PUT/PATCH sets the fields given."""
        ticket = self._ticket(pk)
        if ticket.type != "incident":
            raise exceptions.NotFound("Only incident tickets have a postmortem.")
        if request.method in ("PUT", "PATCH"):
            serializer = PostmortemInputSerializer(data=request.data, partial=True)
            serializer.is_valid(raise_exception=True)
            try:
                postmortem_save(ticket=ticket, actor=request.user, data=dict(serializer.validated_data))
            except engine.WorkflowError as exc:
                _raise(exc)
        return Response(postmortem_report(ticket, request.user).as_dict())

    @extend_schema(responses={(200, "text/markdown"): OpenApiTypes.STR})
    @action(detail=True, methods=["get"], url_path="postmortem/markdown")
    def postmortem_markdown(self, request: Request, pk: str) -> HttpResponse:
        """The postmortem as a Markdown document."""
        ticket = self._ticket(pk)
        if ticket.type != "incident":
            raise exceptions.NotFound("Only incident tickets have a postmortem.")
        return markdown_response(ticket, request.user)

    @extend_schema(request=ActionItemInputSerializer, responses=OpenApiTypes.OBJECT)
    @action(detail=True, methods=["post"], url_path="postmortem/actions")
    def postmortem_actions(self, request: Request, pk: str) -> Response:
        """Open a follow-up ticket as an action item of the postmortem: 201 with its reference."""
        ticket = self._ticket(pk)
        data = self._input(ActionItemInputSerializer, request)
        try:
            follow_up = postmortem_action_add(ticket=ticket, actor=request.user, **data)
        except engine.WorkflowError as exc:
            _raise(exc)
        return Response({"id": follow_up.pk, "reference": follow_up.reference, "title": follow_up.title}, status=201)

    @extend_schema(request=EmergencyInputSerializer)
    @action(detail=True, methods=["post"], url_path="emergency-approval")
    def emergency_approval(self, request: Request, pk: str) -> Response:
        """Let a change ticket start outside maintenance windows and freezes (workflows.approve_emergency_change;
        never the requester's own)."""
        ticket = self._ticket(pk)
        data = self._input(EmergencyInputSerializer, request)
        try:
            emergency_approval_record(ticket=ticket, actor=request.user, reason=data["reason"])
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)


def _raise(exc: engine.WorkflowError) -> None:
    from .views import _raise as raise_mapped

    raise_mapped(exc)


# --- failure analytics --------------------------------------------------------------------------------------------

SCOPE_PARAMETERS = [
    OpenApiParameter("site", str, description="Site code."),
    OpenApiParameter("cluster", str, description="Cluster name."),
    OpenApiParameter("tenant", str, description="Tenant slug."),
    OpenApiParameter("days", int, description="The period: this many days up to now (default 365)."),
]


def _scope(request: Request) -> FailureScope:
    try:
        return FailureScope.from_params(request.user, request.query_params)
    except FailureQueryError as exc:
        raise exceptions.ValidationError({exc.field: [str(exc)]}) from exc


class FailureRatesView(ApiViewMixin, APIView):
    """Annualised failure rate and MTBF per accelerator model, vendor, site, driver or firmware version."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[
            *SCOPE_PARAMETERS,
            OpenApiParameter("by", str, enum=list(DIMENSIONS), description="Default model."),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        scope = _scope(request)
        by = request.query_params.get("by", "model")
        try:
            rows = failure_rates(scope, by)
        except FailureQueryError as exc:
            raise exceptions.ValidationError({exc.field: [str(exc)]}) from exc
        return Response(
            {
                "by": by,
                "start": scope.start.isoformat(),
                "end": scope.end.isoformat(),
                "exposure": "card-days in service from node placements",
                "rows": [r.as_dict() for r in rows],
            }
        )


class FailureSignalsView(ApiViewMixin, APIView):
    """The most frequent health signals (Xid codes, ECC, vendor codes) per week (per day up to 31 days)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=SCOPE_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        periods, series = top_signals(_scope(request))
        return Response(
            {
                "periods": [p.isoformat() for p in periods],
                "signals": [
                    {"signal": s.signal, "total": s.total, "counts": [s.by_period.get(p, 0) for p in periods]}
                    for s in series
                ],
            }
        )


class RepeatOffendersView(ApiViewMixin, APIView):
    """Cards, slots and nodes that failed again within 30 days (a slot killing its cards: the board)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=SCOPE_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response({"offenders": [o.as_dict() for o in offenders_in_scope(_scope(request))]})


class RootCausesView(ApiViewMixin, APIView):
    """Postmortems and repairs per root cause category in the period."""

    permission_classes = [IsAuthenticated]

    @extend_schema(parameters=SCOPE_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        rows = root_cause_counts(_scope(request))
        return Response({"root_causes": [{"root_cause": c, "postmortems": p, "repairs": r} for c, p, r in rows]})


def _forecast_days(request: Request) -> int:
    try:
        return days_param(request.query_params, "days", 180, low=7, high=3660)
    except ReportQueryError as exc:
        raise exceptions.ValidationError({exc.field: [str(exc)]}) from exc


class SparesForecastView(ApiViewMixin, APIView):
    """Per site and accelerator model: failures in the last `days` days, free spares, days of cover, and the
    suggested minimum stock for the replenishment lead time (workflows.services.spares_forecast)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[
            OpenApiParameter("days", int, description="Failures of this many days (default 180)."),
            OpenApiParameter("site", str, description="Site code."),
        ],
        responses=OpenApiTypes.OBJECT,
        tags=["reports"],
    )
    def get(self, request: Request) -> Response:
        days = _forecast_days(request)
        rows = spares_forecast(request.user, days=days, site=request.query_params.get("site", "").strip())
        return Response({"days": days, "rows": [r.as_dict() for r in rows]})


class SparesRaiseInput(serializers.Serializer):
    site = serializers.CharField(help_text="Site code.")
    model = serializers.IntegerField(min_value=1, help_text="Accelerator model id.")
    days = serializers.IntegerField(min_value=7, max_value=3660, default=180)


class SparesRaiseView(ApiViewMixin, APIView):
    """Open (or update) the refill request for a forecast row's shortfall, through the procurement workflow.
    Needs procurement.add_procurementrequest. 201 with the request; 400 when the spares in hand suffice."""

    permission_classes = [IsAuthenticated]

    @extend_schema(request=SparesRaiseInput, responses=OpenApiTypes.OBJECT, tags=["reports"])
    def post(self, request: Request) -> Response:
        body = SparesRaiseInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            outcome = spares_refill_raise(request.user, site=data["site"], model_id=data["model"], days=data["days"])
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from exc
        req = outcome.request
        line = req.lines.first()
        return Response(
            {
                "request": req.pk,
                "reference": str(req),
                "state": req.state,
                "quantity": line.quantity if line else None,
                "created": outcome.created,
            },
            status=201 if outcome.created else 200,
        )


__all__ = [
    "FailureRatesView",
    "FailureSignalsView",
    "RepeatOffendersView",
    "RootCausesView",
    "SparesForecastView",
    "SparesRaiseView",
    "TicketLearningActions",
]
