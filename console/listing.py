"""The machinery of the console's inventory lists: columns, ?cols= / ?sort= / ?page= parsing, filters through the
API's filter sets, pagination and streamed CSV.

A list is a `ListSpec`: the scoped rows, the API filter set that narrows them (the same query parameters as the
API), and its columns. Every column renders a `Cell` - the same text on screen and in the CSV - so the export is
exactly what the page shows, on every page of the filtered set.
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import django_filters as df
from django.contrib.auth.models import AbstractBaseUser
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.timesince import timesince

PER_PAGE_DEFAULT = 50
PER_PAGE_MAX = 500
#: query parameters the lists read themselves; everything else goes to the filter set (or is ignored)
LIST_PARAMS = ("cols", "sort", "page", "per_page", "format")
CSV_CHUNK = 2000


class ListError(Exception):
    """Bad values of known query parameters: {parameter: [reasons]} (a 400 page names each)."""

    def __init__(self, errors: Mapping[str, Sequence[str]]) -> None:
        super().__init__(errors)
        self.errors = {k: list(v) for k, v in errors.items()}


@dataclass(frozen=True)
class Cell:
    """One value as shown: plain text, a link, or a badge (`tone` is an app.css tone, e.g. "waiting")."""

    text: str = ""
    href: str = ""
    tone: str = ""
    title: str = ""
    muted: bool = False
    mono: bool = False
    csv: str | None = None  # when the export wants more than the screen (a full timestamp for "3 min ago")

    @property
    def export(self) -> str:
        return self.text if self.csv is None else self.csv


BLANK = Cell()
DASH = Cell("\u2013", muted=True, csv="")  # an en dash: "nothing here", quietly


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    cell: Callable[[Any], Cell]
    #: order_by fields for ?sort=key (empty: not sortable); `-key` reverses each
    sort: tuple[str, ...] = ()
    numeric: bool = False


@dataclass(frozen=True)
class FilterField:
    """An input of the filter bar; `name` is a filter of the list's API filter set."""

    name: str
    label: str
    kind: str = "text"  # text | choice | bool
    choices: Sequence[tuple[str, str]] = ()
    placeholder: str = ""


@dataclass
class ListSpec:
    name: str  # the url name, e.g. "node-list"
    title: str
    noun: str  # plural, e.g. "nodes"
    singular: str
    columns: Sequence[Column]
    default_cols: Sequence[str]
    default_sort: str
    rows: Callable[[AbstractBaseUser], Any]  # the user's scoped rows (a queryset)
    filterset_class: type | None = None
    filter_fields: Sequence[FilterField] = ()
    #: after filtering (annotations, joins), so the filter set sees the plain model
    decorate: Callable[[QuerySet], QuerySet] | None = None
    #: instead of a filter set (rows that are not a queryset, e.g. the stock overview): (rows, GET) -> rows
    select: Callable[[Any, QueryDict], Any] | None = None
    #: sort of in-memory rows: (rows, column key, descending) -> rows
    sort_rows: Callable[[list, str, bool], list] | None = None
    notes: Callable[[AbstractBaseUser], list[str]] | None = None
    by_key: dict[str, Column] = field(init=False)

    def __post_init__(self) -> None:
        self.by_key = {c.key: c for c in self.columns}
        assert set(self.default_cols) <= set(self.by_key), self.name
        assert self.default_sort.lstrip("-") in self.by_key, self.name


@dataclass(frozen=True)
class ListState:
    cols: tuple[str, ...]
    sort: str
    page: int
    per_page: int
    format: str


def _tokens(values: Iterable[str]) -> list[str]:
    return [t.strip() for v in values for t in v.split(",") if t.strip()]


def _positive_int(errors: dict, name: str, raw: str | None, default: int, maximum: int | None = None) -> int:
    if raw in (None, ""):
        return default
    if not raw.isdigit() or int(raw) < 1:
        errors[name] = [f"A whole number of 1 or more, not {raw[:40]!r}."]
        return default
    value = int(raw)
    if maximum is not None and value > maximum:
        errors[name] = [f"At most {maximum}."]
        return default
    return value


