"""`manage.py cabling_report FABRIC [--json] [--problems-only] [--update-status] [--open-tickets]`: planned vs
observed cabling; `--open-tickets` opens a cabling repair ticket per fault (as the system)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cmdb.models import Fabric

from ...cabling import CablingSummary
from ...cabling_service import fabric_cabling_report
from ...cabling_tickets import CablingTicketsRefused, cabling_tickets_open


class Command(BaseCommand):
    help = "Compare a fabric's planned links with what LLDP/ibnetdiscover observed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("fabric", help="fabric name")
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--problems-only", action="store_true")
        parser.add_argument("--update-status", action="store_true", help="set Link.status connected/mismatch")
        parser.add_argument(
            "--open-tickets",
            action="store_true",
            help="open one cabling repair ticket per fault (a crossed pair is one); faults with an "
            "open ticket get none",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        fabric = Fabric.objects.filter(name=options["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric named {options['fabric']!r}")
        findings = fabric_cabling_report(fabric, update_link_status=options["update_status"])
        shown = [f for f in findings if f.is_problem] if options["problems_only"] else findings
        summary = CablingSummary.of(findings)
        tickets = []
        if options["open_tickets"]:
            try:
                opened = cabling_tickets_open(fabric, requester=None, findings=findings)
            except CablingTicketsRefused as exc:
                raise CommandError("; ".join(exc.errors)) from exc
            tickets = [
                {
                    "kind": r.fault.kind.value,
                    "ports": [str(p) for p in r.fault.ports],
                    "title": r.fault.title,
                    "ticket": r.reference or None,
                    "created": r.created,
                    "skipped": r.skipped or None,
                }
                for r in opened
            ]
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "fabric": fabric.name,
                        "summary": summary.counts,
                        "rail_violations": summary.rail_violations,
                        "findings": [
                            {
                                "kind": f.kind.value,
                                "switch": f.switch,
                                "port": f.port,
                                "expected": str(f.expected) if f.expected else None,
                                "found": str(f.found) if f.found else None,
                                "observed": str(f.observed) if f.observed else None,
                                "swap_partner": str(f.swap_partner) if f.swap_partner else None,
                                "rail_violation": f.rail_violation or None,
                                "message": f.message,
                            }
                            for f in shown
                        ],
                        **({"tickets": tickets} if options["open_tickets"] else {}),
                    },
                    indent=2,
                )
            )
            return
        for f in shown:
            self.stdout.write(f.message)
        counts = ", ".join(f"{k} {v}" for k, v in summary.counts.items())
        self.stdout.write(f"{fabric.name}: {counts}, rail violations {summary.rail_violations}")
        for t in tickets:
            verb = "skipped" if t["skipped"] else "opened" if t["created"] else "already open"
            reason = f" ({t['skipped']})" if t["skipped"] else ""
            self.stdout.write(f"{t['ticket'] or '-'} {verb}: {t['title']}{reason}")
