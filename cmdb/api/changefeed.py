"""Cursor pages of the change history that never skip a row committed late (see cmdb/changefeed.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions
from rest_framework.response import Response

from gpuops.api.pagination import CURSOR_PARAM, FleetPagination

from ..changefeed import FeedPosition, InvalidPosition, change_feed_page, position_decode


class ChangeFeedPagination(FleetPagination):
    """Offset pages for browsing (newest first), as everywhere; cursor pages follow the feed order
    (transaction, id) up to the safe horizon. A cursor page also carries `resume`: where to poll from later,
    present even on the last page, so a consumer that caught up keeps its place."""

    def cursor_page(self, queryset: QuerySet, token: str | None) -> list:
        try:
            position = position_decode(token) if token else FeedPosition()
        except InvalidPosition as exc:
            raise exceptions.ValidationError(
                {CURSOR_PARAM: ["Invalid cursor; restart the walk with ?mode=cursor."]}
            ) from exc
        rows, self.resume_position, has_more = change_feed_page(queryset, position, limit=self.limit)
        self.next_cursor = self.resume_position.encode() if has_more else None
        return rows

    def get_paginated_response(self, data: list) -> Response:
        if not self.cursor_mode:
            return super().get_paginated_response(data)
        return Response(
            {
                "next": self.get_next_link(),
                "previous": None,
                "resume": self.cursor_link(self.resume_position.encode()),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        out = super().get_paginated_response_schema(schema)
        out["properties"]["resume"] = {
            "type": "string",
            "format": "uri",
            "description": "Cursor mode: the URL to poll for changes after this page (also on the last page).",
        }
        return out


__all__ = ["ChangeFeedPagination"]
