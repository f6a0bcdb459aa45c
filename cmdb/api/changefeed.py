"""Cursor pages of the change history that never skip a row committed late (see cmdb/changefeed.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from gpuops.api.pagination import CURSOR_PARAM, MODE_PARAM, FleetPagination

from ..changefeed import FeedPosition, InvalidPosition, change_feed_page, position_decode


class ChangeFeedPagination(FleetPagination):
    """Offset pages for browsing (newest first), as everywhere; cursor pages follow the feed order
    (transaction, id) up to the safe horizon. A cursor page also carries `resume`: where to poll from later,
    present even on the last page, so a consumer that caught up keeps its place."""

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list | None:
        self.request = request
        if not self._is_cursor_mode(request):
            return super().paginate_queryset(queryset, request, view)
        mode = request.query_params.get(MODE_PARAM)
        if mode not in (None, "", "cursor", "offset"):
            raise exceptions.ValidationError({MODE_PARAM: ["Use 'cursor' or 'offset'."]})
        self.cursor_mode = True
        self.limit = self.get_limit(request) or self.default_limit
        token = request.query_params.get(CURSOR_PARAM)
        try:
            position = position_decode(token) if token else FeedPosition()
        except InvalidPosition as exc:
            raise exceptions.ValidationError(
                {CURSOR_PARAM: ["Invalid cursor; restart the walk with ?mode=cursor."]}
            ) from exc
        rows, self.resume_position, has_more = change_feed_page(queryset, position, limit=self.limit)
        self.next_cursor = self.resume_position.encode() if has_more else None
        return rows

    def _link(self, token: str) -> str:
        url = self.request.build_absolute_uri()
        url = remove_query_param(remove_query_param(url, self.offset_query_param), MODE_PARAM)
        url = replace_query_param(url, self.limit_query_param, self.limit)
        return replace_query_param(url, CURSOR_PARAM, token)

    def get_paginated_response(self, data: list) -> Response:
        if not self.cursor_mode:
            return super().get_paginated_response(data)
        return Response(
            {
                "next": self.get_next_link(),
                "previous": None,
                "resume": self._link(self.resume_position.encode()),
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
