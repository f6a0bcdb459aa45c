"""Workflow API views. Thin: parse, call the engine, serialise. Engine refusals map onto HTTP:
GuardError -> 400 (with field errors), ForbiddenError -> 403, NotAllowedError -> 409,
IdempotencyKeyReusedError -> 422."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from gpuops.api.exceptions import Conflict
from gpuops.api.viewsets import ApiViewMixin

from .. import engine
from ..models import StepRun, Ticket
from ..registry import workflow_or_none, workflows
from ..selectors import ticket_get, ticket_list, ticket_runs, ticket_timeline
from . import serializers as s
from .learning import TicketLearningActions

FILTER_PARAMETERS = [
    OpenApiParameter("type", str, description="Ticket type."),
    OpenApiParameter("state", str, description="Workflow state."),
    OpenApiParameter("status", str, enum=["open", "closed", "all"], description="Default: open."),
    OpenApiParameter("assignee", str, description="'me', a user id, or 'group:<id>'."),
    OpenApiParameter("mine", bool, description="Requested by, assigned to, or watched by me (or my groups)."),
    OpenApiParameter("node", str, description="Linked node hostname contains."),
    OpenApiParameter("site", str, description="Site code."),
    OpenApiParameter("q", str, description="A reference (REP-12) or words of the title."),
    OpenApiParameter(
        "age",
        str,
        enum=["lt1d", "1to3d", "3to7d", "gt7d"],
        description="Created that long ago (days: <1, 1-3, 3-7, >7).",
    ),
    OpenApiParameter("overdue", bool, description="Open and past the due date of the type's SLA."),
]
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description="A retried request with the same key returns the first result; the "
    "same key with a different request is refused (422).",
)


class IdempotencyKeyReused(exceptions.APIException):
    """422: the Idempotency-Key was used for a different request."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "This Idempotency-Key was used for a different request."
    default_code = "idempotency_key_reused"


def _idempotency_key(request: Request) -> str | None:
    """The client's Idempotency-Key, scoped to the user (two users may pick the same key)."""
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > 100:  # stored with its scope in 128 characters (TransitionLog.idempotency_key)
        raise exceptions.ValidationError({"Idempotency-Key": ["At most 100 characters."]})
    return f"api:{request.user.pk}:{key}" if key else None


def _raise(exc: engine.WorkflowError) -> None:
    if isinstance(exc, engine.IdempotencyKeyReusedError):
        raise IdempotencyKeyReused(exc.errors[0]) from exc
    if isinstance(exc, engine.ForbiddenError):
        raise exceptions.PermissionDenied(exc.errors[0]) from exc
    if isinstance(exc, engine.NotAllowedError):
        raise Conflict("; ".join(exc.errors)) from exc
    raise exceptions.ValidationError(
        {
            **{k: [v] for k, v in exc.field_errors.items()},
            **(
                {"non_field_errors": [e for e in exc.errors if e not in exc.field_errors.values()]}
                if any(e not in exc.field_errors.values() for e in exc.errors)
                else {}
            ),
        }
    ) from exc


