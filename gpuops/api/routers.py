"""A router whose list routes also take PUT/PATCH/DELETE of a list (bulk update/delete), as NetBox's does."""

from __future__ import annotations

import copy

from rest_framework.routers import DefaultRouter


class BulkRouter(DefaultRouter):
    """DefaultRouter + list-route methods for the bulk actions (mapped only where a viewset defines them)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.routes = copy.deepcopy(self.routes)
        list_route = self.routes[0]
        list_route.mapping.update(
            {
                "put": "bulk_update",
                "patch": "bulk_partial_update",
                "delete": "bulk_destroy",
            }
        )
