"""Search the inventory by what people have in hand: a serial (or part of one), a host name, an asset tag, a GPU
UUID, an InfiniBand port GUID, a MAC in any common spelling, a BMC or management IP, a ticket reference (REP-12,
#12) or a purchase order number.

`inventory_search` is a selector: it reads through the same scopes as the lists (cmdb.permissions.restrict, the
ticket and procurement visibility rules), so nothing out of the user's scope is found or counted. Each kind costs
one query at most (the rows and their total in one statement), and a kind the input cannot match is not queried
at all, so a search costs the same number of queries whatever the size of the fleet.

What keeps each query cheap on a large fleet: a fragment shorter than MIN_FRAGMENT characters is matched as a
prefix only (a two-character substring matches most of the fleet and no index helps), the total is counted up
to TOTAL_CAP only ("more than 1,000"), and on PostgreSQL every searched text column has an index for each kind
of match (cmdb migration 0007_search_indexes): a btree on UPPER(column) for exact and prefix matches, a pg_trgm
trigram GIN on UPPER(column) for substrings, the expressions Django's iexact / istartswith / icontains use.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet, Window

from cmdb.models import Accelerator, Nic, NicPort, Node, Switch, SwitchPort
from cmdb.permissions import restrict
from integrations.procurement.api.views import can_see_all_requests
from integrations.procurement.models import ProcurementRequest
from integrations.switches.snmp_decode import normalize_mac
from workflows.models import Ticket
from workflows.permissions import tickets_visible
from workflows.registry import workflow_or_none, workflows

#: Rows shown per kind; the kind's total and a link to its full list say how many more there are.
PER_KIND = 20
MAX_QUERY_LENGTH = 200
#: A kind's total is counted up to this many matches; past it the page says "more than 1,000".
TOTAL_CAP = 1000
#: Shorter input is looked up as an exact value or a prefix, not as a substring anywhere in an identifier.
MIN_FRAGMENT = 3
#: What the search box understands, for the help text of an empty search.
SEARCHABLE = (
    ("Serial", "a card, node, NIC or switch serial, or any part of one of 3 characters or more (case-insensitive)"),
    ("Host name", "a node or switch name, or part of it (shorter than 3 characters: its start)"),
    ("Asset tag", "a node's asset tag"),
    ("GPU UUID", "GPU-8f6c…, whole or in part"),
    ("Port GUID", "an InfiniBand port or node GUID: 0x506b4b0300a1b2c3, 506b:4b03:00a1:b2c3 or 506b4b0300a1b2c3"),
    ("MAC", "aa:bb:cc:dd:ee:ff, AA-BB-CC-DD-EE-FF, aabb.ccdd.eeff or aabbccddeeff"),
    ("IP address", "a node's BMC address or a switch's management address"),
    ("Ticket", "a reference such as REP-12, or #12"),
    ("Purchase order", "the PO number of a procurement request, node or card"),
)
_TICKET_REF = re.compile(r"^(?:([a-z]{2,6})-|#|ticket[: ]?)(\d{1,12})$", re.IGNORECASE)
_HEX = set("0123456789abcdef")
_MAC = re.compile(r"([0-9a-f]{2}:){5}[0-9a-f]{2}")


@dataclass(frozen=True)
class Terms:
    """The input in each of the forms the identifiers are stored in (None when it cannot be one)."""

    text: str
    mac: str | None
    guid: str | None
    ip: str | None
    ticket_id: int | None  # an explicit reference (REP-12, #12): an exact match
    ticket_prefix: str | None
    number: int | None  # plain digits: perhaps a ticket id, listed but not exact

    @classmethod
    def parse(cls, raw: str) -> Terms:
        text = raw.strip()
        mac = normalize_mac(text).lower()
        try:
            ip = str(ipaddress.ip_address(text))
        except ValueError:
            ip = None
        ref = _TICKET_REF.match(text)
        return cls(
            text=text,
            mac=mac if _MAC.fullmatch(mac) else None,
            guid=_guid(text),
            ip=ip,
            ticket_id=int(ref.group(2)) if ref else None,
            ticket_prefix=ref.group(1).upper() if ref and ref.group(1) else None,
            number=int(text) if text.isdigit() and len(text) <= 12 else None,
        )


def _guid(text: str) -> str | None:
    """A port / node GUID as stored (0x + 16 hex digits): from 0x-prefixed hex (leading zeros may be left out),
    four colon- or dash-separated groups of four, or 16 bare hex digits."""
    low = text.lower()
    if low.startswith("0x"):
        digits = low[2:]
        ok = 0 < len(digits) <= 16
    elif re.fullmatch(r"[0-9a-f]{4}([:-][0-9a-f]{4}){3}", low):
        digits, ok = re.sub(r"[:-]", "", low), True
    else:
        digits, ok = low, len(low) == 16
    if not ok or not set(digits) <= _HEX or int(digits, 16) == 0:
        return None
    return f"0x{int(digits, 16):016x}"


@dataclass(frozen=True)
class Hit:
    label: str
    detail: str
    url: str
    is_exact: bool


@dataclass
class KindResult:
    kind: str
    label: str
    hits: list[Hit]
    total: int  # at most TOTAL_CAP + 1: more than TOTAL_CAP is "more than TOTAL_CAP"
    more_url: str = ""

    @property
    def has_more(self) -> bool:
        return self.total > len(self.hits)

    @property
    def total_is_capped(self) -> bool:
        return self.total > TOTAL_CAP

    @property
    def total_label(self) -> str:
        return f"more than {TOTAL_CAP:,}" if self.total_is_capped else f"{self.total:,}"


@dataclass
class SearchResult:
    query: str
    kinds: list[KindResult] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(k.total for k in self.kinds)

    @property
    def total_label(self) -> str:
        """The number of results, or "more than N" when a kind's count stopped at TOTAL_CAP."""
        if any(k.total_is_capped for k in self.kinds):
            return f"more than {sum(min(k.total, TOTAL_CAP) for k in self.kinds):,}"
        return f"{self.total:,}"

    @property
    def redirect_url(self) -> str | None:
        """Where to go straight away: the page of the one exact match, or of the only result."""
        exact = {h.url for k in self.kinds for h in k.hits if h.is_exact and h.url}
        if len(exact) == 1:
            return exact.pop()
        hits = [h for k in self.kinds for h in k.hits]
        if self.total == 1 and len(hits) == 1 and hits[0].url:
            return hits[0].url
        return None