class TicketViewSet(TicketLearningActions, ApiViewMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Tickets: list (filtered to what you may see), open, read, and move them."""

    serializer_class = s.TicketSerializer
    queryset = Ticket.objects.none()

    def get_queryset(self):
        return ticket_list(self.request.user, self.request.query_params).order_by("-created_at", "-id")

    def _ticket(self, pk: Any) -> Ticket:
        try:
            ticket = ticket_get(self.request.user, int(pk))
        except (TypeError, ValueError):
            ticket = None
        if ticket is None:
            raise exceptions.NotFound("No such ticket.")
        return ticket

    def _detail(self, ticket: Ticket, code: int = status.HTTP_200_OK) -> Response:
        ticket = (
            Ticket.objects.select_related("requester", "assignee", "assignee_group", "site")
            .prefetch_related("links", "watchers", "runs__log_lines")
            .get(pk=ticket.pk)
        )
        return Response(s.TicketDetailSerializer(ticket, context={"request": self.request}).data, status=code)

    @extend_schema(parameters=FILTER_PARAMETERS)
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=s.TicketDetailSerializer)
    def retrieve(self, request: Request, pk: str) -> Response:
        return self._detail(self._ticket(pk))

    @extend_schema(
        request=s.TicketCreateInputSerializer,
        parameters=[IDEMPOTENCY],
        responses={201: s.TicketDetailSerializer, 200: s.TicketDetailSerializer},
    )
    def create(self, request: Request) -> Response:
        """Open a ticket: 201. A retry with the same Idempotency-Key and body: 200 with the same ticket."""
        data = self._input(s.TicketCreateInputSerializer, request)
        if workflow_or_none(data["type"]) is None:
            raise exceptions.ValidationError({"type": [f"Unknown ticket type {data['type']!r}."]})
        group = None
        if data["assignee_group"]:
            group = Group.objects.filter(name=data["assignee_group"]).first()
            if group is None:
                raise exceptions.ValidationError({"assignee_group": [f"No group {data['assignee_group']!r}."]})
        fields = {
            "type_": data["type"],
            "title": data["title"],
            "requester": request.user,
            "description": data["description"],
            "priority": data["priority"],
            "inputs": data["inputs"],
            "change_plan": data["change_plan"],
            "rollback_plan": data["rollback_plan"],
            "assignee_group": group,
            "start": data["start"],
        }
        key = _idempotency_key(request)
        try:
            if key:
                result = engine.ticket_create_once(idempotency_key=key, **fields)
            else:
                result = engine.CreateResult(ticket=engine.ticket_create(**fields))
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(result.ticket, status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED)

    @staticmethod
    def _input(serializer_class: type, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)

    @extend_schema(
        request=s.TransitionInputSerializer,
        responses=s.TicketDetailSerializer,
        parameters=[
            OpenApiParameter("name", str, location=OpenApiParameter.PATH, description="Transition name."),
            IDEMPOTENCY,
        ],
    )
    @action(detail=True, methods=["post"], url_path=r"transitions/(?P<name>[a-z0-9_]+)")
    def transition(self, request: Request, pk: str, name: str) -> Response:
        """Take a transition. Inputs are validated by the workflow; guards explain refusals."""
        ticket = self._ticket(pk)
        data = self._input(s.TransitionInputSerializer, request)
        try:
            engine.transition_apply(
                ticket=ticket,
                name=name,
                actor=request.user,
                data=data["inputs"],
                idempotency_key=_idempotency_key(request),
            )
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)

    @extend_schema(request=s.ApprovalInputSerializer, responses=s.TicketDetailSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        """Approve or reject the current approval round (never your own ticket)."""
        ticket = self._ticket(pk)
        data = self._input(s.ApprovalInputSerializer, request)
        try:
            engine.approval_record(
                ticket=ticket, actor=request.user, decision=data["decision"], comment=data["comment"]
            )
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)

    @extend_schema(methods=["GET"], responses=s.TimelineItemSerializer(many=True))
    @extend_schema(
        methods=["POST"],
        request=s.CommentInputSerializer,
        parameters=[IDEMPOTENCY],
        responses={201: s.TimelineItemSerializer(many=True)},
    )
    # The per-ticket lists are plain (bounded) lists: no paginator, so the schema does not promise pages.
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def comments(self, request: Request, pk: str) -> Response:
        """GET: the comments. POST: add one (a retry with the same Idempotency-Key adds nothing)."""
        ticket = self._ticket(pk)
        if request.method == "POST":
            data = self._input(s.CommentInputSerializer, request)
            try:
                engine.comment_add(
                    ticket=ticket, actor=request.user, body=data["body"], idempotency_key=_idempotency_key(request)
                )
            except engine.WorkflowError as exc:
                _raise(exc)
        items = [i for i in ticket_timeline(ticket) if i.kind == "comment"]
        return Response(
            s.TimelineItemSerializer(items, many=True).data,
            status=status.HTTP_201_CREATED if request.method == "POST" else status.HTTP_200_OK,
        )

    @extend_schema(responses=s.TimelineItemSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def timeline(self, request: Request, pk: str) -> Response:
        """Everything that happened, with the CMDB changes made under the ticket's correlation id."""
        return Response(s.TimelineItemSerializer(ticket_timeline(self._ticket(pk)), many=True).data)

    @extend_schema(responses=s.StepRunSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def runs(self, request: Request, pk: str) -> Response:
        """The automated step runs, with their logs."""
        return Response(s.StepRunSerializer(ticket_runs(self._ticket(pk)), many=True).data)

    @extend_schema(request=s.ReasonInputSerializer, responses=s.TicketDetailSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request: Request, pk: str) -> Response:
        """Hold the ticket's automation (operators)."""
        ticket = self._ticket(pk)
        data = self._input(s.ReasonInputSerializer, request)
        try:
            engine.ticket_pause(ticket=ticket, actor=request.user, reason=data["reason"])
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)

    @extend_schema(request=None, responses=s.TicketDetailSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk: str) -> Response:
        """Release a paused ticket's automation (operators)."""
        ticket = self._ticket(pk)
        try:
            engine.ticket_resume(ticket=ticket, actor=request.user)
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)

    @extend_schema(request=s.ReasonInputSerializer, responses=s.TicketDetailSerializer, parameters=[IDEMPOTENCY])
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Take the type's `cancel` transition with `reason`."""
        ticket = self._ticket(pk)
        data = self._input(s.ReasonInputSerializer, request)
        try:
            engine.transition_apply(
                ticket=ticket,
                name="cancel",
                actor=request.user,
                data={"cancel_reason": data["reason"]},
                idempotency_key=_idempotency_key(request),
            )
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)

    @extend_schema(request=s.RetryStepInputSerializer, responses=s.TicketDetailSerializer)
    @action(detail=True, methods=["post"], url_path="retry-step")
    def retry_step(self, request: Request, pk: str) -> Response:
        """Run a failed, waiting or queued step again now (operators)."""
        ticket = self._ticket(pk)
        data = self._input(s.RetryStepInputSerializer, request)
        run = StepRun.objects.filter(pk=data["run_id"], ticket=ticket).first()
        if run is None:
            raise exceptions.NotFound("No such step run on this ticket.")
        try:
            engine.step_retry(run=run, actor=request.user)
        except engine.WorkflowError as exc:
            _raise(exc)
        return self._detail(ticket)


