"""Related-object fields: write an id, read a brief nested object (NetBox style).

A client reading an accelerator gets `"node": {"id": 7, "hostname": "sh1-h100-0007"}` and needs no follow-up
request; a client writing one sends `"node": 7` (or `{"id": 7}`). Brief forms are plain dicts built from a
few attributes (no serializer per row), because a 1,000-row page renders several thousand of them.

Bulk requests resolve every id of a column in one query: the bulk list serializer fills
`context["ref_cache"]` before validating the rows, and RefField reads from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers

_MISSING = object()
#: ids are 64-bit: anything larger cannot exist (and SQLite refuses to even compare it)
MAX_ID = 2**63 - 1


class BriefSerializer(serializers.Serializer):
    """A few identifying attributes of an object. Subclasses declare read-only fields with dotted sources.

    `represent()` is the fast path used for rendering; the declared fields exist for the OpenAPI schema and
    must stay primitives (ints, strings, booleans).
    """

    _plan: ClassVar[list[tuple[str, list[str]]] | None] = None

    @classmethod
    def plan(cls) -> list[tuple[str, list[str]]]:
        if cls.__dict__.get("_plan") is None:
            cls._plan = [(name, (field.source or name).split(".")) for name, field in cls._declared_fields.items()]
        return cls._plan  # type: ignore[return-value]

    @classmethod
    def represent(cls, obj: Any) -> dict[str, Any] | None:
        if obj is None:
            return None
        out: dict[str, Any] = {}
        for name, path in cls.plan():
            value = obj
            for attr in path:
                value = getattr(value, attr, None)
                if value is None:
                    break
            out[name] = value
        return out


_BRIEFS: dict[type[Model], type[BriefSerializer]] = {}


def register_brief(model: type[Model]) -> Callable[[type[BriefSerializer]], type[BriefSerializer]]:
    """Class decorator: the brief form used whenever `model` appears as a related object."""

    def decorate(cls: type[BriefSerializer]) -> type[BriefSerializer]:
        _BRIEFS[model] = cls
        return cls

    return decorate


def brief_for(model: type[Model]) -> type[BriefSerializer]:
    try:
        return _BRIEFS[model]
    except KeyError:
        raise LookupError(f"No brief serializer registered for {model.__name__}") from None


class RefField(serializers.PrimaryKeyRelatedField):
    """A foreign key: accepts an id (or {"id": n}) on write, renders the related model's brief form on read.

    `scope_queryset(queryset, request)` (set by the app's serializers) narrows the choices to what the user may
    see, so a reference to an invisible object reads as "does not exist" rather than confirming it exists.
    """

    scope_queryset: ClassVar[Callable[[QuerySet, Any], QuerySet] | None] = None
    default_error_messages = {
        "does_not_exist": "No object with id {pk_value} (or it is not visible to you).",
        "incorrect_type": "Expected an id (integer), got {data_type}.",
    }

    def __init__(self, brief: type[BriefSerializer] | None = None, **kwargs: Any) -> None:
        self._brief = brief
        super().__init__(**kwargs)

    @property
    def brief(self) -> type[BriefSerializer]:
        if self._brief is None:
            self._brief = brief_for(self._related_model())
        return self._brief

    def _related_model(self) -> type[Model]:
        if self.queryset is not None:
            return self.queryset.model
        # Read-only relations have no queryset: find the model through the serializer's model field.
        field: serializers.Field = self.parent if isinstance(self.parent, serializers.ManyRelatedField) else self
        owner = getattr(getattr(field.parent, "Meta", None), "model", None)
        if owner is None:
            raise LookupError("RefField needs a queryset or an explicit brief serializer")
        return owner._meta.get_field(field.source).related_model

    def use_pk_only_optimization(self) -> bool:
        return False

    def get_queryset(self) -> QuerySet:
        queryset = super().get_queryset()
        request = self.context.get("request")
        scope = type(self).scope_queryset
        if scope is not None and request is not None:
            queryset = scope(queryset, request)
        return queryset

    @staticmethod
    def coerce(data: Any) -> Any:
        if isinstance(data, dict) and set(data) == {"id"}:
            return data["id"]
        return data

    def to_internal_value(self, data: Any) -> Any:
        data = self.coerce(data)
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("incorrect_type", data_type=type(data).__name__)
        try:
            pk = int(data)
        except (TypeError, ValueError):
            self.fail("incorrect_type", data_type=type(data).__name__)
        if not 0 < pk <= MAX_ID:
            self.fail("does_not_exist", pk_value=pk)
        cache = self.context.get("ref_cache", {}).get(self.cache_key(), _MISSING)
        if cache is not _MISSING:
            obj = cache.get(pk)
            if obj is None:
                self.fail("does_not_exist", pk_value=pk)
            return obj
        return super().to_internal_value(pk)

    def cache_key(self) -> str:
        parent = self.parent
        return parent.field_name if isinstance(parent, serializers.ManyRelatedField) else self.field_name

    def to_representation(self, value: Any) -> Any:
        return self.brief.represent(value)


class BriefField(serializers.Field):
    """A read-only related object reached through a dotted source (e.g. an accelerator's `node.rack`)."""

    def __init__(self, brief: type[BriefSerializer], **kwargs: Any) -> None:
        self.brief = brief
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> Any:
        return self.brief.represent(value)


class RefFieldExtension(OpenApiSerializerFieldExtension):
    target_class = RefField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> Any:
        if direction == "response":
            return auto_schema.resolve_serializer(self.target.brief, direction).ref
        return build_basic_type(OpenApiTypes.INT)  # writes take the id


class BriefFieldExtension(OpenApiSerializerFieldExtension):
    target_class = BriefField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> Any:
        if direction == "request":  # read-only: dropped from request components, but mapped first
            return build_basic_type(OpenApiTypes.OBJECT)
        return auto_schema.resolve_serializer(self.target.brief, direction).ref
