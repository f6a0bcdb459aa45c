"""Serializers of the workflows API: `<Model>Serializer` for output, `<Model><Action>InputSerializer` for
commands. Inputs are validated by the engine (the same rules as the UI); these only shape the JSON."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import Approval, StepRun, Ticket, TicketLink, TicketPriority
from ..registry import workflow_or_none


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


class TicketLinkSerializer(serializers.ModelSerializer):
    kind = serializers.CharField(read_only=True)
    object_id = serializers.SerializerMethodField()
    admin_url = serializers.CharField(read_only=True)

    class Meta:
        model = TicketLink
        fields = ["role", "kind", "object_id", "object_repr", "admin_url"]

    def get_object_id(self, link: TicketLink) -> int | None:
        return getattr(link, f"{link.kind}_id") if link.kind else None


class StepRunSerializer(serializers.ModelSerializer):
    """One run of an automated step; `id` is its Celery task id."""

    log = serializers.SerializerMethodField()

    class Meta:
        model = StepRun
        fields = [
            "id",
            "step",
            "sequence",
            "status",
            "attempts",
            "max_attempts",
            "error",
            "wait_key",
            "wake_at",
            "created_at",
            "started_at",
            "ended_at",
            "log",
        ]

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_log(self, run: StepRun) -> list[str]:
        return [f"{line.at:%Y-%m-%dT%H:%M:%S} {line.level} {line.message}" for line in run.log_lines.all()]


class TicketApprovalSerializer(serializers.ModelSerializer):
    class Meta:
        model = Approval
        fields = ["round", "approver_repr", "decision", "comment", "at", "snapshot"]


class TicketSerializer(serializers.ModelSerializer):
    """A ticket in a list."""

    reference = serializers.CharField(read_only=True)
    state_label = serializers.SerializerMethodField()
    requester = serializers.SerializerMethodField()
    assignee = serializers.SerializerMethodField()
    assignee_group = serializers.SerializerMethodField()
    site = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = Ticket
        fields = [
            "id",
            "reference",
            "type",
            "title",
            "state",
            "state_label",
            "priority",
            "requester",
            "assignee",
            "assignee_group",
            "site",
            "is_open",
            "is_paused",
            "due_at",
            "created_at",
            "updated_at",
            "closed_at",
            "url",
        ]

    def get_state_label(self, ticket: Ticket) -> str:
        wf = workflow_or_none(ticket.type)
        return wf.state_label(ticket.state) if wf else ticket.state

    def get_requester(self, ticket: Ticket) -> str | None:
        return _username(ticket.requester)

    def get_assignee(self, ticket: Ticket) -> str | None:
        return _username(ticket.assignee)

    def get_assignee_group(self, ticket: Ticket) -> str | None:
        return ticket.assignee_group.name if ticket.assignee_group_id else None

    def get_site(self, ticket: Ticket) -> str | None:
        return ticket.site.code if ticket.site_id else None

    def get_url(self, ticket: Ticket) -> str:
        return ticket.get_absolute_url()


class FieldSpecSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    kind = serializers.CharField()
    required = serializers.BooleanField()
    choices = serializers.ListField(child=serializers.ListField(child=serializers.CharField()))


class TransitionSpecSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()
    target = serializers.CharField()
    step = serializers.CharField(allow_null=True)
    fields = FieldSpecSerializer(many=True)


class TicketActionsSerializer(serializers.Serializer):
    """What the requesting user may do now."""

    transitions = TransitionSpecSerializer(many=True)
    can_approve = serializers.BooleanField()
    can_operate = serializers.BooleanField()
    can_comment = serializers.BooleanField()
    approval_needed = serializers.IntegerField()
    approvals_so_far = serializers.IntegerField()


class TicketDetailSerializer(TicketSerializer):
    """A ticket with its links, runs, current approvals and the caller's available actions."""

    links = TicketLinkSerializer(many=True, read_only=True)
    runs = StepRunSerializer(many=True, read_only=True)
    approvals = serializers.SerializerMethodField()
    actions = serializers.SerializerMethodField()
    watchers = serializers.SerializerMethodField()

    class Meta(TicketSerializer.Meta):
        fields = [
            *TicketSerializer.Meta.fields,
            "description",
            "change_plan",
            "rollback_plan",
            "data",
            "correlation_id",
            "approval_round",
            "links",
            "runs",
            "approvals",
            "actions",
            "watchers",
        ]

    @extend_schema_field(TicketApprovalSerializer(many=True))
    def get_approvals(self, ticket: Ticket) -> list[dict[str, Any]]:
        return TicketApprovalSerializer(ticket.approvals.filter(round=ticket.approval_round), many=True).data

    @extend_schema_field(TicketActionsSerializer)
    def get_actions(self, ticket: Ticket) -> dict[str, Any]:
        from ..selectors import ticket_actions

        actions = ticket_actions(self.context["request"].user, ticket)
        return {
            "transitions": [
                {
                    "name": t.name,
                    "label": t.label,
                    "target": t.target,
                    "step": t.step,
                    "fields": [
                        {
                            "name": f.name,
                            "label": f.label,
                            "kind": f.kind,
                            "required": f.required,
                            "choices": [list(c) for c in f.choices],
                        }
                        for f in t.fields
                    ],
                }
                for t in actions.transitions
            ],
            "can_approve": actions.can_approve,
            "can_operate": actions.can_operate,
            "can_comment": actions.can_comment,
            "approval_needed": actions.approval_needed,
            "approvals_so_far": actions.approvals_so_far,
        }

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_watchers(self, ticket: Ticket) -> list[str]:
        return [u.get_username() for u in ticket.watchers.all()]


class TimelineItemSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.CharField()
    actor = serializers.CharField()
    message = serializers.CharField()
    body = serializers.CharField()
    url = serializers.CharField()
    changes = serializers.ListField(child=serializers.ListField())


class TicketCreateInputSerializer(serializers.Serializer):
    type = serializers.CharField(help_text="Ticket type: repair, decommission, incident, ...")
    title = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    priority = serializers.ChoiceField(choices=TicketPriority.choices, default=TicketPriority.NORMAL)
    inputs = serializers.DictField(
        required=False, default=dict, help_text='The type\'s create fields, e.g. {"accelerator": "<serial>"}.'
    )
    change_plan = serializers.CharField(required=False, allow_blank=True, default="")
    rollback_plan = serializers.CharField(required=False, allow_blank=True, default="")
    assignee_group = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Group name; default: the type's group."
    )
    start = serializers.BooleanField(default=False, help_text="Take the type's start transition at once.")


class TransitionInputSerializer(serializers.Serializer):
    inputs = serializers.DictField(
        required=False, default=dict, help_text='The transition\'s inputs, e.g. {"old_serial": ..., "new_serial": ...}.'
    )


class ApprovalInputSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approved", "rejected"])
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class CommentInputSerializer(serializers.Serializer):
    body = serializers.CharField()


class ReasonInputSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class RetryStepInputSerializer(serializers.Serializer):
    run_id = serializers.UUIDField(help_text="The StepRun (== Celery task) id.")


class WorkflowSpecSerializer(serializers.Serializer):
    type = serializers.CharField()
    label = serializers.CharField()
    prefix = serializers.CharField()
    is_change = serializers.BooleanField()
    initial = serializers.CharField()
    states = serializers.ListField(child=serializers.DictField())
    transitions = serializers.ListField(child=serializers.DictField())
    create_fields = FieldSpecSerializer(many=True)
