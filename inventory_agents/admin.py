"""Admin for agent tokens, enrollment tokens, stored reports and ingest state.

Tokens are never typed in: the add form picks the node (or the site / server model for an enrollment token),
the service generates the secret and the admin shows it once in a message. Reports are read-only, with a link
to the change records they caused (their id is the correlation id).
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from cmdb import permissions
from cmdb.admin_base import ScopedAdmin
from gpuops.context import ChangeSource, change_context

from .models import AgentState, AgentToken, EnrollmentToken, Report
from .services.tokens import agent_token_issue, agent_token_revoke, enrollment_token_issue


class _TokenShownOnce:
    def _show(self, request, what: str, token: str) -> None:
        messages.warning(
            request,
            format_html(
                "{}: <code>{}</code> - copy it now, it is not stored and will not be shown again.", what, token
            ),
        )


class AgentTokenForm(forms.ModelForm):
    class Meta:
        model = AgentToken
        fields = ["node", "description"]

    revoke_others = forms.BooleanField(
        required=False, initial=True, help_text="Revoke the node's other tokens (re-keying its agent)."
    )


@admin.register(AgentToken)
class AgentTokenAdmin(_TokenShownOnce, ScopedAdmin):
    list_display = ("prefix", "node", "description", "created_at", "last_used_at", "revoked_at")
    list_filter = ("node__site", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("node__hostname", "prefix", "description")
    list_select_related = ("node",)
    raw_id_fields = ("node",)
    actions = ["revoke", "rotate"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = AgentTokenForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        if obj is not None:
            return ("node", "prefix", "created_by", "created_at", "last_used_at", "revoked_at")
        return ()

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("node", "description", "revoke_others")
        return ("node", "prefix", "description", "created_by", "created_at", "last_used_at", "revoked_at")

    def save_model(self, request, obj, form, change) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        if not permissions.can(request.user, "change", obj.node):
            raise PermissionDenied("You may not issue tokens for this node.")
        issued = agent_token_issue(
            node=obj.node,
            description=obj.description,
            actor=request.user,
            revoke_others=form.cleaned_data.get("revoke_others", True),
        )
        obj.pk = issued.row.pk
        obj._state.adding = False
        self._show(request, f"Agent token for {obj.node}", issued.token)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset) -> None:
        with change_context(source=ChangeSource.ADMIN, actor=request.user), transaction.atomic():
            for token in queryset:
                agent_token_revoke(token=token)
        self.message_user(request, f"{queryset.count()} token(s) revoked.")

    @admin.action(description="Issue a new token for the selected tokens' nodes (revokes the old ones)")
    def rotate(self, request, queryset) -> None:
        with change_context(source=ChangeSource.ADMIN, actor=request.user):
            for node in {t.node for t in queryset.select_related("node")}:
                issued = agent_token_issue(node=node, description="rotated in admin", actor=request.user)
                self._show(request, f"Agent token for {node}", issued.token)


class EnrollmentTokenForm(forms.ModelForm):
    class Meta:
        model = EnrollmentToken
        fields = ["name", "site", "server_model", "max_uses", "expires_at"]


@admin.register(EnrollmentToken)
class EnrollmentTokenAdmin(_TokenShownOnce, admin.ModelAdmin):
    list_display = ("name", "prefix", "site", "server_model", "uses", "max_uses", "expires_at", "revoked_at")
    search_fields = ("name", "prefix")
    actions = ["revoke"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["form"] = EnrollmentTokenForm
        return super().get_form(request, obj, change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return ("prefix", "uses", "created_by", "revoked_at") if obj is not None else ()

    def get_fields(self, request, obj=None):
        base = ["name", "site", "server_model", "max_uses", "expires_at"]
        return base if obj is None else [*base, "prefix", "uses", "created_by", "revoked_at"]

    def save_model(self, request, obj, form, change) -> None:
        with change_context(source=ChangeSource.ADMIN, actor=request.user):
            if change:
                super().save_model(request, obj, form, change)
                return
            issued = enrollment_token_issue(
                name=obj.name,
                site=obj.site,
                server_model=obj.server_model,
                max_uses=obj.max_uses,
                expires_at=obj.expires_at,
                actor=request.user,
            )
        obj.pk = issued.row.pk
        obj._state.adding = False
        self._show(request, f"Enrollment token {obj.name}", issued.token)

    @admin.action(description="Revoke selected enrollment tokens")
    def revoke(self, request, queryset) -> None:
        from django.utils import timezone

        with change_context(source=ChangeSource.ADMIN, actor=request.user):
            for row in queryset.filter(revoked_at__isnull=True):
                row.revoked_at = timezone.now()
                row.save(update_fields=["revoked_at", "updated_at", "version"])


@admin.register(Report)
class ReportAdmin(ScopedAdmin):
    history_inline = False
    list_display = ("received_at", "node", "status", "agent_version", "size_bytes", "duration_ms", "effects")
    list_filter = ("status", "node__site", "agent_version")
    search_fields = ("node__hostname", "=id", "report_hash")
    list_select_related = ("node",)
    date_hierarchy = "received_at"
    fields = (
        "id",
        "node",
        "received_at",
        "collected_at",
        "status",
        "schema",
        "agent_version",
        "report_hash",
        "size_bytes",
        "duration_ms",
        "changes_link",
        "summary_pretty",
        "errors_pretty",
        "payload_pretty",
    )
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="effects")
    def effects(self, obj: Report) -> str:
        summary = {k: v for k, v in (obj.summary or {}).items() if v}
        return ", ".join(f"{k}={v}" for k, v in sorted(summary.items())) or "-"

    @admin.display(description="change records")
    def changes_link(self, obj: Report) -> str:
        url = reverse("admin:cmdb_changerecord_changelist") + "?" + urlencode({"q": str(obj.id)})
        return format_html('<a href="{}">change records of this report</a>', url)

    def _pretty(self, value) -> str:
        return format_html("<pre>{}</pre>", json.dumps(value, indent=2, sort_keys=True, default=str))

    @admin.display(description="summary")
    def summary_pretty(self, obj: Report) -> str:
        return self._pretty(obj.summary)

    @admin.display(description="errors")
    def errors_pretty(self, obj: Report) -> str:
        return self._pretty(obj.errors)

    @admin.display(description="payload")
    def payload_pretty(self, obj: Report) -> str:
        return self._pretty(obj.payload)


@admin.register(AgentState)
class AgentStateAdmin(ScopedAdmin):
    history_inline = False
    list_display = ("node", "agent_version", "last_full_at", "reports_applied", "last_report")
    search_fields = ("node__hostname", "agent_version")
    list_select_related = ("node",)
    readonly_fields = (
        "node",
        "last_hash",
        "last_full_at",
        "last_report",
        "agent_version",
        "reports_applied",
        "signal_fingerprints",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
