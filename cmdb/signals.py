"""Signal receivers for the change history.

Why signals here, when the house style keeps business logic out of them: the change history is an audit
concern that must hold for every write path (admin, API, workflows, shell). Signals are the one place every
single-row save passes through. They do no business logic: bump the version, write the record.
"""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

from .models.base import TrackedModel
from .services import changelog


def _pre_save(sender, instance: TrackedModel, raw: bool = False, update_fields=None, **kwargs) -> None:
    if raw or instance._state.adding or not sender.has_row_version():
        return
    instance.version = (instance.version or 0) + 1


def _post_save(sender, instance: TrackedModel, created: bool, raw: bool = False, **kwargs) -> None:
    if raw:  # loaddata
        return
    changelog.record_save(instance, created=created)


def _pre_delete(sender, instance: TrackedModel, **kwargs) -> None:
    # The collector sends every pre_delete before it deletes anything, and may delete a link's NIC port before
    # the link's post_delete runs: take the record's repr ("node:ib0 <-> leaf:1/1") while its parts still exist.
    changelog.remember_repr(instance)


def _post_delete(sender, instance: TrackedModel, **kwargs) -> None:
    changelog.record_delete(instance)


def connect(models: list[type[TrackedModel]]) -> None:
    for model in models:
        pre_save.connect(_pre_save, sender=model, dispatch_uid=f"gpuops_version_{model._meta.label}")
        post_save.connect(_post_save, sender=model, dispatch_uid=f"gpuops_changelog_save_{model._meta.label}")
        pre_delete.connect(_pre_delete, sender=model, dispatch_uid=f"gpuops_changelog_predel_{model._meta.label}")
        post_delete.connect(_post_delete, sender=model, dispatch_uid=f"gpuops_changelog_del_{model._meta.label}")


def _sync_rack_units(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    """RackUnit rows are a derived index of a device's rack position; keep them in step with the device."""
    if raw:
        return
    from .services.racks import rack_occupancy_set

    u_height = instance.server_model.u_height if hasattr(instance, "server_model_id") else instance.u_height
    rack_occupancy_set(device=instance, u_height=u_height)


def connect_rack_units() -> None:
    from .models import Node, Switch

    for model in (Node, Switch):
        post_save.connect(_sync_rack_units, sender=model, dispatch_uid=f"gpuops_rackunits_{model._meta.label}")
