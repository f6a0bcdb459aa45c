"""Picks the scheduler adapter for a cluster kind from settings (integrations.conf "SCHEDULERS"); tests install a
fake with `override`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.utils.module_loading import import_string

from ..conf import integrations_setting
from .base import Scheduler

_override: Scheduler | None = None
_cache: dict[tuple[str, str], Scheduler] = {}


def _config() -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    return integrations_setting("SCHEDULERS"), integrations_setting("SCHEDULER_OPTIONS")


NOOP_PATH = "integrations.schedulers.noop.NoopScheduler"
# Schedulers with no state worth syncing back (they report every node drained).
DEMO_PATH = "integrations.schedulers.demo.DemoScheduler"


def _path_for(cluster_kind: str) -> str:
    paths, _ = _config()
    return paths.get(cluster_kind) or paths.get("default") or NOOP_PATH


def scheduler_for(cluster_kind: str) -> Scheduler:
    """The adapter for "slurm", "kubernetes" (or any kind named in settings), else the "default" one."""
    if _override is not None:
        return _override
    path = _path_for(cluster_kind)
    key = (cluster_kind, path)
    if key not in _cache:
        _cache[key] = import_string(path)(**integrations_setting("SCHEDULER_OPTIONS").get(path, {}))
    return _cache[key]


def scheduler_configured(cluster_kind: str) -> bool:
    """Whether clusters of this kind have a real adapter (not the no-op default), so their state can be read."""
    return _override is not None or _path_for(cluster_kind) not in (NOOP_PATH, DEMO_PATH)


@contextlib.contextmanager
def override(scheduler: Scheduler) -> Iterator[Scheduler]:
    """Use `scheduler` for every cluster kind inside the block (tests)."""
    global _override
    previous, _override = _override, scheduler
    try:
        yield scheduler
    finally:
        _override = previous


def cache_clear() -> None:
    _cache.clear()


__all__ = ["DEMO_PATH", "NOOP_PATH", "cache_clear", "override", "scheduler_configured", "scheduler_for"]
