"""The base viewset every model endpoint derives from (NetBox style: subclasses only declare).

What it adds to DRF's ModelViewSet:
- the token/session user becomes the actor of change records (see `initial`);
- reads go through `restrict_queryset(..., "view")`, so what a user may not see is absent from lists and a 404
  on detail; writes need `may_write*` (403 when visible but not changeable);
- every write runs in one transaction: lock the row(s), check If-Match / `version` (412), validate the whole
  batch, write through the model's writer, then re-check that the *result* is still within the user's grants
  (`check_written`) before committing (a technician cannot move a node into a site that is not theirs);
- bulk create/update/delete by sending a list to the list URL; one bad row rejects the batch and names the row;
- ETag on reads and writes, 304 on If-None-Match;
- the JSON error shape of gpuops.api.exceptions and the documented schema of gpuops.api.schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Model, QuerySet
from rest_framework import exceptions, status, viewsets
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from .etag import check_if_match, etag_for, if_none_match_hit
from .exceptions import BulkValidationError, RowNotFound, RowPermissionDenied, api_exception_handler
from .fields import MAX_ID
from .metadata import ApiMetadata
from .pagination import FleetPagination
from .permissions import ObjectWritePermission
from .query_params import check_query_params
from .rows import RowReader, reader_for
from .schema import ApiAutoSchema
from .writers import ModelWriter, Row, RowErrors

# Token first: an anonymous request is answered 401 with `WWW-Authenticate: Token` (DRF takes the header from
# the first class; session auth has none, which would turn "not logged in" into a 403).
AUTHENTICATION_CLASSES = [TokenAuthentication, SessionAuthentication]


class ApiViewMixin:
    """Shared by every API view (viewsets and plain APIViews): auth, errors, actor, schema."""

    authentication_classes = AUTHENTICATION_CLASSES
    metadata_class = ApiMetadata
    schema = ApiAutoSchema()

    def get_exception_handler(self) -> Any:
        return api_exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        # DRF authenticates tokens after Django's middleware ran; hand the user to the change context
        # (gpuops.middleware._LazyActor) so change records name the token's user as actor.
        request._request._gpuops_drf_user = request.user  # type: ignore[attr-defined]
        # After authentication and permissions: an anonymous caller gets its 401 before any 400.
        check_query_params(request, self)


class RowListMixin:
    """Lists rendered by the serializer's RowReader (gpuops.api.rows) when it has one: same JSON, same filters,
    scopes and pagination, a fraction of the work per row."""

    #: False keeps the list on the serializer (an endpoint whose queryset carries what values() cannot show)
    row_reader_enabled = True

    def row_reader(self) -> RowReader | None:
        if not self.row_reader_enabled:
            return None
        paginator = self.paginator  # type: ignore[attr-defined]
        if paginator is not None and type(paginator).cursor_page is not FleetPagination.cursor_page:
            return None  # a walk order of its own reads model instances
        return reader_for(self.get_serializer_class())  # type: ignore[attr-defined]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        reader = self.row_reader()
        if reader is None:
            return super().list(request, *args, **kwargs)  # type: ignore[misc]
        filtered = self.filter_queryset(self.get_queryset())  # type: ignore[attr-defined]
        queryset = reader.values(filtered)
        paginator = self.paginator  # type: ignore[attr-defined]
        if paginator is None:
            return Response(reader.render(queryset))
        paginator.row_pk = reader.pk_of
        # Counted without the joins the page's columns need (a COUNT through six joins costs several times more).
        paginator.count_source = filtered.select_related(None).prefetch_related(None)
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(reader.render(page))


class BaseModelViewSet(RowListMixin, ApiViewMixin, viewsets.ModelViewSet):
    """CRUD + bulk for one model. Subclasses set queryset, serializer_class, filterset_class and the hooks."""

    permission_classes = [ObjectWritePermission]
    pagination_class = FleetPagination
    # Ids only (at most 18 digits): anything else is not an object path and gets the JSON 404.
    lookup_value_regex = r"[0-9]{1,18}"
    writer_class: type[ModelWriter] = ModelWriter
    #: POST of a list creates many rows (documented as oneOf object/array in the schema)
    bulk_create_enabled = True
    max_bulk_rows = 5000
    #: joins/prefetches the serializer needs, so a page costs the same number of queries at any size
    select_related: Sequence[str] = ()
    prefetch_related: Sequence[str] = ()

    # --- hooks for apps ------------------------------------------------------------------------------------

    def restrict_queryset(self, queryset: QuerySet, action: str) -> QuerySet:
        """The rows of `queryset` the user may `action` (view/change/delete/add)."""
        return queryset

    def may_write_any(self, request: Request, action: str) -> bool:
        """Whether the user holds any grant that could allow `action` on this model (cheap, before lookups)."""
        return True

    def may_write(self, request: Request, obj: Model, action: str) -> bool:
        """Whether the user may `action` (change/delete) this stored object."""
        return True

    def check_written(self, objs: Sequence[Model], action: str, *, bulk: bool) -> None:
        """After writing, inside the transaction: raise (403, rolling back) if a result is outside the grants."""

    # --- querysets -----------------------------------------------------------------------------------------

    def get_base_queryset(self) -> QuerySet:
        queryset = self.queryset.all()
        if self.select_related:
            queryset = queryset.select_related(*self.select_related)
        if self.prefetch_related:
            queryset = queryset.prefetch_related(*self.prefetch_related)
        return queryset

    def get_queryset(self) -> QuerySet:
        return self.restrict_queryset(self.get_base_queryset(), "view")

    def get_writer(self) -> ModelWriter:
        return self.writer_class(self.queryset.model, request=self.request)

    def refetch(self, objs: Sequence[Model]) -> list[Model]:
        """Re-read written rows with the serializer's joins (a fixed number of queries for any batch size)."""
        by_pk = self.get_base_queryset().in_bulk([o.pk for o in objs])
        return [by_pk[o.pk] for o in objs]

    def lock(self, pks: Sequence[int]) -> dict[int, Model]:
        # of=("self",): PostgreSQL refuses FOR UPDATE on the nullable side of the serializer's outer joins.
        return self.get_base_queryset().select_for_update(of=("self",)).in_bulk(list(pks))

    # --- reads ---------------------------------------------------------------------------------------------

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        etag = etag_for(instance)
        if if_none_match_hit(request.headers.get("If-None-Match"), etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        return self._respond(instance)

    def _respond(self, instance: Model, code: int = status.HTTP_200_OK) -> Response:
        response = Response(self.get_serializer(instance).data, status=code)
        etag = etag_for(instance)
        if etag:
            response["ETag"] = etag
        return response

    # --- validation helpers --------------------------------------------------------------------------------

    def _check_bulk_size(self, data: list[Any]) -> None:
        if not data:
            raise exceptions.ValidationError({"non_field_errors": ["Send at least one row."]})
        if len(data) > self.max_bulk_rows:
            raise exceptions.ValidationError(
                {"non_field_errors": [f"At most {self.max_bulk_rows} rows per request; split the batch."]}
            )

    @staticmethod
    def _raise_serializer_errors(serializer: Any, bulk: bool) -> None:
        if serializer.is_valid():
            return
        errors = serializer.errors
        if bulk and isinstance(errors, list):
            raise BulkValidationError({i: e for i, e in enumerate(errors) if e})
        raise exceptions.ValidationError(errors)

    @staticmethod
    def _run(func: Any, *args: Any, bulk: bool) -> Any:
        """Call a writer step; its RowErrors become a 400 (naming the row for bulk requests)."""
        try:
            return func(*args, bulk=bulk)
        except RowErrors as exc:
            if bulk:
                raise BulkValidationError(exc.errors) from exc
            raise exceptions.ValidationError(next(iter(exc.errors.values()))) from exc

    @staticmethod
    def _body_version(data: Any) -> int | None:
        if isinstance(data, dict) and "version" in data:
            try:
                return int(data["version"])
            except (TypeError, ValueError):
                return None  # the serializer reports the bad value
        return None

    @staticmethod
    def _row_ids(data: Any, *, allow_bare: bool) -> list[int]:
        """The `id` of each row of a bulk update/delete; 400 naming the row when one is missing or repeated."""
        if not isinstance(data, list):
            raise exceptions.ValidationError({"non_field_errors": ["Send a list of rows, each with its id."]})
        ids: list[int] = []
        errors: dict[int, Any] = {}
        seen: dict[int, int] = {}
        for idx, row in enumerate(data):
            value = row.get("id") if isinstance(row, dict) else (row if allow_bare else None)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
                errors[idx] = {"id": ["Each row needs the integer id of the object."]}
                continue
            if value in seen:
                errors[idx] = {"id": [f"Id {value} is also in row {seen[value]}."]}
                continue
            seen[value] = idx
            ids.append(value)
        if errors:
            raise BulkValidationError(errors)
        return ids

    def _load_for_write(self, ids: list[int], action: str) -> list[Model]:
        """Lock the rows of a bulk write: 404 for a row the user cannot see, 403 for one they cannot write."""
        visible = set(self.get_queryset().filter(pk__in=ids).values_list("pk", flat=True))
        for idx, pk in enumerate(ids):
            if pk not in visible:
                raise RowNotFound(f"No object with id {pk} (or it is not visible to you).", row=idx)
        writable = set(self.restrict_queryset(self.queryset.filter(pk__in=ids), action).values_list("pk", flat=True))
        for idx, pk in enumerate(ids):
            if pk not in writable:
                raise RowPermissionDenied(f"You may not {action} object {pk}.", row=idx)
        locked = self.lock(ids)
        return [locked[pk] for pk in ids]

    # --- writes --------------------------------------------------------------------------------------------

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        bulk = isinstance(data, list)
        if bulk:
            if not self.bulk_create_enabled:
                raise exceptions.ValidationError({"non_field_errors": ["Send one object."]})
            self._check_bulk_size(data)
        serializer = self.get_serializer(data=data, many=bulk)
        self._raise_serializer_errors(serializer, bulk)
        validated = serializer.validated_data if bulk else [serializer.validated_data]
        writer = self.get_writer()
        with transaction.atomic():
            rows = [writer.row(i, d) for i, d in enumerate(validated)]
            self._run(writer.validate, rows, bulk=bulk)
            objs = self._run(writer.create, rows, bulk=bulk)
            self.check_written(objs, "add", bulk=bulk)
        objs = self.refetch(objs)
        if bulk:
            return Response(self.get_serializer(objs, many=True).data, status=status.HTTP_201_CREATED)
        return self._respond(objs[0], status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.pop("partial", False)
        writer = self.get_writer()
        with transaction.atomic():
            instance = self.get_object()  # 404 if invisible, 403 if visible but not changeable
            instance = self.lock([instance.pk])[instance.pk]
            check_if_match(request, instance, expected_version=self._body_version(request.data))
            serializer = self.get_serializer(instance, data=request.data, partial=partial)
            self._raise_serializer_errors(serializer, False)
            rows = [writer.row(0, serializer.validated_data, instance)]
            self._run(writer.validate, rows, bulk=False)
            objs = self._run(writer.update, rows, bulk=False)
            self.check_written(objs, "change", bulk=False)
        return self._respond(self.refetch(objs)[0])

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        writer = self.get_writer()
        with transaction.atomic():
            instance = self.get_object()
            instance = self.lock([instance.pk])[instance.pk]
            check_if_match(request, instance)
            writer.delete([instance], bulk=False)
        return Response(status=status.HTTP_204_NO_CONTENT)

    def bulk_update(self, request: Request, *args: Any, partial: bool = False, **kwargs: Any) -> Response:
        data = request.data
        ids = self._row_ids(data, allow_bare=False)
        self._check_bulk_size(data)
        writer = self.get_writer()
        with transaction.atomic():
            instances = self._load_for_write(ids, "change")
            for idx, (row, instance) in enumerate(zip(data, instances, strict=True)):
                check_if_match(request, instance, expected_version=self._body_version(row), row=idx)
            serializer = self.get_serializer(instances, data=data, many=True, partial=partial)
            self._raise_serializer_errors(serializer, True)
            rows: list[Row] = [
                writer.row(i, d, inst)
                for i, (d, inst) in enumerate(zip(serializer.validated_data, instances, strict=True))
            ]
            self._run(writer.validate, rows, bulk=True)
            objs = self._run(writer.update, rows, bulk=True)
            self.check_written(objs, "change", bulk=True)
        return Response(self.get_serializer(self.refetch(objs), many=True).data)

    def bulk_partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.bulk_update(request, *args, partial=True, **kwargs)

    def bulk_destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = request.data
        ids = self._row_ids(data, allow_bare=True)
        self._check_bulk_size(data)
        writer = self.get_writer()
        with transaction.atomic():
            instances = self._load_for_write(ids, "delete")
            for idx, (row, instance) in enumerate(zip(data, instances, strict=True)):
                check_if_match(request, instance, expected_version=self._body_version(row), row=idx)
            writer.delete(instances, bulk=True)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ReadOnlyModelViewSet(RowListMixin, ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """List + retrieve only (append-only histories)."""

    pagination_class = FleetPagination
    lookup_value_regex = r"[0-9]{1,18}"
    permission_classes = [ObjectWritePermission]
    select_related: Sequence[str] = ()
    prefetch_related: Sequence[str] = ()

    def restrict_queryset(self, queryset: QuerySet, action: str) -> QuerySet:
        return queryset

    def may_write_any(self, request: Request, action: str) -> bool:
        return False

    def may_write(self, request: Request, obj: Model, action: str) -> bool:
        return False

    def get_queryset(self) -> QuerySet:
        queryset = self.queryset.all()
        if self.select_related:
            queryset = queryset.select_related(*self.select_related)
        if self.prefetch_related:
            queryset = queryset.prefetch_related(*self.prefetch_related)
        return self.restrict_queryset(queryset, "view")
