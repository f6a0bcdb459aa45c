"""Make a reference node's reported topology the expected topology of its server model."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from cmdb.models import Node
from cmdb.services.topology import node_topology_current, server_model_expected_topology_set
from gpuops.context import ChangeSource, change_context


class Command(BaseCommand):
    help = (
        "Learn the expected topology of a server model from a reference node (its last reported topology): "
        "nodes of that model whose topology departs from it get a `topology` health signal."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--node", required=True, help="hostname of the reference node")

    def handle(self, *args, node: str, **options) -> None:
        ref = Node.objects.select_related("server_model", "topology").filter(hostname=node).first()
        if ref is None:
            raise CommandError(f"no node {node!r}")
        if ref.server_model is None:
            raise CommandError(f"{node} has no server model to learn for")
        topology = node_topology_current(ref)
        if topology is None or not topology.links:
            raise CommandError(f"{node} has reported no topology yet (or one without links)")
        with transaction.atomic(), change_context(source=ChangeSource.CLI):
            server_model_expected_topology_set(
                ref.server_model, {"devices": topology.devices, "links": topology.links, "sources": topology.sources}
            )
        self.stdout.write(
            f"{ref.server_model}: expected topology learned from {node} "
            f"({len(topology.devices)} devices, {len(topology.links)} links)."
        )
