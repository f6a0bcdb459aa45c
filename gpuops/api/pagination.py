"""Pagination: limit/offset for browsing, and a keyset cursor for walking a whole fleet.

Offset pagination gets slower the deeper the page (the database skips `offset` rows) and rows shift when others
write meanwhile, so a script that wants every accelerator asks for cursor mode: `?mode=cursor` (first page) and
then follows `next`, which carries `?cursor=<token>`. A cursor page is `WHERE id > last_id ORDER BY id LIMIT n`,
so every page costs the same and every row is returned exactly once even while rows are added or deleted.
Cursor mode orders by id whatever `?ordering=` says, and has no `count` (counting 100,000 rows per page is
wasted work for a walker).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

CURSOR_PARAM = "cursor"
MODE_PARAM = "mode"


def encode_cursor(last_pk: int) -> str:
    return base64.urlsafe_b64encode(f"pk:{last_pk}".encode()).decode().rstrip("=")


def decode_cursor(token: str) -> int:
    """The last id of the previous page. Raises ValidationError for anything that is not one of our tokens."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        kind, _, value = raw.partition(":")
        if kind != "pk":
            raise ValueError(raw)
        last = int(value)
        if last < 0:
            raise ValueError(raw)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise exceptions.ValidationError(
            {CURSOR_PARAM: ["Invalid cursor; restart the walk with ?mode=cursor."]}
        ) from exc
    return last


class FleetPagination(LimitOffsetPagination):
    """Limit/offset by default (default 50, at most 1,000 per page); keyset cursor with ?mode=cursor/?cursor=."""

    default_limit = 50
    max_limit = 1000

    def __init__(self) -> None:
        super().__init__()
        self.cursor_mode = False
        self.next_cursor: str | None = None
        #: the id of a page row (a model instance, or a values_list() tuple of a RowReader)
        self.row_pk: Any = lambda row: row.pk
        #: what `count` counts when it is not the paginated queryset itself (set by the RowReader list path)
        self.count_source: QuerySet | None = None

    def get_count(self, queryset: Any) -> int:
        return super().get_count(self.count_source if self.count_source is not None else queryset)

    def get_offset(self, request: Request) -> int:
        # Beyond 2**62 no table has rows, and SQLite cannot bind a larger OFFSET at all.
        return min(super().get_offset(request), 2**62)

    def _is_cursor_mode(self, request: Request) -> bool:
        return CURSOR_PARAM in request.query_params or request.query_params.get(MODE_PARAM) == "cursor"

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list | None:
        self.request = request
        if not self._is_cursor_mode(request):
            return self.offset_page(queryset, request)
        mode = request.query_params.get(MODE_PARAM)
        if mode not in (None, "", "cursor", "offset"):
            raise exceptions.ValidationError({MODE_PARAM: ["Use 'cursor' or 'offset'."]})
        self.cursor_mode = True
        self.limit = self.get_limit(request) or self.default_limit
        return self.cursor_page(queryset, request.query_params.get(CURSOR_PARAM))

    def offset_page(self, queryset: QuerySet, request: Request) -> list:
        """DRF's limit/offset page, without the COUNT when the first page is not full: its length is the
        count then (a search that finds a few rows runs its match once, not twice)."""
        self.limit = self.get_limit(request)
        self.offset = self.get_offset(request)
        if self.offset == 0:
            rows = list(queryset[: self.limit])
            self.count = len(rows) if len(rows) < self.limit else self.get_count(queryset)
        else:
            self.count = self.get_count(queryset)
            if self.count == 0 or self.offset > self.count:
                return []
            rows = list(queryset[self.offset : self.offset + self.limit])
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        return rows

    def cursor_page(self, queryset: QuerySet, token: str | None) -> list:
        """One page of the cursor walk after `token` (the first page when None); sets `next_cursor`. A
        pagination with another walk order overrides this and keeps the mode handling above."""
        queryset = queryset.order_by("pk")
        if token:
            queryset = queryset.filter(pk__gt=decode_cursor(token))
        # One row more than the page tells whether there is a next page without a COUNT.
        rows = list(queryset[: self.limit + 1])
        has_next = len(rows) > self.limit
        rows = rows[: self.limit]
        self.next_cursor = encode_cursor(self.row_pk(rows[-1])) if has_next and rows else None
        return rows

    def get_next_link(self) -> str | None:
        if not self.cursor_mode:
            return super().get_next_link()
        if self.next_cursor is None:
            return None
        return self.cursor_link(self.next_cursor)

    def cursor_link(self, token: str) -> str:
        """This request's URL walking on from `token` (offset and mode dropped, the limit kept)."""
        url = self.request.build_absolute_uri()
        url = remove_query_param(remove_query_param(url, self.offset_query_param), MODE_PARAM)
        url = replace_query_param(url, self.limit_query_param, self.limit)
        return replace_query_param(url, CURSOR_PARAM, token)

    def get_paginated_response(self, data: list) -> Response:
        if not self.cursor_mode:
            return super().get_paginated_response(data)
        return Response({"next": self.get_next_link(), "previous": None, "results": data})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results"],
            "properties": {
                "count": {
                    "type": "integer",
                    "example": 123,
                    "description": "Total rows matching the filters (absent in cursor mode).",
                },
                "next": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "example": "http://api.example.org/accounts/?cursor=cGs6MTAw&limit=100",
                },
                "previous": {
                    "type": "string",
                    "nullable": True,
                    "format": "uri",
                    "example": "http://api.example.org/accounts/?offset=400&limit=100",
                },
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        params = super().get_schema_operation_parameters(view)
        for param in params:
            if param["name"] == self.limit_query_param:
                param["schema"] = {"type": "integer", "minimum": 1}
                param["description"] = f"Rows per page (default {self.default_limit}, at most {self.max_limit})."
            if param["name"] == self.offset_query_param:
                param["schema"] = {"type": "integer", "minimum": 0}
        return [
            *params,
            {
                "name": MODE_PARAM,
                "required": False,
                "in": "query",
                "description": "'cursor' starts a keyset walk ordered by id (follow `next`); default 'offset'.",
                "schema": {"type": "string", "enum": ["offset", "cursor"]},
            },
            {
                "name": CURSOR_PARAM,
                "required": False,
                "in": "query",
                "description": "Opaque cursor from the `next` link of a cursor-mode page.",
                "schema": {"type": "string"},
            },
        ]
