"""`manage.py switches_demo_observe [--fabric sh1-ib-compute]`: demo LLDP observations with deliberate faults."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cmdb.models import Fabric

from ...demo import demo_observe, demo_oob_switch


class Command(BaseCommand):
    help = "Write LLDP observations for a demo fabric as if every leaf had been polled (a few cables wrong)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fabric", default="sh1-ib-compute", help="fabric name (default sh1-ib-compute)")

    def handle(self, *args: Any, **options: Any) -> None:
        fabric = Fabric.objects.filter(name=options["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric named {options['fabric']!r} (run seed_demo first)")
        result = demo_observe(fabric)
        for fault in result.faults:
            self.stdout.write(f"fault: {fault}")
        self.stdout.write(f"{fabric.name}: {result.observations} observations on {result.switches} switches")
        oob = demo_oob_switch()
        if oob is not None:
            self.stdout.write(f"{oob.name} (mgmt {oob.mgmt_ip}) can be polled through snmpsim: see docs/switches.md")
