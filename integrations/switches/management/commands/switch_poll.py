"""Poll one switch over SNMP: `manage.py switch_poll HOST[:PORT] --community C [--dry-run] [--json]`.

--dry-run prints what the switch reports and writes nothing (no CMDB record needed). Without it, the
Switch is found by mgmt_ip and its ports, facts and LLDP observations are written (with change records).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cmdb.models import Switch
from gpuops.context import ChangeSource, change_context
from integrations.exceptions import IntegrationError
from integrations.ports import SnmpCredential, SnmpTarget

from ...credentials import snmp_credential_resolve
from ...services import snmp_poller_get, switch_poll
from ...snmp_decode import snapshot_as_json


def parse_host_port(value: str, default_port: int = 161) -> tuple[str, int]:
    """HOST, HOST:PORT, [v6]:PORT or a bare IPv6 address."""
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest.removeprefix(":")
        return host, int(port) if port else default_port
    if value.count(":") == 1:
        host, port = value.split(":")
        if not port.isdigit():
            raise CommandError(f"bad port in {value!r}")
        return host, int(port)
    return value, default_port


class Command(BaseCommand):
    help = "Poll a switch over SNMP (system, ENTITY, IF-MIB, LLDP) and print or store the result."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("target", help="HOST[:PORT] (port 161 by default)")
        cred = parser.add_mutually_exclusive_group()
        cred.add_argument("--community", help="SNMPv2c community")
        cred.add_argument("--v3-user", help="SNMPv3 user (keys from --auth-key/--priv-key)")
        cred.add_argument("--credential-ref", help="a credential reference (see integrations/switches/credentials.py)")
        parser.add_argument("--auth-key", default="")
        parser.add_argument("--auth-protocol", default="sha")
        parser.add_argument("--priv-key", default="")
        parser.add_argument("--priv-protocol", default="aes")
        parser.add_argument("--context", default="", help="SNMPv3 context name")
        parser.add_argument("--timeout", type=float, default=2.0, help="seconds per request (default 2)")
        parser.add_argument("--retries", type=int, default=1)
        parser.add_argument("--dry-run", action="store_true", help="print only; needs no CMDB record")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def _credential(self, options: dict[str, Any], switch: Switch | None) -> SnmpCredential:
        if options["community"]:
            return SnmpCredential(version="2c", community=options["community"])
        if options["v3_user"]:
            return SnmpCredential(
                version="3",
                user=options["v3_user"],
                auth_key=options["auth_key"],
                auth_protocol=options["auth_protocol"],
                priv_key=options["priv_key"],
                priv_protocol=options["priv_protocol"],
                context=options["context"],
            )
        ref = options["credential_ref"] or (switch.snmp_credential_ref if switch else "")
        if not ref:
            raise CommandError(
                "give --community, --v3-user or --credential-ref (or set the switch's snmp_credential_ref)"
            )
        return snmp_credential_resolve(ref)

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_host_port(options["target"])
        switch = None
        if not options["dry_run"]:
            switch = Switch.objects.filter(mgmt_ip=host).first()
            if switch is None:
                raise CommandError(f"no switch with mgmt_ip {host} in the CMDB (use --dry-run to poll without one)")
        try:
            target = SnmpTarget(
                host=host,
                port=port,
                credential=self._credential(options, switch),
                timeout_s=options["timeout"],
                retries=options["retries"],
            )
            if options["dry_run"]:
                snapshot = snmp_poller_get().poll(target)
                self._print(snapshot_as_json(snapshot), options["json"])
                return
            with change_context(source=ChangeSource.CLI):
                run = switch_poll(switch, target=target)
        except IntegrationError as exc:
            raise CommandError(str(exc)) from exc
        summary = {
            "switch": switch.name,
            "poll_run": run.pk,
            "status": run.status,
            "ports_seen": run.ports_seen,
            "ports_created": run.ports_created,
            "ports_updated": run.ports_updated,
            "lldp_neighbors": run.neighbors_seen,
        }
        self._print(summary, options["json"])

    def _print(self, data: dict[str, Any], as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(data, indent=2))
            return
        if "system" not in data:
            self.stdout.write(" ".join(f"{k}={v}" for k, v in data.items()))
            return
        system = data["system"]
        self.stdout.write(f"{system['name'] or '?'}  model={system['model']}  serial={system['serial']}")
        self.stdout.write(f"  {system['description'].splitlines()[0] if system['description'] else ''}")
        self.stdout.write(f"  {len(data['ports'])} interfaces, {len(data['lldp_neighbors'])} LLDP neighbours")
        for nb in data["lldp_neighbors"]:
            self.stdout.write(
                f"  {nb['local_port']:<24} -> {nb['remote_system'] or nb['remote_chassis_id']} {nb['remote_port']}"
            )
