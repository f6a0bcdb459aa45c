"""Issue an enrollment token: `manage.py enrollment_token_issue NAME --site sh1 --server-model "..."`."""

from __future__ import annotations

import datetime as dt

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from cmdb.models import ServerModel, Site
from gpuops.context import ChangeSource, change_context
from inventory_agents.services.tokens import enrollment_token_issue


class Command(BaseCommand):
    help = "Issue an enrollment token that lets new nodes register themselves (status received) and print it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--site", required=True, help="Site code of the nodes that enroll with it.")
        parser.add_argument("--server-model", required=True, help="Server model name of those nodes.")
        parser.add_argument("--max-uses", type=int, default=None)
        parser.add_argument("--expires-days", type=int, default=30)

    def handle(
        self, *args, name: str, site: str, server_model: str, max_uses: int | None, expires_days: int, **options
    ) -> None:
        site_row = Site.objects.filter(code=site).first()
        model_row = ServerModel.objects.filter(name=server_model).first()
        if site_row is None or model_row is None:
            raise CommandError("Unknown site code or server model name.")
        with change_context(source=ChangeSource.CLI):
            issued = enrollment_token_issue(
                name=name,
                site=site_row,
                server_model=model_row,
                max_uses=max_uses,
                expires_at=timezone.now() + dt.timedelta(days=expires_days) if expires_days else None,
            )
        self.stdout.write(issued.token)