def _url(path: str, key: str) -> str:
    return f"{path}{quote(key, safe='')}/"


def _list(path: str, **params: Any) -> str:
    return f"{path}?{urlencode({k: v for k, v in params.items() if v})}"


@dataclass
class Pass:
    """One of the two passes of a search. The first (`exact_only`) runs only the exact lookups, btree index
    probes; when they name one object the search is over (the view redirects). The second lists the matches,
    the exact ones of the first pass first, and counts them up to TOTAL_CAP."""

    exact_only: bool
    exact_rows: dict[str, list[Any]] = field(default_factory=dict)  # model label -> rows of the first pass


def _ranked(qs: QuerySet, match: Q, exact: Q, order: str, p: Pass) -> list[Any]:
    """The first PER_KIND rows matching `match`, exact ones (`exact`, which `match` must include) first, each with the
    kind's total (capped at TOTAL_CAP + 1) as `_total`: one query in each pass. An empty `exact` ranks nothing
    first."""
    label = qs.model._meta.label_lower
    if p.exact_only:
        rows = list(qs.filter(exact).order_by(order, "pk")[:PER_KIND]) if exact else []
        for r in rows:
            r._exact, r._total = True, len(rows)
        p.exact_rows[label] = rows
        return rows
    # The first TOTAL_CAP + 1 matches in whatever order the scan meets them (one scan, stopping there), then the
    # first PER_KIND of those by `order` and how many there were. Past TOTAL_CAP the rows shown are the first by
    # `order` among the matches found, and the page says "more than TOTAL_CAP": the search wants narrowing.
    found = qs.filter(match).order_by().values("pk")[: TOTAL_CAP + 1]
    # `found` is scoped already: the outer query only joins what the rows show (the scope filter again would
    # make PostgreSQL scan the whole table for it).
    outer = qs.model._default_manager.all()
    outer.query.select_related = qs.query.select_related
    fetched = list(
        outer.filter(pk__in=found).annotate(_total=Window(expression=Count("pk"))).order_by(order, "pk")[:PER_KIND]
    )
    first = p.exact_rows.get(label, [])
    seen = {r.pk for r in first}
    rest = [r for r in fetched if r.pk not in seen]
    for r in rest:
        r._exact = False
    rows = (first + rest)[:PER_KIND]
    total = fetched[0]._total if fetched else len(first)
    for r in rows:
        r._total = total
    return rows


def _part(t: Terms, *fields: str) -> Q:
    """`t.text` anywhere in one of `fields` (case-insensitive), or at their start for a fragment shorter than
    MIN_FRAGMENT characters."""
    lookup = "icontains" if len(t.text) >= MIN_FRAGMENT else "istartswith"
    return _or(*(Q(**{f"{f}__{lookup}": t.text}) for f in fields))


def _result(kind: str, label: str, rows: list[Any], hit: Callable[[Any], Hit], more_url: str) -> KindResult:
    return KindResult(
        kind=kind,
        label=label,
        hits=[hit(r) for r in rows],
        total=rows[0]._total if rows else 0,
        more_url=more_url,
    )


