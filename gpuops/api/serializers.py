"""Serializer bases: brief nested relations, bulk lists that resolve related ids per column, and no per-row
uniqueness queries (the writer checks uniqueness for the whole batch in one query per constraint).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model
from rest_framework import serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.serializers import LIST_SERIALIZER_KWARGS
from rest_framework.settings import api_settings
from rest_framework.validators import UniqueValidator

from .fields import MAX_ID, RefField
from .writers import has_row_version

# Field classes (exact types) whose to_representation is a plain coercion; see BaseModelSerializer._output_plan.
_FAST_KINDS: dict[type, str] = {
    serializers.CharField: "str",
    serializers.SlugField: "str",
    serializers.IntegerField: "int",
    serializers.BooleanField: "bool",
    serializers.ChoiceField: "choice",
}


def _int_or_none(value: Any) -> int | None:
    value = RefField.coerce(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and 0 < value <= MAX_ID:
        return value
    return None


class BulkListSerializer(serializers.ListSerializer):
    """A list of rows validated against a list of instances (bulk update) or none (bulk create).

    Before any row is validated, every RefField column is resolved with one query (`in_bulk`), so validating
    1,000 rows that point at 1,000 nodes costs one query, not 1,000.
    """

    def _prefetch_refs(self, data: list[Any]) -> dict[str, dict[int, Model]]:
        cache: dict[str, dict[int, Model]] = {}
        for name, field in self.child.fields.items():
            if field.read_only:
                continue
            many = isinstance(field, serializers.ManyRelatedField)
            relation = field.child_relation if many else field
            if not isinstance(relation, RefField):
                continue
            pks: set[int] = set()
            for row in data:
                if not isinstance(row, dict) or name not in row:
                    continue
                values = row[name] if many and isinstance(row[name], list) else [row[name]]
                pks.update(pk for pk in map(_int_or_none, values) if pk is not None)
            cache[name] = relation.get_queryset().in_bulk(pks) if pks else {}
        return cache

    def to_internal_value(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            message = self.error_messages["not_a_list"].format(input_type=type(data).__name__)
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [message]}, code="not_a_list")
        if not data:
            raise serializers.ValidationError(
                {api_settings.NON_FIELD_ERRORS_KEY: ["Send at least one row."]}, code="empty"
            )
        instances = list(self.instance) if self.instance is not None else None
        self._context["ref_cache"] = self._prefetch_refs(data)
        ret: list[Any] = []
        errors: list[Any] = []
        try:
            for idx, item in enumerate(data):
                self.child.instance = instances[idx] if instances is not None else None
                self.child.initial_data = item
                try:
                    ret.append(self.child.run_validation(item))
                    errors.append({})
                except serializers.ValidationError as exc:
                    errors.append(exc.detail)
        finally:
            self._context.pop("ref_cache", None)
            self.child.instance = None
        if any(errors):
            raise serializers.ValidationError(errors)
        return ret


class BaseModelSerializer(serializers.ModelSerializer):
    """ModelSerializer for the API bases.

    - foreign keys are RefFields (id in, brief object out);
    - `version` is readable and may be sent back: a stale value is answered with 412 (like If-Match);
    - uniqueness is left to the writer's batch check (DRF would run one query per unique field per row).
    """

    serializer_related_field = RefField

    @classmethod
    def many_init(cls, *args: Any, **kwargs: Any) -> BulkListSerializer:
        # Same as DRF's many_init, with BulkListSerializer for every subclass without declaring it in each Meta.
        list_kwargs: dict[str, Any] = {}
        for key in ("allow_empty", "max_length", "min_length"):
            if key in kwargs:
                list_kwargs[key] = kwargs.pop(key)
        child = cls(*args, **kwargs)
        list_kwargs["child"] = child
        list_kwargs.update({k: v for k, v in kwargs.items() if k in LIST_SERIALIZER_KWARGS})
        return BulkListSerializer(*args, **list_kwargs)

    def build_standard_field(self, field_name: str, model_field: Any) -> tuple[type, dict[str, Any]]:
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        validators = [v for v in kwargs.get("validators", []) if not isinstance(v, UniqueValidator)]
        if "validators" in kwargs:
            kwargs["validators"] = validators
        return field_class, kwargs

    def build_relational_field(self, field_name: str, relation_info: Any) -> tuple[type, dict[str, Any]]:
        field_class, kwargs = super().build_relational_field(field_name, relation_info)
        kwargs["validators"] = [v for v in kwargs.get("validators", []) if not isinstance(v, UniqueValidator)]
        if not kwargs["validators"]:
            kwargs.pop("validators")
        return field_class, kwargs

    # --- output ----------------------------------------------------------------------------------------------

    def _output_plan(self) -> list[tuple[str, str | None, str, serializers.Field]]:
        """Per field: (name, attribute, kind, field). Plain columns and brief relations are read directly;
        everything else (dotted sources, method fields, dates, JSON) goes through DRF's own field code.

        Why: a 1,000-row page calls get_attribute + to_representation ~30,000 times; for the plain kinds below
        that machinery reduces to a getattr and a type coercion, and skipping it is a third of the render.
        """
        plan = self.__dict__.get("_plan_cache")
        if plan is None:
            plan = []
            for field in self._readable_fields:
                attrs = field.source_attrs
                simple = len(attrs) == 1 and field.source != "*"
                kind = _FAST_KINDS.get(type(field)) if simple else None
                if kind is None and simple and isinstance(field, RefField):
                    kind = "ref"
                plan.append((field.field_name, attrs[0] if kind else None, kind or "drf", field))
            self.__dict__["_plan_cache"] = plan
        return plan

    def to_representation(self, instance: Any) -> dict[str, Any]:
        ret: dict[str, Any] = {}
        for name, attr, kind, field in self._output_plan():
            if attr is None:
                try:
                    attribute = field.get_attribute(instance)
                except SkipField:
                    continue
                check = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
                ret[name] = None if check is None else field.to_representation(attribute)
                continue
            value = getattr(instance, attr)
            if value is None:
                ret[name] = None
            elif kind == "str":
                ret[name] = value if type(value) is str else str(value)
            elif kind == "int":
                ret[name] = int(value)
            elif kind == "bool":
                ret[name] = field.to_representation(value) if type(value) is not bool else value
            elif kind == "choice":
                ret[name] = value if value == "" else field.choice_strings_to_values.get(str(value), value)
            else:  # ref
                ret[name] = field.brief.represent(value)
        return ret

    def get_validators(self) -> list[Any]:
        return []

    def get_uniqueness_extra_kwargs(self, field_names: Any, declared_fields: Any, extra_kwargs: Any) -> Any:
        return extra_kwargs, {}

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        model = self.Meta.model
        if "version" in fields and has_row_version(model):
            fields["version"] = serializers.IntegerField(
                required=False,
                min_value=1,
                help_text="Bumped on every change. Send the version you read to refuse overwriting a newer one.",
            )
        # Model order (declared relations first would scatter them), computed extras after, bookkeeping last.
        own = [f.name for f in (*model._meta.concrete_fields, *model._meta.many_to_many)]
        tail = ["created_at", "updated_at", "version"]
        rank = {name: i for i, name in enumerate(n for n in own if n not in tail)}

        def key(name: str) -> tuple[int, int]:
            if name in tail:
                return (2, tail.index(name))
            return (0, rank[name]) if name in rank else (1, 0)

        return dict(sorted(fields.items(), key=lambda item: key(item[0])))
