"""One configured adapter instance per (dotted path, options), with a test override: the pattern every
settings-selected adapter (executor, OS installer) shares."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from django.utils.module_loading import import_string

T = TypeVar("T")


class AdapterSlot(Generic[T]):
    """`config()` returns (dotted path, keyword options); `get()` builds and caches the adapter;
    `override(obj)` replaces it inside a block (tests)."""

    def __init__(self, config: Callable[[], tuple[str, dict[str, Any]]]) -> None:
        self._config = config
        self._override: T | None = None
        self._cache: dict[tuple[str, str], T] = {}

    def get(self) -> T:
        if self._override is not None:
            return self._override
        path, options = self._config()
        key = (path, repr(sorted(options.items())))
        if key not in self._cache:
            self._cache[key] = import_string(path)(**options)
        return self._cache[key]

    @contextlib.contextmanager
    def override(self, adapter: T) -> Iterator[T]:
        previous, self._override = self._override, adapter
        try:
            yield adapter
        finally:
            self._override = previous
