"""Forms of the ticket UI, built from the workflow declarations. They render and re-display inputs; the engine
validates (so the UI and the API refuse the same things with the same messages)."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms
from django.contrib.auth.models import Group

from .declarations import Field, Workflow
from .models import TicketPriority


def form_field(f: Field) -> forms.Field:
    """A Django form field for a declared input."""
    common = {"label": f.label, "required": f.required, "help_text": f.help_text}
    if f.kind == "textarea":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), **common)
    if f.kind == "choice":
        return forms.ChoiceField(choices=[("", "---------"), *f.choices], **common)
    if f.kind == "int":
        return forms.IntegerField(**common)
    if f.kind == "bool":
        return forms.BooleanField(**{**common, "required": False})
    if f.kind == "node":
        return forms.CharField(
            max_length=253,
            **{**common, "help_text": f.help_text or "Hostname"},
            widget=forms.TextInput(attrs={"placeholder": "e.g. sh1-h100-0007", "autocomplete": "off"}),
        )
    if f.kind == "accelerator":
        return forms.CharField(
            max_length=100,
            **{**common, "help_text": f.help_text or "Serial number"},
            widget=forms.TextInput(attrs={"autocomplete": "off"}),
        )
    return forms.CharField(max_length=f.max_length, widget=forms.TextInput(attrs={"autocomplete": "off"}), **common)


class InputsForm(forms.Form):
    """The declared inputs of a transition (or of ticket creation)."""

    idempotency_key = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, fields: Sequence[Field], *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for f in fields:
            self.fields[f.name] = form_field(f)

    def add_engine_errors(self, field_errors: dict[str, str], errors: list[str]) -> None:
        shown = set(field_errors.values())
        for name, message in field_errors.items():
            self.add_error(name if name in self.fields else None, message)
        for message in errors:
            if message not in shown:
                self.add_error(None, message)


class TicketCreateForm(InputsForm):
    """Title, priority, assignment and plans, then the workflow's own create inputs."""

    def __init__(self, wf: Workflow, *args, **kwargs) -> None:
        super().__init__((), *args, **kwargs)
        self.fields["title"] = forms.CharField(max_length=200)
        for f in wf.create_fields:
            self.fields[f.name] = form_field(f)
        self.fields["priority"] = forms.ChoiceField(choices=TicketPriority.choices, initial=TicketPriority.NORMAL)
        self.fields["description"] = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
        self.fields["assignee_group"] = forms.ModelChoiceField(
            queryset=Group.objects.order_by("name"),
            required=False,
            label="Assign to group",
            help_text=f"Default: {wf.default_group_name() or 'nobody'}",
        )
        if wf.is_change:
            self.fields["change_plan"] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 5}), required=False, help_text="Needed before it can be submitted."
            )
            self.fields["rollback_plan"] = forms.CharField(
                widget=forms.Textarea(attrs={"rows": 4}), required=False, help_text="Needed before it can be submitted."
            )
        if wf.start_transition:
            label = wf.transition(wf.start_transition).label
            self.fields["start"] = forms.BooleanField(required=False, initial=True, label=f"{label} at once")


class PlansForm(forms.Form):
    title = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    change_plan = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False)
    rollback_plan = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
