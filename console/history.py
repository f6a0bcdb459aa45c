"""The change log's reads, shared by /changes/ and the object pages' history sections.

A person sees the change records of the objects they may see: the global view permission on change records
(cmdb.selectors.change_list) shows every row; otherwise a record is shown when its object is visible through
the person's site / cluster / tenant grants (or the global view permission of its model, or it is catalog data).
Records of deleted objects are then hidden: their scope can no longer be told. The node page's history and
`/changes/?object=node:<hostname>` run the same query, so they show the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q, QuerySet, Value
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from cmdb.models import ChangeAction, ChangeRecord, TrackedModel
from cmdb.permissions import CATALOG_MODELS, SCOPE_MODELS, SCOPE_PATHS, has_global, user_scope_ids
from cmdb.selectors import change_list
from gpuops.context import ChangeSource
from inventory_agents.models import Report
from workflows.permissions import tickets_visible
from workflows.registry import workflow_or_none
from workflows.selectors import ticket_get

PAGE_SIZE = 50
MAX_DIFF_FIELDS = 20  # a create record lists every field; the rest stays behind "+N more"

# The natural key of the models people name objects by: `?object=node:sh1-h100-0001`, and how a foreign key
# value in a diff is shown (`node_id: 12 -> sh1-h100-0007`).
NATURAL_KEYS: dict[str, str] = {
    "node": "hostname",
    "accelerator": "serial",
    "switch": "name",
    "site": "code",
    "fabric": "name",
    "cluster": "name",
    "tenant": "slug",
    "vendor": "slug",
    "acceleratormodel": "name",
    "servermodel": "name",
    "partmodel": "sku",
    "partitem": "serial",
    "driverpackage": "version",
}

FILTERS = ("object", "type", "actor", "source", "action", "ticket", "correlation", "from", "to", "q")


class FilterError(Exception):
    """A filter value the change log cannot use: shown on a 400 page with the field and the reason."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"{name}: {reason}")


# --- what a person may see ---------------------------------------------------------------------------------------


def tracked_models() -> list[type[TrackedModel]]:
    """Every concrete model whose writes become change records."""
    return [m for m in apps.get_models() if issubclass(m, TrackedModel) and not m._meta.abstract]


@dataclass
class ViewScope:
    """The user's view grants, read once per page: `restrict()` per model would read the guardian tables again
    for each of the two dozen models a change log or an object page touches."""

    user: AbstractBaseUser
    ids: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, user: AbstractBaseUser) -> ViewScope:
        scope = cls(user=user)
        # A superuser sees every row (q() returns Q() before looking at ids): no grants to read.
        if user.is_authenticated and user.is_active and not user.is_superuser:
            scope.ids = {name: user_scope_ids(user, name, "view") for name in SCOPE_MODELS}
        return scope

    def q(self, model: type[models.Model]) -> Q | None:
        """A filter on `model` for the rows the user may see: Q() for all, None for none."""
        if not (self.user.is_authenticated and self.user.is_active):
            return None
        label = model._meta.label_lower
        if has_global(self.user, model, "view") or label in CATALOG_MODELS:
            return Q()
        condition: Q | None = None
        for scope, orm_path in SCOPE_PATHS.get(label, {}).items():
            if ids := self.ids.get(scope):
                part = Q(**{"pk__in" if orm_path == "pk" else f"{orm_path}__in": ids})
                condition = part if condition is None else condition | part
        return condition

    def filter(self, queryset: QuerySet) -> QuerySet:
        condition = self.q(queryset.model)
        return queryset.none() if condition is None else queryset.filter(condition)


def changes_visible(scope: ViewScope) -> QuerySet[ChangeRecord]:
    """The change records of the objects `scope` may see (see the module docstring)."""
    base = change_list(user=scope.user)
    if has_global(scope.user, ChangeRecord, "view"):
        return base
    condition = Q(pk__in=base.values("pk"))  # direct grants on records, if anyone has some
    for model in tracked_models():
        within = scope.q(model)
        if within is None:
            continue
        ct = ContentType.objects.get_for_model(model)
        if within == Q():
            condition |= Q(content_type_id=ct.pk)
        else:
            condition |= Q(content_type_id=ct.pk, object_id__in=model._default_manager.filter(within).values("pk"))
    return ChangeRecord.objects.select_related("actor", "content_type").filter(condition)


