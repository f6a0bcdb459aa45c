"""Create the workflow groups; optionally demo users and repair tickets for the failed cards already known."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from cmdb.hooks import AcceleratorFailure
from cmdb.models import Accelerator, HealthEvent, Site
from cmdb.permissions import grant_scope
from gpuops.context import ChangeSource, change_context
from gpuops.private_files import private_file_write
from workflows.services.bootstrap import groups_bootstrap
from workflows.services.demo_learning import demo_incident_load
from workflows.services.health import on_accelerator_failed

DEMO_USERS = [
    ("lead", "ops-leads"),
    ("tech", "dc-technicians"),
    ("approver1", "change-approvers"),
    ("approver2", "change-approvers"),
]
DEMO_APPROVER = "approver"


class Command(BaseCommand):
    help = (
        "Create the ops-leads, dc-technicians and change-approvers groups with their permissions. "
        "--demo-users makes one user per group; --open-repairs opens a repair for every failed card that has "
        "an open health event and no open ticket (as the health hook would have). --demo-approver makes the "
        "'approver' user of script/server (change-approvers, read-only on every site; password in "
        "var/approver-password, printed only when it is made) and prints how to log in."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--demo-users", action="store_true")
        parser.add_argument("--password", default="", help="Password of the demo users (required with them).")
        parser.add_argument("--open-repairs", action="store_true")
        parser.add_argument("--demo-approver", action="store_true")
        parser.add_argument(
            "--demo-learning",
            action="store_true",
            help="A closed demo incident with its postmortem (after seed_demo --scale small).",
        )

    def handle(
        self,
        *args,
        demo_users: bool,
        password: str,
        open_repairs: bool,
        demo_approver: bool = False,
        demo_learning: bool = False,
        **options,
    ) -> None:
        groups = groups_bootstrap()
        if demo_learning and (incident := demo_incident_load()) is not None:
            self.stdout.write(f"demo incident {incident.reference} closed with its postmortem")
        if options.get("verbosity", 1) > 0:
            self.stdout.write(f"groups: {', '.join(sorted(groups))}")
        if demo_approver:
            self._demo_approver(groups["change-approvers"])
        if demo_users:
            if not password:
                raise CommandError("--demo-users needs --password")
            user_model = get_user_model()
            for username, group in DEMO_USERS:
                user, created = user_model.objects.get_or_create(
                    username=username, defaults={"email": f"{username}@example.com", "is_staff": True}
                )
                if created:
                    user.set_password(password)
                    user.save()
                user.groups.add(groups[group])
                if group == "dc-technicians":  # the group is the role; the demo technician works at every site
                    for site in Site.objects.all():
                        grant_scope(scope_obj=site, perms=["change_scope"], users=[user])
                self.stdout.write(f"user {username} ({group}){' created' if created else ''}")
        if open_repairs:
            opened = 0
            with change_context(source=ChangeSource.SYSTEM):
                events = HealthEvent.objects.filter(
                    resolved_at__isnull=True, accelerator__health="failed", accelerator__lifecycle="installed"
                ).select_related("accelerator")
                for event in events:
                    card: Accelerator = event.accelerator
                    on_accelerator_failed(
                        AcceleratorFailure(
                            accelerator_id=card.pk,
                            node_id=card.node_id,
                            health_event_id=event.pk,
                            kind=event.kind,
                            code=event.code,
                            message=event.message,
                            is_repeat=False,
                        )
                    )
                    opened += 1
            self.stdout.write(f"repair tickets opened or updated: {opened}")

    def _demo_approver(self, group) -> None:
        """The demo's second person: `admin` opens a change ticket, `approver` approves it (the engine refuses
        a requester approving their own ticket). Idempotent; the password is generated once into var/."""
        user_model = get_user_model()
        password_file = settings.VAR_DIR / "approver-password"
        user = user_model.objects.filter(username=DEMO_APPROVER).first()
        created_with = ""
        if user is None:
            given = os.environ.get("GPUOPS_APPROVER_PASSWORD", "")
            password = given or secrets.token_urlsafe(12)
            user = user_model.objects.create_user(
                username=DEMO_APPROVER, email=f"{DEMO_APPROVER}@localhost", password=password
            )
            if not given:
                # Shown this once (like ensure_admin's), never at the next start; the file keeps it.
                private_file_write(password_file, password)
                created_with = f" (shown this once: {password})"
        user.groups.add(group)
        # Read-only everywhere, so the approver sees the nodes and cards a change touches.
        for site in Site.objects.all():
            grant_scope(scope_obj=site, perms=["view_scope"], users=[user])
        where = (
            f"the password in {password_file}{created_with}" if password_file.exists() else "the password set elsewhere"
        )
        self.stdout.write(
            f"Log in as {DEMO_APPROVER!r} with {where} - to approve change tickets (a driver rollout needs one "
            "approval, and never its requester's)."
        )
