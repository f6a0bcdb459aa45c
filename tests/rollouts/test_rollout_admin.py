"""The rollouts admin: changelists render; a stale node lock can be released."""

from __future__ import annotations

from django.utils import timezone

from cmdb import models as m
from tests.factories.cmdb import NodeFactory, UserFactory
from workflows.rollouts.models import NodeLock


def test_changelists_render_and_release_action(client, db):
    admin = UserFactory(username="root", is_superuser=True)
    client.force_login(admin)
    node = NodeFactory(hostname="n-lock")
    lock = NodeLock.objects.create(node=node, owner_key="ticket:1", owner_label="REP-1", acquired_at=timezone.now())
    for path in ("/admin/rollouts/nodelock/", "/admin/rollouts/rollout/", "/admin/rollouts/provisioningrun/"):
        assert client.get(path).status_code == 200, path
    response = client.post("/admin/rollouts/nodelock/", {"action": "release_locks", "_selected_action": [lock.pk]})
    assert response.status_code == 302
    lock.refresh_from_db()
    assert lock.released_at is not None
    assert m.Node.objects.filter(pk=node.pk).exists()