def object_changes(scope: ViewScope, obj: models.Model) -> QuerySet[ChangeRecord]:
    """The visible change records of one object, newest first (what `?object=<type>:<key>` shows)."""
    model = type(obj)
    ct = ContentType.objects.get_for_model(model)
    if has_global(scope.user, ChangeRecord, "view"):
        return changes_visible(scope).filter(content_type_id=ct.pk, object_id=obj.pk).order_by("-at", "-id")
    # changes_visible() with only the term for this object's model: the others require another content type,
    # and their subqueries over every tracked table are what made an object page slow on a large fleet.
    own = {"content_type_id": ct.pk, "object_id": obj.pk}
    # Direct grants on records, narrowed to this object's: unnarrowed, the grant check casts every record's id.
    condition = Q(pk__in=change_list(user=scope.user).filter(**own).values("pk"))
    within = scope.q(model) if issubclass(model, TrackedModel) else None
    if within == Q():
        condition = Q()
    elif within is not None:
        condition |= Q(object_id__in=model._default_manager.filter(within, pk=obj.pk).values("pk"))
    return ChangeRecord.objects.select_related("actor", "content_type").filter(condition, **own).order_by("-at", "-id")


def object_filter_value(obj: models.Model) -> str:
    """The `?object=` value naming `obj`: its natural key where it has one, else its id."""
    name = obj._meta.model_name
    key = NATURAL_KEYS.get(name)
    value = getattr(obj, key, None) if key else None
    return f"{name}:{value}" if value else f"{name}:{obj.pk}"


# --- readable diffs ----------------------------------------------------------------------------------------------


@dataclass
class DiffLine:
    field: str
    before: Any
    after: Any
    before_label: str = ""  # the related object's name for a foreign key
    after_label: str = ""


@dataclass
class ChangeRow:
    record: ChangeRecord
    model: str
    lines: list[DiffLine]
    hidden: int
    object_url: str
    ticket_ref: str = ""
    ticket_url: str = ""
    report_url: str = ""


# The console's pages of objects, by model: where a change record's object links to (by its current key).
OBJECT_PAGES = {"node": "/nodes/{}/", "accelerator": "/accelerators/{}/"}


