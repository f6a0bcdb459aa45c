"""An object page's history (console.history.object_changes) shows exactly the records the change log would
show for that object: the narrowed query must neither leak a record of an object out of scope nor drop one the
user was granted directly."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from guardian.shortcuts import assign_perm

from cmdb import models as m
from console.history import ViewScope, changes_visible, object_changes
from tests.console.objects_world import build_place, scoped_user
from tests.factories.cmdb import UserFactory

pytestmark = pytest.mark.django_db


def _via_change_log(scope: ViewScope, obj) -> list[int]:
    ct = ContentType.objects.get_for_model(type(obj))
    return list(changes_visible(scope).filter(content_type_id=ct.pk, object_id=obj.pk).values_list("pk", flat=True))


def test_object_history_matches_the_change_log_for_scoped_granted_global_and_unscoped_users():
    a, b = build_place("alpha", changes=2), build_place("bravo", changes=2)
    viewer = scoped_user("viewer-a", a.site)
    granted = UserFactory(username="granted", is_staff=False)
    b_ct = ContentType.objects.get_for_model(m.Node)
    b_record = m.ChangeRecord.objects.filter(content_type_id=b_ct.pk, object_id=b.node.pk).first()
    assign_perm("cmdb.view_changerecord", granted, b_record)
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    nobody = UserFactory(username="nobody", is_staff=False)
    seen: dict[tuple[str, str], list[int]] = {}
    for user in (viewer, granted, root, nobody):
        scope = ViewScope.of(user)
        for place in (a, b):
            for obj in (place.node, place.cards[0]):
                got = list(object_changes(scope, obj).values_list("pk", flat=True))
                assert got == _via_change_log(scope, obj), (user.username, obj)
                seen[(user.username, str(obj))] = got
    # the comparison is not vacuous: the scoped viewer sees site A's node history and none of site B's,
    # the directly granted user sees exactly the one record granted, the superuser sees both nodes' history
    assert seen[("viewer-a", str(a.node))] and not seen[("viewer-a", str(b.node))]
    assert seen[("granted", str(b.node))] == [b_record.pk] and not seen[("granted", str(a.node))]
    assert seen[("root", str(a.node))] and seen[("root", str(b.node))]
    assert not any(seen[("nobody", str(obj))] for obj in (a.node, b.node))
