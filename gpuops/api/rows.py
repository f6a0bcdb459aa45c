"""A list read path that builds each row's JSON from `values_list()`, not from model instances.

A 1,000-card page through the serializer fetches every column of the card and of each joined table (104 for
an accelerator, 21 of them timestamps), builds six model instances per row and walks DRF's field machinery for
each cell. The JSON needs 26 fields. `RowReader` is compiled once per serializer class from its declared fields:
it asks the database for exactly the columns the JSON shows (a brief relation's `id` is the foreign key column
itself, so it needs no join) and fills the same dicts in the same key order. Many-to-many fields cost one
query per page over the through table.

A serializer the reader cannot reproduce exactly (a method field, a computed source, its own
`to_representation`) gets no reader (`RowReader.compile` returns None) and its list stays on the serializer.
tests/api/test_rows.py compares both paths on every endpoint that has a reader.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import FieldDoesNotExist
from django.db import connections, models
from django.db.models import F, Func, QuerySet
from rest_framework import serializers
from rest_framework.settings import api_settings

from .fields import BriefField, RefField
from .serializers import BaseModelSerializer

_UTC = dt.UTC
_PLAIN = "plain"  # the database value is the JSON value (str, int, bool columns)
_CONVERT = "convert"  # a conversion function of the value
_BRIEF = "brief"  # a related object's brief form from several columns
_MANY = "many"  # a list of brief forms from the page's many-to-many query
PK = 0  # the column of each row's id


def _utc_iso(field: serializers.DateTimeField) -> bool:
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    return (
        output_format is not None
        and output_format.lower() == "iso-8601"
        and settings.USE_TZ
        and settings.TIME_ZONE == "UTC"
        and getattr(field, "timezone", None) is None
    )


def _datetime_converter(field: serializers.DateTimeField) -> Callable[[Any], Any]:
    """DRF's DateTimeField output (ISO 8601, UTC as `Z`) without its per-value timezone lookups. Text is
    already the output (PostgreSQL formats it, see _TEXT_SQL; DRF passes strings through too)."""
    if not _utc_iso(field):
        return field.to_representation

    def convert(value: Any) -> Any:
        if type(value) is str:
            return value
        if type(value) is dt.datetime and value.tzinfo is _UTC:
            return value.isoformat()[:-6] + "Z"
        return field.to_representation(value)

    return convert


#: PostgreSQL renders these columns as the text DRF would (datetime.isoformat(): microseconds only when not
#: zero, UTC as Z), which saves parsing each timestamp into a datetime and formatting it again.
_TEXT_SQL = {
    "datetime": (
        "regexp_replace(to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), "
        "'\\.000000$', '') || 'Z'"
    ),
    "date": "to_char(%(expressions)s, 'YYYY-MM-DD')",
}


def _choice_is_identity(field: serializers.ChoiceField) -> bool:
    return all(type(value) is str and key == value for key, value in field.choice_strings_to_values.items())


class RowReader:
    """Renders a queryset's rows as the serializer would, from one `values_list()` query (plus one per m2m)."""

    def __init__(
        self,
        columns: list[str],
        steps: list[tuple[str, str, Any]],
        many: list[tuple[str, Any]],
        text_columns: dict[int, str],
    ) -> None:
        self.columns = columns
        self.steps = steps
        self.many = many
        self.text_columns = text_columns
        self._render_row = self._compile_row(steps)

    # --- compiling -----------------------------------------------------------------------------------------

    @classmethod
    def compile(cls, serializer_class: type[serializers.ModelSerializer]) -> RowReader | None:
        if not issubclass(serializer_class, BaseModelSerializer):
            return None
        if serializer_class.to_representation is not BaseModelSerializer.to_representation:
            return None
        model = serializer_class.Meta.model
        serializer = serializer_class(context={})
        columns: list[str] = []
        index: dict[str, int] = {}

        def column(path: str) -> int:
            if path not in index:
                index[path] = len(columns)
                columns.append(path)
            return index[path]

        column("pk")  # PK: every row starts with its id
        steps: list[tuple[str, str, Any]] = []
        many: list[tuple[str, Any]] = []
        text_columns: dict[int, str] = {}
        for field in serializer._readable_fields:
            name = field.field_name
            if isinstance(field, serializers.ManyRelatedField) and isinstance(field.child_relation, RefField):
                plan = cls._many_plan(model, field)
                if plan is None:
                    return None
                many.append((name, plan))
                steps.append((name, _MANY, len(many) - 1))
                continue
            if field.source == "*" or isinstance(field, serializers.SerializerMethodField | serializers.Serializer):
                return None
            attrs = field.source_attrs
            if isinstance(field, RefField | BriefField):
                brief = field.brief
                prefix = "__".join(attrs)
                if _relation_path(model, attrs) is None:
                    return None
                parts = []
                for bname, bpath in brief.plan():
                    # The related object's id is the foreign key column: no join for it.
                    path = prefix if bpath == ["id"] else f"{prefix}__{'__'.join(bpath)}"
                    parts.append((bname, column(path)))
                steps.append((name, _BRIEF, (column(prefix), tuple(parts))))
                continue
            if len(attrs) != 1:
                return None
            try:
                model_field = model._meta.get_field(attrs[0])
            except FieldDoesNotExist:
                return None
            if not model_field.concrete or model_field.is_relation:
                return None
            idx = column(attrs[0])
            kind = type(field)
            if (
                (kind in (serializers.CharField, serializers.SlugField) and isinstance(model_field, models.CharField))
                or (kind is serializers.IntegerField and isinstance(model_field, models.IntegerField))
                or (kind is serializers.BooleanField and isinstance(model_field, models.BooleanField))
                or (kind is serializers.ChoiceField and _choice_is_identity(field))
            ):
                steps.append((name, _PLAIN, idx))
            elif kind is serializers.DateTimeField:
                if _utc_iso(field) and isinstance(model_field, models.DateTimeField):
                    text_columns[idx] = "datetime"
                steps.append((name, _CONVERT, (idx, _datetime_converter(field))))
            elif kind is serializers.DateField:
                output_format = getattr(field, "format", api_settings.DATE_FORMAT)
                if output_format and output_format.lower() == "iso-8601" and type(model_field) is models.DateField:
                    text_columns[idx] = "date"
                steps.append((name, _CONVERT, (idx, field.to_representation)))
            else:
                # The value from values_list() is the model attribute's value (from_db_value applied), so the
                # field's own to_representation gives the serializer's output.
                steps.append((name, _CONVERT, (idx, field.to_representation)))
        return cls(columns, steps, many, text_columns)

    @staticmethod
    def _many_plan(model: type[models.Model], field: serializers.ManyRelatedField) -> Any:
        try:
            m2m = model._meta.get_field(field.source)
        except FieldDoesNotExist:
            return None
        if not isinstance(m2m, models.ManyToManyField):
            return None
        through = m2m.remote_field.through
        owner = m2m.m2m_field_name()
        target = m2m.m2m_reverse_field_name()
        brief = field.child_relation.brief
        paths = [target if bpath == ["id"] else f"{target}__{'__'.join(bpath)}" for _, bpath in brief.plan()]
        names = [bname for bname, _ in brief.plan()]
        # The order prefetch_related gives: the related model's own ordering.
        ordering = [
            f"-{target}__{o[1:]}" if o.startswith("-") else f"{target}__{o}"
            for o in (m2m.related_model._meta.ordering or ["pk"])
        ]
        return (through, owner, paths, names, ordering)

    # --- reading -------------------------------------------------------------------------------------------

    def values(self, queryset: QuerySet) -> QuerySet:
        """The queryset as tuples of the columns the JSON needs (select/prefetch of the serializer dropped)."""
        queryset = queryset.select_related(None).prefetch_related(None)
        columns: list[Any] = list(self.columns)
        if connections[queryset.db].vendor == "postgresql":
            for idx, kind in self.text_columns.items():
                columns[idx] = Func(F(columns[idx]), template=_TEXT_SQL[kind], output_field=models.TextField())
        return queryset.values_list(*columns)

    @staticmethod
    def pk_of(row: Sequence[Any]) -> Any:
        return row[PK]

    @staticmethod
    def _compile_row(steps: list[tuple[str, str, Any]]) -> Callable[..., dict[str, Any]]:
        """One function building a row's dict as a single literal: a loop over the steps with a branch per
        kind costs three times as much for a 1,000-row page."""
        namespace: dict[str, Any] = {}
        items = []
        for n, (name, kind, data) in enumerate(steps):
            key = repr(name)
            if kind is _PLAIN:
                items.append(f"{key}: r[{data}]")
            elif kind is _CONVERT:
                namespace[f"c{n}"] = data[1]
                items.append(f"{key}: None if r[{data[0]}] is None else c{n}(r[{data[0]}])")
            elif kind is _BRIEF:
                brief = ", ".join(f"{bname!r}: r[{idx}]" for bname, idx in data[1])
                items.append(f"{key}: None if r[{data[0]}] is None else {{{brief}}}")
            else:
                items.append(f"{key}: m[{data}].get(r[{PK}], [])")
        source = "def render_row(r, m):\n    return {" + ", ".join(items) + "}\n"
        exec(compile(source, "<RowReader>", "exec"), namespace)
        return namespace["render_row"]

    def render(self, rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
        rows = list(rows)
        many_values = [self._read_many(plan, rows) for _, plan in self.many]
        render_row = self._render_row
        return [render_row(row, many_values) for row in rows]

    @staticmethod
    def _read_many(plan: Any, rows: list[Sequence[Any]]) -> dict[Any, list[dict[str, Any]]]:
        through, owner, paths, names, ordering = plan
        if not rows:
            return {}
        pks = [row[PK] for row in rows]
        result: dict[Any, list[dict[str, Any]]] = {}
        for owner_pk, *values in (
            through.objects.filter(**{f"{owner}__in": pks}).order_by(*ordering).values_list(owner, *paths)
        ):
            result.setdefault(owner_pk, []).append(dict(zip(names, values, strict=True)))
        return result


def _relation_path(model: type[models.Model], attrs: Sequence[str]) -> type[models.Model] | None:
    """The model at the end of a chain of forward foreign keys, or None when the chain is anything else."""
    current = model
    for attr in attrs:
        try:
            field = current._meta.get_field(attr)
        except FieldDoesNotExist:
            return None
        if not (field.many_to_one or field.one_to_one) or not field.concrete:
            return None
        current = field.related_model
    return current


_READERS: dict[type, RowReader | None] = {}


def reader_for(serializer_class: type[serializers.ModelSerializer]) -> RowReader | None:
    if serializer_class not in _READERS:
        _READERS[serializer_class] = RowReader.compile(serializer_class)
    return _READERS[serializer_class]
