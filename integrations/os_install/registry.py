"""Picks the OS installer from settings (integrations.conf "OS_INSTALLER" + OS_INSTALLER_OPTIONS); tests install a
fake with `override`. One instance per process (the fake keeps its jobs in it)."""

from __future__ import annotations

from typing import Any

from ..adapter_slot import AdapterSlot
from ..conf import integrations_setting
from .base import OsInstaller


def _config() -> tuple[str, dict[str, Any]]:
    return integrations_setting("OS_INSTALLER"), integrations_setting("OS_INSTALLER_OPTIONS")


_slot: AdapterSlot[OsInstaller] = AdapterSlot(_config)
os_installer_get = _slot.get
override = _slot.override