class WorkflowTypeViewSet(ApiViewMixin, viewsets.ViewSet):
    """The declared workflows: states, transitions (with inputs and permissions) and create fields."""

    lookup_value_regex = "[a-z0-9_]+"

    @staticmethod
    def _spec(wf: Any) -> dict[str, Any]:
        def fields(items: Any) -> list[dict[str, Any]]:
            return [
                {
                    "name": f.name,
                    "label": f.label,
                    "kind": f.kind,
                    "required": f.required,
                    "choices": [list(c) for c in f.choices],
                }
                for f in items
            ]

        return {
            "type": wf.type,
            "label": wf.label,
            "prefix": wf.prefix,
            "is_change": wf.is_change,
            "initial": wf.initial,
            "states": [
                {"value": v, "label": str(label), "terminal": v in wf.terminal} for v, label in wf.states.choices
            ],
            "transitions": [
                {
                    "name": t.name,
                    "label": t.label,
                    "sources": sorted(t.sources),
                    "target": t.target,
                    "permission": f"workflows.{t.permission}" if t.permission else None,
                    "step": t.step,
                    "fields": fields(t.fields),
                }
                for t in wf.transitions
            ],
            "create_fields": fields(wf.create_fields),
        }

    @extend_schema(responses=s.WorkflowSpecSerializer(many=True))
    def list(self, request: Request) -> Response:
        return Response([self._spec(wf) for wf in workflows()])

    @extend_schema(
        responses=s.WorkflowSpecSerializer,
        parameters=[
            OpenApiParameter("id", str, location=OpenApiParameter.PATH, description="Ticket type, e.g. repair.")
        ],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        wf = workflow_or_none(pk)
        if wf is None:
            raise exceptions.NotFound("No such ticket type.")
        return Response(self._spec(wf))
