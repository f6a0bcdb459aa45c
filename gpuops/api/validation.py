"""Model-level validation of many unsaved rows at once: check constraints and uniqueness.

Django's `Model.validate_constraints()` costs one query per constraint per row (even a CheckConstraint is
evaluated with a `SELECT 1 WHERE ...`). For a 1,000-row bulk write that is thousands of round trips, so:

- check constraints are evaluated in Python with SQL's three-valued logic (a CHECK fails only when its
  condition is FALSE; NULL passes), for the lookups our constraints use; anything else falls back to Django;
- unique fields / unique_together / UniqueConstraints are checked for the whole batch with one query per
  constraint (duplicates inside the batch are found in memory).

The database constraints stay the last line of defence against concurrent writers (an IntegrityError becomes a
409 Conflict).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import CheckConstraint, F, Model, Q, UniqueConstraint

Errors = dict[int, dict[str, list[str]]]

UNKNOWN = None  # SQL NULL truth value


class Unsupported(Exception):
    """The condition uses something the evaluator does not model (joins, functions)."""


def add_error(errors: Errors, row: int, field: str, message: str) -> None:
    errors.setdefault(row, {}).setdefault(field, []).append(message)


def _attname(model: type[Model], name: str) -> str:
    try:
        return model._meta.get_field(name).attname
    except FieldDoesNotExist as exc:
        raise Unsupported(name) from exc


_OPS = {"exact", "isnull", "gt", "gte", "lt", "lte", "in"}


def _lookup(model: type[Model], lookup: str, value: Any, obj: Model) -> bool | None:
    parts = lookup.split("__")
    op = parts.pop() if len(parts) > 1 and parts[-1] in _OPS else "exact"
    if len(parts) != 1:
        raise Unsupported(lookup)
    left = getattr(obj, _attname(model, parts[0]))
    if op == "isnull":
        return (left is None) == bool(value)
    if isinstance(value, F):
        right = getattr(obj, _attname(model, value.name))
    elif isinstance(value, Model):
        right = value.pk
    elif hasattr(value, "resolve_expression"):
        raise Unsupported(lookup)
    else:
        right = value
    if op == "in":
        return UNKNOWN if left is None else left in right
    if left is None or right is None:
        return UNKNOWN
    if op == "exact":
        return left == right
    return {"gt": left > right, "gte": left >= right, "lt": left < right, "lte": left <= right}[op]


def evaluate(condition: Q, obj: Model) -> bool | None:
    """Truth value of `condition` for an in-memory object: True, False or None (SQL NULL)."""
    model = type(obj)
    values: list[bool | None] = []
    for child in condition.children:
        if isinstance(child, Q):
            values.append(evaluate(child, obj))
        elif isinstance(child, tuple):
            values.append(_lookup(model, child[0], child[1], obj))
        else:
            raise Unsupported(repr(child))
    if condition.connector == Q.AND:
        result = False if False in values else (UNKNOWN if UNKNOWN in values else True)
    elif condition.connector == Q.OR:
        result = True if True in values else (UNKNOWN if UNKNOWN in values else False)
    else:
        raise Unsupported(condition.connector)
    if condition.negated:
        return None if result is None else not result
    return result


def referenced_fields(condition: Q) -> list[str]:
    names: list[str] = []
    for child in condition.children:
        sub = referenced_fields(child) if isinstance(child, Q) else [child[0].split("__")[0]]
        names.extend(n for n in sub if n not in names)
    return names


def check_constraints(
    model: type[Model], rows: Iterable[tuple[int, Model]], errors: Errors, messages: dict[str, str] | None = None
) -> None:
    """Add an error to every row that violates one of the model's CheckConstraints."""
    messages = messages or {}
    checks = [c for c in model._meta.constraints if isinstance(c, CheckConstraint)]
    if not checks:
        return
    for idx, obj in rows:
        for check in checks:
            try:
                ok = evaluate(check.condition, obj) is not False
            except Unsupported:
                try:
                    check.validate(model, obj)
                    ok = True
                except DjangoValidationError:
                    ok = False
            if not ok:
                message = messages.get(check.name) or check.get_violation_error_message()
                fields = referenced_fields(check.condition) or ["non_field_errors"]
                add_error(errors, idx, fields[-1], message)


@dataclass(frozen=True)
class UniqueSpec:
    names: tuple[str, ...]
    attnames: tuple[str, ...]
    condition: Q | None
    message: str | None


def unique_specs(model: type[Model]) -> list[UniqueSpec]:
    specs: list[UniqueSpec] = []
    for field in model._meta.concrete_fields:
        if field.unique and not field.primary_key:
            specs.append(UniqueSpec((field.name,), (field.attname,), None, None))
    for together in model._meta.unique_together:
        specs.append(UniqueSpec(tuple(together), tuple(_attname(model, n) for n in together), None, None))
    for constraint in model._meta.constraints:
        if isinstance(constraint, UniqueConstraint) and constraint.fields and not constraint.expressions:
            default = constraint.default_violation_error_message % {"name": constraint.name}
            custom = constraint.get_violation_error_message()
            specs.append(
                UniqueSpec(
                    tuple(constraint.fields),
                    tuple(_attname(model, n) for n in constraint.fields),
                    constraint.condition,
                    custom if custom != default else None,
                )
            )
    return specs


def _chunks(values: Sequence[Any], size: int = 500) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def check_unique(model: type[Model], rows: Sequence[tuple[int, Model]], errors: Errors) -> None:
    """Add an error to every row that would break a uniqueness rule, against the batch and the database.

    Rows of the batch that already exist (updates) are compared with their new values, and their stored values
    are ignored (they are being replaced).
    """
    own_pks = {obj.pk for _, obj in rows if obj.pk is not None}
    verbose = model._meta.verbose_name
    for spec in unique_specs(model):
        keyed: dict[tuple[Any, ...], int] = {}
        for idx, obj in rows:
            if spec.condition is not None:
                try:
                    if evaluate(spec.condition, obj) is not True:
                        continue  # outside the partial index
                except Unsupported:
                    continue  # the database decides
            key = tuple(getattr(obj, a) for a in spec.attnames)
            if any(v is None for v in key):
                continue  # NULLs are distinct
            if key in keyed:
                add_error(
                    errors,
                    idx,
                    spec.names[-1],
                    spec.message or f"Duplicates row {keyed[key]} of this request ({', '.join(spec.names)}).",
                )
            else:
                keyed[key] = idx
        if not keyed:
            continue
        pivot = spec.attnames[0]
        pivots = sorted({k[0] for k in keyed}, key=str)
        for chunk in _chunks(pivots):
            queryset = model._default_manager.filter(**{f"{pivot}__in": chunk})
            if spec.condition is not None:
                queryset = queryset.filter(spec.condition)
            for *values, pk in queryset.values_list(*spec.attnames, "pk"):
                idx = keyed.get(tuple(values))
                if idx is None or pk in own_pks:
                    continue
                if spec.message:
                    message = spec.message
                elif len(spec.names) == 1:
                    message = f"A {verbose} with this {spec.names[0]} already exists."
                else:
                    message = f"A {verbose} with this {', '.join(spec.names)} already exists."
                add_error(errors, idx, spec.names[-1], message)
