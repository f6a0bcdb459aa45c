"""Learning from failures: root-cause categories (data), incident postmortems and their follow-up tickets."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RootCauseCategory(models.Model):
    """Why something failed, in the fleet's own words: editable data (admin), seeded with the usual causes
    (hardware-gpu, firmware, cabling, human-change, ...). Postmortems and repair verdicts other than
    "replace the card" name one, so failures can be counted by cause."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.CharField(max_length=500, blank=True)
    is_active = models.BooleanField(default=True, help_text="Inactive categories are kept for history, not offered.")
    position = models.PositiveSmallIntegerField(default=100, help_text="Order in pick lists.")

    class Meta:
        ordering = ["position", "slug"]
        verbose_name_plural = "root cause categories"

    def __str__(self) -> str:
        return self.name


class Postmortem(models.Model):
    """The postmortem of one incident ticket: impact, root cause, summary; the timeline and "what changed" are
    computed from the ticket and the change history when shown (workflows.services.postmortems).

    Impact numbers are derived from the ticket's linked objects and times; a number set here overrides the
    derived one (a blast radius the links do not show). An incident closes only with a complete postmortem.
    """

    ticket = models.OneToOneField("workflows.Ticket", on_delete=models.CASCADE, related_name="postmortem")
    summary = models.TextField(blank=True, help_text="What happened, in a few sentences.")
    root_cause = models.ForeignKey(
        RootCauseCategory, null=True, blank=True, on_delete=models.PROTECT, related_name="postmortems"
    )
    root_cause_detail = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="Incident start; empty: the ticket's opening.")
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Incident end; empty: when it was resolved.")
    window_hours = models.PositiveIntegerField(
        default=72, help_text="'What changed' lists the changes this long before the start."
    )
    impact_nodes = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: derived from the links.")
    impact_cards = models.PositiveIntegerField(null=True, blank=True)
    impact_tenants = models.PositiveIntegerField(null=True, blank=True)
    impact_minutes = models.PositiveIntegerField(null=True, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Postmortem of ticket #{self.ticket_id}"


class PostmortemAction(models.Model):
    """An action item of a postmortem: a follow-up ticket opened through the engine (so it has its own
    workflow, assignee and SLA)."""

    postmortem = models.ForeignKey(Postmortem, on_delete=models.CASCADE, related_name="actions")
    ticket = models.ForeignKey("workflows.Ticket", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["postmortem_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["postmortem", "ticket"], name="postmortemaction_one_per_ticket"),
        ]

    def __str__(self) -> str:
        return f"action ticket #{self.ticket_id}"
