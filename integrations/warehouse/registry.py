"""Which WarehouseClient to use: GPUOPS_WAREHOUSE["CLIENT"] (a dotted path), or a test override."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.utils.module_loading import import_string

from .conf import warehouse_setting
from .ports import WarehouseClient

_override: WarehouseClient | None = None


def warehouse_client() -> WarehouseClient:
    if _override is not None:
        return _override
    return import_string(warehouse_setting("CLIENT"))()


@contextlib.contextmanager
def warehouse_client_override(client: WarehouseClient) -> Iterator[WarehouseClient]:
    global _override
    previous, _override = _override, client
    try:
        yield client
    finally:
        _override = previous
