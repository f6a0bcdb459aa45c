"""Parse a saved switch CLI output the way the SSH adapter parses live output.

`manage.py switch_parse --platform cisco_nxos --command "show lldp neighbors detail" FILE --json`
LLDP commands print the normalised neighbour list; other commands print the TextFSM rows.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from integrations.exceptions import IntegrationError

from ...cli import parse_saved


class Command(BaseCommand):
    help = "Parse saved CLI output with the ntc-templates TextFSM templates (LLDP: normalised neighbours)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="saved output ('-' for stdin)")
        parser.add_argument("--platform", required=True, help="netmiko device type (or ntc-templates platform)")
        parser.add_argument("--command", required=True, help='the command that made the output: "show version"')
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"]
        try:
            raw = sys.stdin.read() if path == "-" else Path(path).read_text()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        try:
            result = parse_saved(options["platform"], options["command"], raw)
        except IntegrationError as exc:
            raise CommandError(str(exc)) from exc
        data = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else r for r in result]
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        for row in data:
            self.stdout.write("  ".join(f"{k}={v}" for k, v in row.items() if v))
