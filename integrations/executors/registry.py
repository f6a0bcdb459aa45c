"""Picks the executor from settings (GPUOPS_ROLLOUTS["EXECUTOR"], a dotted path, with EXECUTOR_OPTIONS as its
keyword arguments); tests install a fake with `override`."""

from __future__ import annotations

from typing import Any

from ..adapter_slot import AdapterSlot
from .base import CommandExecutor


def _config() -> tuple[str, dict[str, Any]]:
    from workflows.rollouts.conf import rollouts_setting

    return rollouts_setting("EXECUTOR"), rollouts_setting("EXECUTOR_OPTIONS")


_slot: AdapterSlot[CommandExecutor] = AdapterSlot(_config)
executor_get = _slot.get  # the configured executor (one instance per path and options)
override = _slot.override  # use an executor everywhere inside a block (tests)
