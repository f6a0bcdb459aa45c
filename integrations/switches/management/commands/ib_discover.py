"""`manage.py ib_discover FILE [--fabric NAME] [--json] [--dry-run]`: load an `ibnetdiscover -p` report ('-' reads
stdin). A sweep replaces the observations of its own subnet only; --fabric names the CMDB fabric that subnet is."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cmdb.models import Fabric

from ...infiniband import (
    SweepOutsideFabric,
    cmdb_switches,
    ib_links,
    ibnetdiscover_apply,
    parse_ibnetdiscover_ports,
    sweep_fabric_check,
    switches_seen,
)


class Command(BaseCommand):
    help = "Parse `ibnetdiscover -p` output into InfiniBand links; store them unless --dry-run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--fabric",
            metavar="NAME",
            help="the CMDB fabric this subnet is: replace the observations of its switches (also "
            "those the sweep did not see), refuse a report with none of them",
        )
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        fabric = None
        if options["fabric"]:
            fabric = Fabric.objects.filter(name=options["fabric"]).first()
            if fabric is None:
                raise CommandError(f"no fabric named {options['fabric']!r}")
        try:
            text = sys.stdin.read() if options["file"] == "-" else Path(options["file"]).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        records = parse_ibnetdiscover_ports(text)
        links = ib_links(records)
        if options["json"]:
            self.stdout.write(json.dumps([dataclasses.asdict(link) for link in links], indent=2))
        else:
            for link in links:
                self.stdout.write(
                    f"{link.a.description}:{link.a.port} ({link.a.guid}) <-> "
                    f"{link.b.description}:{link.b.port} ({link.b.guid}) {link.width} {link.speed}"
                )
        try:
            if options["dry_run"]:
                if fabric is not None:  # a dry run tells whether the store would be refused
                    sweep_fabric_check(switches_seen(records, cmdb_switches()), fabric)
                return
            run = ibnetdiscover_apply(text, fabric=fabric)
        except SweepOutsideFabric as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"stored {run.neighbors_seen} switch-port observations (poll run {run.pk})")
