"""Picks the executor from settings (integrations.conf "EXECUTOR", a dotted path, with EXECUTOR_OPTIONS as its
keyword arguments); tests install a fake with `override`."""

from __future__ import annotations

from typing import Any

from ..adapter_slot import AdapterSlot
from ..conf import integrations_setting
from .base import CommandExecutor


def _config() -> tuple[str, dict[str, Any]]:
    return integrations_setting("EXECUTOR"), integrations_setting("EXECUTOR_OPTIONS")


_slot: AdapterSlot[CommandExecutor] = AdapterSlot(_config)
executor_get = _slot.get  # the configured executor (one instance per path and options)
override = _slot.override  # use an executor everywhere inside a block (tests)
