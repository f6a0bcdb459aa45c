"""Picks the executor from settings (GPUOPS_ROLLOUTS["EXECUTOR"], a dotted path, with EXECUTOR_OPTIONS as its
keyword arguments); tests install a fake with `override`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.utils.module_loading import import_string

from .base import CommandExecutor

_override: CommandExecutor | None = None
_cache: dict[tuple[str, str], CommandExecutor] = {}


def _config() -> tuple[str, dict[str, Any]]:
    from workflows.rollouts.conf import rollouts_setting

    return rollouts_setting("EXECUTOR"), rollouts_setting("EXECUTOR_OPTIONS")


def executor_get() -> CommandExecutor:
    """The configured executor (one instance per path and options)."""
    if _override is not None:
        return _override
    path, options = _config()
    key = (path, repr(sorted(options.items())))
    if key not in _cache:
        _cache[key] = import_string(path)(**options)
    return _cache[key]


@contextlib.contextmanager
def override(executor: CommandExecutor) -> Iterator[CommandExecutor]:
    """Use `executor` everywhere inside the block (tests)."""
    global _override
    previous, _override = _override, executor
    try:
        yield executor
    finally:
        _override = previous


__all__ = ["executor_get", "override"]