def _or(*conditions: Q | None) -> Q:
    out = Q(pk__in=[])
    for c in conditions:
        if c is not None:
            out |= c
    return out


def _nodes(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult:
    exact = _or(
        Q(hostname__iexact=t.text),
        Q(serial__iexact=t.text),
        Q(asset_tag__iexact=t.text),
        Q(po_number__iexact=t.text),
        Q(bmc_address=t.ip) if t.ip else None,
    )
    # The substring terms take in the exact ones of the same columns: no redundant terms for PostgreSQL to
    # recheck on every candidate row of the trigram index.
    match = _part(t, "hostname", "serial", "asset_tag") | _or(
        Q(po_number__iexact=t.text), Q(bmc_address=t.ip) if t.ip else None
    )
    qs = restrict(Node.objects.select_related("site"), user, "view")
    rows = _ranked(qs, match, exact, "hostname", p)
    more = _list("/nodes/", bmc_address=t.ip) if t.ip else _list("/nodes/", q=t.text)
    return _result(
        "node",
        "Nodes",
        rows,
        lambda n: Hit(
            n.hostname, f"{n.site.code} · serial {n.serial} · {n.status}", _url("/nodes/", n.hostname), bool(n._exact)
        ),
        more,
    )


def _card_url(card: Accelerator) -> str:
    if card.serial:
        return _url("/accelerators/", card.serial)
    return _url("/nodes/", card.node.hostname) if card.node_id else ""


def _accelerators(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult:
    exact = Q(serial__iexact=t.text) | Q(uuid__iexact=t.text) | Q(po_number__iexact=t.text)
    match = _part(t, "serial", "uuid") | Q(po_number__iexact=t.text)
    qs = restrict(Accelerator.objects.select_related("model", "node", "site"), user, "view")
    rows = _ranked(qs, match, exact, "serial", p)

    def hit(c: Accelerator) -> Hit:
        where = c.node.hostname if c.node_id else (c.site.code if c.site_id else "no site")
        return Hit(
            c.serial or c.uuid or f"card #{c.pk}",
            f"{c.model.name} · {where} · {c.health}",
            _card_url(c),
            bool(c._exact),
        )

    return _result("accelerator", "Accelerators", rows, hit, _list("/accelerators/", q=t.text))


def _nics(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult:
    exact = _or(Q(serial__iexact=t.text), Q(node_guid__iexact=t.guid) if t.guid else None)
    match = _part(t, "serial", "node_guid") | _or(Q(node_guid__iexact=t.guid) if t.guid else None)
    qs = restrict(Nic.objects.select_related("node"), user, "view")
    rows = _ranked(qs, match, exact, "serial", p)
    return _result(
        "nic",
        "NICs and HCAs",
        rows,
        lambda n: Hit(
            f"{n.node.hostname}:{n.name}",
            " · ".join(x for x in (n.model_name, n.serial and f"serial {n.serial}", n.node_guid) if x),
            _url("/nodes/", n.node.hostname),
            bool(n._exact),
        ),
        _list("/api/cmdb/nics/", q=t.text),
    )


def _nic_ports(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult | None:
    exact = _or(Q(mac=t.mac) if t.mac else None, Q(guid=t.guid) if t.guid else None)
    # A GUID fragment (hex digits, 4 or more) also finds ports; anything else cannot be a port identity.
    fragment = t.text.lower().removeprefix("0x")
    partial = Q(guid__icontains=fragment) if len(fragment) >= 4 and set(fragment) <= _HEX else None
    if not t.mac and not t.guid and partial is None:
        return None
    qs = restrict(NicPort.objects.select_related("nic__node"), user, "view")
    rows = _ranked(qs, _or(exact, partial), exact, "guid", p)
    more = _list("/api/cmdb/nic-ports/", mac=t.mac) if t.mac else _list("/api/cmdb/nic-ports/", q=t.guid or fragment)
    return _result(
        "nic_port",
        "NIC ports",
        rows,
        lambda p: Hit(
            f"{p.nic.node.hostname}:{p.nic.name}/{p.name}",
            " · ".join(x for x in (p.mac, p.guid) if x),
            _url("/nodes/", p.nic.node.hostname),
            bool(p._exact),
        ),
        more,
    )


def _switches(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult:
    exact = _or(Q(name__iexact=t.text), Q(serial__iexact=t.text), Q(mgmt_ip=t.ip) if t.ip else None)
    match = _part(t, "name", "serial") | _or(Q(mgmt_ip=t.ip) if t.ip else None)
    qs = restrict(Switch.objects.select_related("site"), user, "view")
    rows = _ranked(qs, match, exact, "name", p)
    more = _list("/switches/", mgmt_ip=t.ip) if t.ip else _list("/switches/", q=t.text)
    return _result(
        "switch",
        "Switches",
        rows,
        lambda s: Hit(
            s.name,
            " · ".join(x for x in (s.site.code, s.role, s.serial and f"serial {s.serial}", s.mgmt_ip) if x),
            _url("/switches/", s.name),
            bool(s._exact),
        ),
        more,
    )


def _switch_ports(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult | None:
    if not t.mac and not t.guid:
        return None
    exact = _or(Q(mac=t.mac) if t.mac else None, Q(guid=t.guid) if t.guid else None)
    qs = restrict(SwitchPort.objects.select_related("switch"), user, "view")
    rows = _ranked(qs, exact, exact, "name", p)
    more = _list("/api/cmdb/switch-ports/", q=t.mac or t.guid)
    return _result(
        "switch_port",
        "Switch ports",
        rows,
        lambda p: Hit(
            f"{p.switch.name}:{p.name}",
            " · ".join(x for x in (p.mac, p.guid) if x),
            _url("/switches/", p.switch.name),
            bool(p._exact),
        ),
        more,
    )


def _ticket_types_for(prefix: str | None) -> list[str] | None:
    """The ticket types whose references start with `prefix` (None: any type)."""
    if not prefix:
        return None
    return [wf.type for wf in workflows() if wf.prefix.upper() == prefix]


def _tickets(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult | None:
    ticket_id = t.ticket_id if t.ticket_id is not None else t.number
    if ticket_id is None:
        return None
    match = Q(pk=ticket_id)
    types = _ticket_types_for(t.ticket_prefix)
    if types is not None:
        match &= Q(type__in=types)
    exact = match if t.ticket_id is not None else Q()
    rows = _ranked(tickets_visible(user, Ticket.objects.all()), match, exact, "-created_at", p)

    def hit(k: Ticket) -> Hit:
        wf = workflow_or_none(k.type)
        return Hit(
            f"{k.reference} {k.title}",
            f"{wf.label if wf else k.type} · {k.state}",
            k.get_absolute_url(),
            bool(k._exact),
        )

    return _result("ticket", "Tickets", rows, hit, _list("/tickets/", q=t.text, status="all"))


def _purchase_orders(user: AbstractBaseUser, t: Terms, p: Pass) -> KindResult:
    qs = ProcurementRequest.objects.all()
    if not can_see_all_requests(user):
        qs = qs.filter(requested_by=user)
    exact = Q(po_number__iexact=t.text)
    rows = _ranked(qs.exclude(po_number=""), _part(t, "po_number"), exact, "po_number", p)

    def hit(r: ProcurementRequest) -> Hit:
        ticket = r.ticket_ref.removeprefix("ticket:")
        url = f"/tickets/{ticket}/" if ticket.isdigit() else f"/api/integrations/procurement/requests/{r.pk}/"
        return Hit(f"PO {r.po_number}", f"{r.title} · {r.state}", url, bool(r._exact))

    return _result(
        "purchase_order",
        "Purchase orders",
        rows,
        hit,
        _list("/api/integrations/procurement/requests/", po_number=t.text),
    )


SEARCHES: tuple[Callable[[AbstractBaseUser, Terms, Pass], KindResult | None], ...] = (
    _nodes,
    _accelerators,
    _nics,
    _nic_ports,
    _switches,
    _switch_ports,
    _tickets,
    _purchase_orders,
)


def inventory_search(*, user: AbstractBaseUser, query: str) -> SearchResult:
    """Everything `user` may see that `query` identifies, grouped by kind (kinds without a hit left out).

    Raises ValueError for a query longer than MAX_QUERY_LENGTH characters or with control characters (no
    identifier has them; PostgreSQL refuses a NUL in a string)."""
    text = query.strip()
    if len(text) > MAX_QUERY_LENGTH:
        raise ValueError(f"The search is {len(text)} characters long; at most {MAX_QUERY_LENGTH} are looked up.")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ValueError("The search contains control characters; no identifier does.")
    result = SearchResult(query=text)
    if not text:
        return result
    terms = Terms.parse(text)
    first = Pass(exact_only=True)
    for search in SEARCHES:
        kind = search(user, terms, first)
        if kind is not None and kind.total:
            result.kinds.append(kind)
    exact_urls = {h.url for k in result.kinds for h in k.hits if h.url}
    if len(exact_urls) == 1:
        return result  # one object named exactly: its page, without looking for substrings
    result.kinds = []
    second = Pass(exact_only=False, exact_rows=first.exact_rows)
    for search in SEARCHES:
        kind = search(user, terms, second)
        if kind is not None and kind.total:
            result.kinds.append(kind)
    return result


__all__ = ["MAX_QUERY_LENGTH", "PER_KIND", "SEARCHABLE", "Hit", "KindResult", "SearchResult", "inventory_search"]
