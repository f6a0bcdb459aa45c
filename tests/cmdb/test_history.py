"""Every create, update and delete is recorded with actor, source, correlation id and before/after."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType

from cmdb import models as m
from cmdb.services.accelerators import accelerator_history, accelerator_place
from cmdb.services.changelog import changes_for
from cmdb.services.nodes import node_cordon, nodes_set_status
from gpuops.context import ChangeSource, change_context
from tests.factories.cmdb import AcceleratorFactory, NodeFactory, StockLocationFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_create_update_delete_are_recorded_with_context():
    user = UserFactory(username="alice")
    with change_context(actor=user, source=ChangeSource.CLI, correlation_id="corr-1"):
        node = NodeFactory(hostname="gpu-001", status="racked")
        node.status = "active"
        node.save()
        node_id = node.pk
        node.accelerators.all().delete()
        node.delete()
    records = list(
        m.ChangeRecord.objects.filter(
            content_type=ContentType.objects.get_for_model(m.Node), object_id=node_id
        ).order_by("id")
    )
    assert [r.action for r in records] == ["create", "update", "delete"]
    assert all(r.actor == user and r.source == "cli" and r.correlation_id == "corr-1" for r in records)
    assert records[0].changes["hostname"] == [None, "gpu-001"]
    assert records[1].changes == {"status": ["racked", "active"]}
    assert records[2].changes["hostname"] == ["gpu-001", None]


def test_saving_without_a_change_records_nothing_and_keeps_the_version():
    node = NodeFactory()
    node = m.Node.objects.get(pk=node.pk)
    before = m.ChangeRecord.objects.count()
    node.save()
    assert m.ChangeRecord.objects.count() == before


def test_version_grows_on_each_saved_change():
    node = NodeFactory()
    assert node.version == 1
    node.status = "draining"
    node.save()
    assert m.Node.objects.get(pk=node.pk).version == 2


def test_bulk_status_change_writes_records_in_bulk(django_assert_max_num_queries):
    nodes = NodeFactory.create_batch(30)
    # + the hold check (one query per kind of holder, whatever the number of nodes).
    with change_context(source=ChangeSource.ADMIN, correlation_id="bulk-1"), django_assert_max_num_queries(12):
        changed = nodes_set_status(nodes=nodes, status="draining", reason="maintenance window")
    assert changed == 30
    records = m.ChangeRecord.objects.filter(correlation_id="bulk-1")
    assert records.count() == 30
    assert all(r.changes == {"status": ["active", "draining"]} and r.reason == "maintenance window" for r in records)
    assert set(m.Node.objects.values_list("version", flat=True)) == {2}


def test_bulk_query_count_does_not_grow_with_rows(django_assert_max_num_queries):
    small, large = NodeFactory.create_batch(2), NodeFactory.create_batch(200)
    with django_assert_max_num_queries(8):
        nodes_set_status(nodes=small, status="maintenance")
    with django_assert_max_num_queries(8):
        nodes_set_status(nodes=large, status="maintenance")


def test_cordon_is_recorded_and_needs_a_reason():
    node = NodeFactory()
    with pytest.raises(Exception, match="reason"):
        node_cordon(node=node, reason="  ")
    node_cordon(node=node, reason="XID 79 on slot 3")
    record = changes_for(node).first()
    assert record.changes["is_cordoned"] == [False, True]


def test_card_moved_between_nodes_keeps_its_whole_story():
    card = AcceleratorFactory(slot_index=0)
    first_node = card.node
    spare_shelf = StockLocationFactory(site=first_node.site)
    other = NodeFactory(site=first_node.site)
    accelerator_place(accelerator=card, kind="stock", stock_location=spare_shelf, note="pulled")
    accelerator_place(accelerator=card, kind="node", node=other, slot_index=5, note="reinstalled")
    history = list(accelerator_history(card))
    # The factory created the card without a placement; the two moves are both there, in order.
    assert [(p.kind, p.node_hostname, p.slot_index) for p in history] == [
        ("stock", "", None),
        ("node", other.hostname, 5),
    ]
    assert history[0].ended_at is not None and history[1].ended_at is None
    card.refresh_from_db()
    assert (card.node, card.slot_index, card.lifecycle, card.stock_location) == (other, 5, "installed", None)


def test_placing_into_a_taken_slot_is_refused():
    card = AcceleratorFactory(slot_index=1)
    other = AcceleratorFactory(slot_index=2)
    with pytest.raises(Exception, match="holds"):
        accelerator_place(accelerator=other, kind="node", node=card.node, slot_index=1)


def test_software_version_fields_are_tracked_not_bumped():
    """DriverPackage and InstalledSoftware use `version` for the software version: saving them records the
    version change and does not treat it as a row counter."""
    from tests.factories.cmdb import DriverPackageFactory

    node = NodeFactory()
    installed = m.InstalledSoftware.objects.create(node=node, component="nvidia-driver", version="535.183.01")
    installed = m.InstalledSoftware.objects.get(pk=installed.pk)
    installed.version = "550.127.05"
    installed.save()
    record = changes_for(installed).first()
    assert record.changes == {"version": ["535.183.01", "550.127.05"]}
    package = DriverPackageFactory(version="570.1")
    package.requires_reboot = True
    package.save()
    assert m.DriverPackage.objects.get(pk=package.pk).version == "570.1"


@pytest.mark.parametrize("count", [3, 1200])
def test_a_large_batch_of_records_is_written_whole_whatever_the_path(count):
    """Small batches go through INSERT, large ones through COPY on PostgreSQL: the same rows either way
    (actor, source, correlation, reason, the JSON of the changes and the transaction id)."""
    from django.db import connection

    from cmdb.services.changelog import COPY_FROM, records_for_bulk, records_write

    actor = UserFactory(username="importer")
    nodes = [m.Node(hostname=f"copy-{i:05d}", serial=f"C{i:07d}", status="planned") for i in range(count)]
    with change_context(source=ChangeSource.IMPORT, actor=actor, correlation_id="copy-batch"):
        records = records_for_bulk(created=nodes, reason='import "q4" \\ batch\ttab')
        for node, record in zip(nodes, records, strict=True):
            record.object_id = 10_000 + int(node.hostname[5:])
        assert records_write(records) == count
    rows = m.ChangeRecord.objects.filter(correlation_id="copy-batch").order_by("object_id")
    assert rows.count() == count
    first = rows.first()
    assert first.actor_id == actor.pk and first.actor_repr == "importer" and first.source == "import"
    assert first.reason == 'import "q4" \\ batch\ttab' and first.action == "create"
    assert first.changes["hostname"] == [None, "copy-00000"] and first.object_repr == "copy-00000"
    assert first.txid is not None and first.content_type == ContentType.objects.get_for_model(m.Node)
    if connection.vendor == "postgresql" and count >= COPY_FROM:
        assert len({r.txid for r in rows}) == 1  # one transaction, as with INSERT
