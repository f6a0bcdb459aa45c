"""Picks the OS installer from settings (GPUOPS_ROLLOUTS["OS_INSTALLER"] + OS_INSTALLER_OPTIONS); tests install a
fake with `override`. One instance per process (the fake keeps its jobs in it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.utils.module_loading import import_string

from .base import OsInstaller

_override: OsInstaller | None = None
_cache: dict[tuple[str, str], OsInstaller] = {}


def _config() -> tuple[str, dict[str, Any]]:
    from workflows.rollouts.conf import rollouts_setting

    return rollouts_setting("OS_INSTALLER"), rollouts_setting("OS_INSTALLER_OPTIONS")


def os_installer_get() -> OsInstaller:
    if _override is not None:
        return _override
    path, options = _config()
    key = (path, repr(sorted(options.items())))
    if key not in _cache:
        _cache[key] = import_string(path)(**options)
    return _cache[key]


@contextlib.contextmanager
def override(installer: OsInstaller) -> Iterator[OsInstaller]:
    global _override
    previous, _override = _override, installer
    try:
        yield installer
    finally:
        _override = previous


__all__ = ["os_installer_get", "override"]
