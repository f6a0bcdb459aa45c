"""Issue an agent token for a node and print it (once): `manage.py agent_token_issue HOSTNAME`."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from cmdb.models import Node
from gpuops.context import ChangeSource, change_context
from inventory_agents.services.tokens import agent_token_issue


class Command(BaseCommand):
    help = "Issue an agent token for HOSTNAME (revokes its other tokens unless --keep-others) and print it."

    def add_arguments(self, parser) -> None:
        parser.add_argument("hostname")
        parser.add_argument("--description", default="issued on the command line")
        parser.add_argument("--keep-others", action="store_true", help="Do not revoke the node's other tokens.")

    def handle(self, *args, hostname: str, description: str, keep_others: bool, **options) -> None:
        node = Node.objects.filter(hostname=hostname.strip().lower()).first()
        if node is None:
            raise CommandError(f"No node named {hostname!r}.")
        with change_context(source=ChangeSource.CLI):
            issued = agent_token_issue(node=node, description=description, revoke_others=not keep_others)
        if options.get("verbosity", 1) > 1:
            self.stderr.write(f"token {issued.row.prefix}... for {node.hostname}; it is not stored in clear.")
        # The token alone on stdout, so `TOKEN=$(manage.py agent_token_issue host)` works.
        self.stdout.write(issued.token)