def change_rows(records: list[ChangeRecord], scope: ViewScope) -> list[ChangeRow]:
    """Records as diffs: foreign keys named (when the related object is visible), the ticket or agent report
    behind each correlation id linked. Three queries (names, tickets, reports) whatever the records hold, none
    for an empty page."""
    if not records:
        return []
    fk_targets: dict[type[models.Model], set[int]] = defaultdict(set)
    fk_fields: dict[tuple[type[models.Model], str], type[models.Model]] = {}
    for record in records:
        model = record.content_type.model_class()
        if model is None:
            continue
        if record.content_type.model in OBJECT_PAGES and record.action != ChangeAction.DELETE:
            fk_targets[model].add(record.object_id)  # its current name, for the link to its page
        by_attname = {f.attname: f for f in model._meta.concrete_fields}
        for name, pair in (record.changes or {}).items():
            f = by_attname.get(name)
            if f is None or not f.is_relation or f.related_model._meta.model_name not in NATURAL_KEYS:
                continue
            fk_fields[(model, name)] = f.related_model
            fk_targets[f.related_model].update(v for v in _pair(pair) if isinstance(v, int))
    names = _natural_names(scope, fk_targets)

    # The lookups below always run (a never-matching sentinel keeps an IN list non-empty), so a page runs the
    # same queries whatever its records hold.
    correlation_ids = {r.correlation_id for r in records if r.correlation_id}
    tickets = {
        c: (pk, type_)
        for pk, type_, c in tickets_visible(scope.user)
        .filter(correlation_id__in=[*correlation_ids, ""])
        .values_list("pk", "type", "correlation_id")
    }
    report_ids = [uuid.UUID(int=0), *(c for c in correlation_ids - set(tickets) if _is_uuid(c))]
    reports = {str(pk) for pk in scope.filter(Report.objects.filter(pk__in=report_ids)).values_list("pk", flat=True)}

    rows = []
    for record in records:
        model_cls = record.content_type.model_class()
        model = record.content_type.model
        own_names = names.get(model, {}) if model in OBJECT_PAGES else {}
        items = sorted((record.changes or {}).items())
        if record.action != ChangeAction.UPDATE:
            # A create or delete lists every field: the empty ones say nothing.
            side = 1 if record.action == ChangeAction.CREATE else 0
            items = [(k, v) for k, v in items if _pair(v)[side] not in ("", None, [], {})]
        lines = []
        for name, pair in items[:MAX_DIFF_FIELDS]:
            before, after = _pair(pair)
            related = fk_fields.get((model_cls, name))
            lookup = names.get(related._meta.model_name, {}) if related else {}
            lines.append(
                DiffLine(
                    field=name[:-3] if related and name.endswith("_id") else name,
                    before=before,
                    after=after,
                    before_label=lookup.get(before, "") if isinstance(before, int) else "",
                    after_label=lookup.get(after, "") if isinstance(after, int) else "",
                )
            )
        row = ChangeRow(
            record=record,
            model=model,
            lines=lines,
            hidden=max(0, len(items) - MAX_DIFF_FIELDS),
            object_url=OBJECT_PAGES[model].format(current) if (current := own_names.get(record.object_id)) else "",
        )
        if record.correlation_id in tickets:
            pk, type_ = tickets[record.correlation_id]
            wf = workflow_or_none(type_)
            row.ticket_ref, row.ticket_url = f"{wf.prefix if wf else 'TKT'}-{pk}", f"/tickets/{pk}/"
        elif record.correlation_id in reports:
            row.report_url = f"/api/agent/reports/{record.correlation_id}/"
        rows.append(row)
    return rows


def _natural_names(scope: ViewScope, wanted: dict[type[models.Model], set[int]]) -> dict[str, dict[int, str]]:
    """{model name: {pk: natural key}} of the visible objects among `wanted`, in one UNION query over the models
    asked for. Compiling a part costs more than its index probe, so models with nothing wanted are left out; when
    none is left, one part with id 0 (which no row has) keeps the query, so a page's query count does not depend
    on what its records hold."""
    parts = []
    sentinel = None
    for model in tracked_models():
        name = model._meta.model_name
        if name not in NATURAL_KEYS:
            continue
        ids = wanted.get(model)
        if not ids and (sentinel is not None or parts):
            continue
        qs = scope.filter(model._default_manager.filter(pk__in=sorted(ids) if ids else [0]))
        if qs.query.is_empty():
            continue
        labelled = qs.order_by().annotate(console_model=Value(name))
        part = labelled.values_list("console_model", "pk", NATURAL_KEYS[name])
        if ids:
            parts.append(part)
        else:
            sentinel = part
    if not parts and sentinel is not None:
        parts.append(sentinel)
    names: dict[str, dict[int, str]] = defaultdict(dict)
    if parts:
        for kind, pk, key in parts[0].union(*parts[1:], all=True):
            if key is not None:  # a card without a serial has no name to show
                names[kind][pk] = str(key)
    return names


def _pair(value: Any) -> tuple[Any, Any]:
    if isinstance(value, list | tuple) and len(value) == 2:
        return value[0], value[1]
    return None, value


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# --- the change log page -----------------------------------------------------------------------------------------


def _model_named(name: str) -> type[TrackedModel] | None:
    name = name.strip().lower()
    for model in tracked_models():
        if name in (model._meta.model_name, model._meta.label_lower):
            return model
    return None


def _when(name: str, value: str, *, end: bool) -> tuple[dt.datetime, bool]:
    """An ISO date or date-time, and whether it was a bare date (as `to`: up to the end of that day)."""
    try:
        # parse_datetime() reads a bare date as midnight: tell the two apart first.
        day = parse_date(value) if len(value) == 10 else None
        moment = None if day else parse_datetime(value)
    except ValueError:
        moment = day = None
    if moment is None and day is not None:
        moment = dt.datetime.combine(day + dt.timedelta(days=1) if end else day, dt.time.min)
    if moment is None:
        raise FilterError(name, f"{value!r} is not a date (YYYY-MM-DD) or date-time (YYYY-MM-DDTHH:MM).")
    moment = timezone.make_aware(moment, dt.UTC) if timezone.is_naive(moment) else moment
    return moment, day is not None