def state_parse(spec: ListSpec, params: QueryDict) -> ListState:
    """The list's own parameters, validated (ListError names each bad one)."""
    errors: dict[str, list[str]] = {}
    cols = _tokens(params.getlist("cols"))
    unknown = [c for c in cols if c not in spec.by_key]
    if unknown:
        errors["cols"] = [f"Unknown column {', '.join(map(repr, unknown))}; choose from {', '.join(spec.by_key)}."]
    cols = list(dict.fromkeys(c for c in cols if c in spec.by_key)) or list(spec.default_cols)
    sort = (params.get("sort") or "").strip() or spec.default_sort
    column = spec.by_key.get(sort.lstrip("-"))
    if column is None or not (column.sort or spec.sort_rows):
        sortable = [c.key for c in spec.columns if c.sort or spec.sort_rows]
        errors["sort"] = [f"Cannot sort by {sort[:60]!r}; use one of {', '.join(sortable)} (with - to reverse)."]
        sort = spec.default_sort
    page = _positive_int(errors, "page", params.get("page"), 1)
    per_page = _positive_int(errors, "per_page", params.get("per_page"), PER_PAGE_DEFAULT, PER_PAGE_MAX)
    fmt = (params.get("format") or "html").strip().lower()
    if fmt not in ("html", "csv"):
        errors["format"] = [f"Either html or csv, not {fmt[:20]!r}."]
    if errors:
        raise ListError(errors)
    return ListState(cols=tuple(cols), sort=sort, page=page, per_page=per_page, format=fmt)


BOOLEAN_VALUES = {"true", "false", "1", "0"}


def _boolean_errors(filterset_class: type, data: Mapping[str, str]) -> dict[str, list[str]]:
    """The filter set's yes/no filters read any other word as "no filter"; on a page that hides a typo, so it
    is a 400 here (the values that filter mean what they mean in the API)."""
    return {
        name: [f"Either true or false, not {value[:40]!r}."]
        for name, value in data.items()
        if isinstance(filterset_class.base_filters.get(name), df.BooleanFilter)
        and value
        and value.lower() not in BOOLEAN_VALUES
    }


def rows_select(spec: ListSpec, user: AbstractBaseUser, params: QueryDict, state: ListState) -> Any:
    """The scoped rows narrowed by the filters and sorted (a queryset or a list)."""
    rows = spec.rows(user)
    if spec.select is not None:
        rows = spec.select(rows, params)
    elif spec.filterset_class is not None:
        data = {k: params.get(k) for k in params if k not in LIST_PARAMS}
        filterset = spec.filterset_class(data=data, queryset=rows)
        errors = {k: [str(e) for e in v] for k, v in filterset.errors.items()}
        errors.update(_boolean_errors(spec.filterset_class, data))
        if errors:
            raise ListError(errors)
        rows = filterset.qs
    if spec.decorate is not None:
        rows = spec.decorate(rows)
    descending = state.sort.startswith("-")
    key = state.sort.lstrip("-")
    if spec.sort_rows is not None:
        return spec.sort_rows(list(rows), key, descending)
    order = [f"-{f}" if descending else f for f in spec.by_key[key].sort]
    return rows.order_by(*order, "-pk" if descending else "pk")  # pk: a stable order across pages


def query_without(params: QueryDict, *names: str, **values: str) -> str:
    """The query string with `names` dropped and `values` set (cols kept as one comma list)."""
    q = params.copy()
    for name in (*names, *values):
        q.pop(name, None)
    cols = _tokens(params.getlist("cols"))
    if "cols" not in names and "cols" not in values and cols:
        q["cols"] = ",".join(cols)
    for name, value in values.items():
        q[name] = value
    return q.urlencode(safe=",")


def _csv_safe(value: str) -> str:
    # A cell starting with = + - @ is a formula to a spreadsheet; a leading quote keeps it text.
    if value[:1] in ("=", "+", "-", "@") and not value.lstrip("-").replace(".", "", 1).isdigit():
        return "'" + value
    return value


class _Echo:
    def write(self, value: str) -> str:
        return value


def csv_response(spec: ListSpec, rows: Any, cols: Sequence[str]) -> StreamingHttpResponse:
    """Every row of the filtered set (not one page), the shown columns, streamed in chunks."""
    columns = [spec.by_key[c] for c in cols]
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow([c.label for c in columns])
        iterable = rows.iterator(chunk_size=CSV_CHUNK) if isinstance(rows, QuerySet) else rows
        for row in iterable:
            yield writer.writerow([_csv_safe(c.cell(row).export) for c in columns])

    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{spec.noun}-{stamp}.csv"'
    return response


