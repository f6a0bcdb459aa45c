"""`manage.py ib_discover FILE [--json] [--dry-run]`: load an `ibnetdiscover -p` report ('-' reads stdin)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ...infiniband import ib_links, ibnetdiscover_apply, parse_ibnetdiscover_ports


class Command(BaseCommand):
    help = "Parse `ibnetdiscover -p` output into InfiniBand links; store them unless --dry-run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            text = sys.stdin.read() if options["file"] == "-" else Path(options["file"]).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        links = ib_links(parse_ibnetdiscover_ports(text))
        if options["json"]:
            self.stdout.write(json.dumps([dataclasses.asdict(link) for link in links], indent=2))
        else:
            for link in links:
                self.stdout.write(f"{link.a.description}:{link.a.port} ({link.a.guid}) <-> "
                                  f"{link.b.description}:{link.b.port} ({link.b.guid}) {link.width} {link.speed}")
        if not options["dry_run"]:
            run = ibnetdiscover_apply(text)
            self.stderr.write(f"stored {run.neighbors_seen} switch-port observations (poll run {run.pk})")