_TICKET_REF = re.compile(r"^(?:[A-Za-z]+-)?(\d{1,18})$")


def changes_filter(qs: QuerySet[ChangeRecord], params: dict[str, str], scope: ViewScope) -> QuerySet[ChangeRecord]:
    """Apply the change log's filters; FilterError on a value it cannot use."""
    if value := params.get("type"):
        model = _model_named(value)
        if model is None:
            raise FilterError("type", f"Unknown object type {value!r}.")
        qs = qs.filter(content_type=ContentType.objects.get_for_model(model))
    if value := params.get("object"):
        kind, sep, key = value.partition(":")
        if not sep or not key.strip():
            raise FilterError("object", "Give a type and an id or name, e.g. node:sh1-h100-0001 or node:42.")
        model = _model_named(kind)
        if model is None:
            raise FilterError("object", f"Unknown object type {kind!r}.")
        key = key.strip()
        qs = qs.filter(content_type=ContentType.objects.get_for_model(model))
        natural = NATURAL_KEYS.get(model._meta.model_name)
        if key.isdigit() and len(key) <= 18:
            qs = qs.filter(object_id=int(key))
        else:
            named = model._default_manager.filter(**{natural: key}) if natural else model._default_manager.none()
            found = list(named.values_list("pk", flat=True)[:1])
            # An object that no longer exists (or never did) is matched by the name it had when changed.
            qs = qs.filter(object_id=found[0]) if found else qs.filter(object_repr=key)
    if value := params.get("actor"):
        qs = qs.filter(Q(actor__username=value) | Q(actor_repr=value))
    if value := params.get("source"):
        known = [v for v, _ in ChangeSource.CHOICES]
        if value not in known:
            raise FilterError("source", f"Unknown source {value!r}; one of {', '.join(known)}.")
        qs = qs.filter(source=value)
    if value := params.get("action"):
        if value not in ChangeAction.values:
            raise FilterError("action", f"Unknown action {value!r}; one of {', '.join(ChangeAction.values)}.")
        qs = qs.filter(action=value)
    if value := params.get("ticket"):
        match = _TICKET_REF.match(value.strip())
        ticket = ticket_get(scope.user, int(match.group(1))) if match else None
        if ticket is None:
            raise FilterError("ticket", f"No ticket {value!r} that you may see.")
        qs = qs.filter(correlation_id=ticket.correlation_id)
    if value := params.get("correlation"):
        qs = qs.filter(correlation_id=value.strip())
    start = _when("from", params["from"], end=False)[0] if params.get("from") else None
    end, whole_day = _when("to", params["to"], end=True) if params.get("to") else (None, False)
    if start and end and (start >= end if whole_day else start > end):
        raise FilterError("to", "The end of the range is before its start.")
    if start:
        qs = qs.filter(at__gte=start)
    if end:
        qs = qs.filter(at__lt=end) if whole_day else qs.filter(at__lte=end)
    if value := params.get("q"):
        qs = qs.filter(Q(object_repr__icontains=value) | Q(reason__icontains=value))
    return qs


def before_cursor(value: str) -> tuple[dt.datetime, int]:
    at, sep, pk = value.rpartition("|")
    try:
        moment = parse_datetime(at) if sep else None
    except ValueError:  # well formed but no real date-time
        moment = None
    if moment is None or not pk.isdigit() or len(pk) > 18:
        raise FilterError("before", "Not a page cursor of this list; start again from the first page.")
    return moment, int(pk)


def value_text(value: Any) -> str:
    """A diff value as people read it (used by the console_diff template filter)."""
    if value is None:
        return "∅"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = json.dumps(value, separators=(",", ":"), sort_keys=True) if isinstance(value, dict | list) else str(value)
    return text if len(text) <= 160 else text[:159] + "…"
