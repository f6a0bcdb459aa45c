"""`python manage.py alert_source_add NAME [--kind generic]`: a new alert source; its token is the last line."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ...models import SourceKind
from ...services.sources import alert_source_add


class Command(BaseCommand):
    help = "Add a monitor allowed to post alerts (Alertmanager by default) and print its bearer token (once)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--kind", choices=SourceKind.values, default=SourceKind.ALERTMANAGER)
        parser.add_argument("--description", default="")

    def handle(self, *args, **options) -> None:
        try:
            issued = alert_source_add(name=options["name"], kind=options["kind"], description=options["description"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            f"Alert source {issued.source.name} ({issued.source.kind}) added. Its token (shown once, only a hash "
            "is kept) goes into Alertmanager's http_config.authorization.credentials:"
        )
        self.stdout.write(issued.token)