def error_response(request: HttpRequest, spec: ListSpec, error: ListError) -> HttpResponse:
    context = {"spec": spec, "errors": sorted(error.errors.items())}
    return render(request, "console/list_error.html", context, status=400)


def list_page(request: HttpRequest, spec: ListSpec) -> HttpResponse:
    """The list view of `spec`: HTML (one page) or ?format=csv (all rows), 400 naming any bad parameter."""
    params = request.GET
    try:
        state = state_parse(spec, params)
        rows = rows_select(spec, request.user, params, state)
        if state.format == "csv":
            return csv_response(spec, rows, state.cols)
        paginator = Paginator(rows, state.per_page)
        if state.page > max(paginator.num_pages, 1):
            raise ListError({"page": [f"There are {paginator.num_pages} page(s) of these {spec.noun}."]})
        page = paginator.page(state.page)
    except ListError as exc:
        return error_response(request, spec, exc)
    return render(request, "console/list.html", _context(spec, params, state, page, request.user))


def _kept(params: QueryDict) -> dict[str, str]:
    """What "clear filters" keeps: the chosen columns, sort and page size."""
    kept = {k: params[k] for k in ("sort", "per_page") if params.get(k)}
    if cols := _tokens(params.getlist("cols")):
        kept["cols"] = ",".join(cols)
    return kept


def _context(spec: ListSpec, params: QueryDict, state: ListState, page: Page, user: AbstractBaseUser) -> dict:
    columns = [spec.by_key[c] for c in state.cols]
    sort_key, descending = state.sort.lstrip("-"), state.sort.startswith("-")
    headers = []
    for c in columns:
        sorted_as = ("desc" if descending else "asc") if c.key == sort_key else ""
        # A click on the sorted column reverses it; on another column sorts by it ascending.
        next_sort = f"-{c.key}" if sorted_as == "asc" else c.key
        sortable = bool(c.sort or spec.sort_rows)
        href = "?" + query_without(params, "page", sort=next_sort) if sortable else ""
        headers.append({"column": c, "sorted": sorted_as, "href": href})
    shown = {f.name for f in spec.filter_fields}
    hidden = [(k, v) for k in params if k not in shown and k not in ("page", "cols") for v in params.getlist(k)]
    if params.getlist("cols"):
        hidden.append(("cols", ",".join(_tokens(params.getlist("cols")))))
    active = {k for k in params if k not in LIST_PARAMS and params.get(k)}
    return {
        "spec": spec,
        "page": page,
        "headers": headers,
        "rows": [[(c.cell(row), c.numeric) for c in columns] for row in page.object_list],
        "filters": [(f, params.get(f.name, "")) for f in spec.filter_fields],
        "hidden": hidden,
        "has_filters": bool(active),
        "column_choices": [(c, c.key in state.cols) for c in spec.columns],
        "default_cols": ",".join(spec.default_cols),
        "query": query_without(params, "page"),
        "csv_query": query_without(params, "page", "per_page", format="csv"),
        "reset_cols_query": query_without(params, "page", "cols"),
        "clear_query": query_without(QueryDict(mutable=True), **_kept(params)),
        "notes": spec.notes(user) if spec.notes else [],
    }


# --- cells -------------------------------------------------------------------------------------------------------


def text(value: Any, *, href: str = "", mono: bool = False, title: str = "") -> Cell:
    if value in (None, ""):
        return DASH
    return Cell(str(value), href=href, mono=mono, title=title)


def flag(value: bool, label: str, *, tone: str = "waiting", title: str = "") -> Cell:
    """A boolean that matters when set: a badge when true, a muted dash when false (never a red "False")."""
    return Cell(label, tone=tone, title=title, csv="yes") if value else DASH


def ago(value: Any, *, stale: bool = False) -> Cell:
    """A time as "3 min ago" (the full UTC time in the title and the CSV)."""
    if value is None:
        return Cell("never", muted=True, csv="")
    iso = value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Cell(f"{timesince(value).split(',')[0]} ago", title=iso, csv=iso, tone="waiting" if stale else "")


def number(value: Any) -> Cell:
    return DASH if value is None else Cell(f"{value:,}" if isinstance(value, int) else str(value), csv=str(value))
