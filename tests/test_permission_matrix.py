"""The permission matrix: every route of the URL conf and every admin page and action, for every role, against
one seeded world of two sites.

Routes are discovered (django.urls.get_resolver walk, admin.site._registry), so a new endpoint that forgets its
scoping fails here without anyone writing a test for it. For each role without site-B rights:

- no site-B object's name, serial or host name (all start with MARK) appears in any response body;
- no site-B row changes after PATCH/PUT/DELETE/POST to site-B detail URLs, creations on list URLs, admin
  change-page POSTs and admin actions on site-B ids (a snapshot of every site-B row before and after).

URL kwargs come from KWARGS, keyed by kwarg name; `pk` is the site-B object of the route's model. The world is
seeded once per module inside an outer transaction (each test runs in a savepoint and is rolled back).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import models, transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from cmdb.permissions import SCOPE_PATHS

MARK = "qzxb"  # every site-B name, serial and host name starts with "qzxb-"; nothing else contains that
ROLES = ["anonymous", "no_grant", "site_a_view", "site_a_change", "technician_a"]

# Routes the matrix does not call, each with why.
SKIP = {
    "schema": "the OpenAPI document describes endpoints, not objects (and takes seconds to build)",
    "swagger-ui": "a static page loading the schema",
    "logout": "ends the session the role is logged in with",
    "api-root": "a list of links",
    None: "unnamed catch-alls (the API's 404 handler)",
}
# The model of function views and APIViews that name none (a viewset's comes from its queryset).
VIEW_MODELS = {
    "fabric-cabling": "cmdb.fabric",
    "fabric-cabling-tickets": "cmdb.fabric",
    "ticket-": "workflows.ticket",
    "rollout-": "workflows_rollouts.rollout",
    "report-detail": "inventory_agents.report",
    "run-retry": "workflows.ticket",
    "ticket-progress": "workflows.ticket",
}
# Write bodies by model: a field that exists, so a missing check would really change the row.
WRITE_BODIES = {
    "cmdb.node": {"hostname": "hijacked-node", "status": "failed"},
    "cmdb.accelerator": {"firmware_version": "hijacked", "health": "failed"},
    # On a ticket route: edit fields, and (list / create pages) a repair that would drain a healthy site-B card.
    "workflows.ticket": {
        "title": "hijacked",
        "body": "hijacked",
        "reason": "hijacked",
        "type": "repair",
        "start": True,
        "inputs": {"accelerator": f"{MARK}-card-0000"},
        "accelerator": f"{MARK}-card-0000",
    },
}
# Console URLs name their object by a natural key: kwarg -> (model label, attribute) of the site-B object to use.
OBJECT_KWARGS = {
    "hostname": ("cmdb.node", "hostname"),
    "serial": ("cmdb.accelerator", "serial"),
    "site_code": ("cmdb.site", "code"),
    "rack_id": ("cmdb.rack", "pk"),
    "switch_name": ("cmdb.switch", "name"),
    "fabric_id": ("cmdb.fabric", "pk"),
    "cluster_name": ("cmdb.cluster", "name"),
    "tenant_slug": ("cmdb.tenant", "slug"),
}
ECHOED = {f"{MARK}-card-0000"}  # sent in write bodies: an error repeating the caller's input is no leak
DEFAULT_BODY = {"name": "hijacked", "description": "hijacked"}


@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name"
    kwargs: tuple[str, ...]
    model: str  # model label, or "" when the route concerns none

    @property
    def is_detail(self) -> bool:
        return bool({"pk", "ticket_id", *OBJECT_KWARGS} & set(self.kwargs))

    def __str__(self) -> str:
        return self.name


def _route_model(callback: Any, name: str) -> str:
    cls = getattr(callback, "cls", None)
    queryset = getattr(cls, "queryset", None)
    if queryset is not None:
        return queryset.model._meta.label_lower
    for prefix, label in VIEW_MODELS.items():
        if name == prefix or (prefix.endswith("-") and name.startswith(prefix)):
            return label
    return ""


def _walk(resolver: URLResolver, namespace: str = "") -> Iterator[Route]:
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            if p.app_name == "admin":
                continue  # admin pages come from the registry below
            ns = ":".join(x for x in (namespace, p.namespace) if x)
            yield from _walk(p, ns)
            continue
        assert isinstance(p, URLPattern)
        kwargs = tuple(p.pattern.regex.groupindex)
        if "format" in kwargs or p.name in SKIP:
            continue
        yield Route(":".join(x for x in (namespace, p.name) if x), kwargs, _route_model(p.callback, p.name))


def discovered_routes() -> list[Route]:
    seen: dict[tuple[str, tuple[str, ...]], Route] = {}
    for route in _walk(get_resolver()):
        seen.setdefault((route.name, route.kwargs), route)
    return sorted(seen.values(), key=str)


ROUTES = discovered_routes()
ADMIN_MODELS = sorted(m._meta.label_lower for m in admin.site._registry)


# --- the world ----------------------------------------------------------------------------------------------------


@dataclass
class World:
    users: dict[str, Any]
    site_b: Any
    objects_b: dict[str, models.Model]  # model label -> a site-B object of it
    run_b: Any


def _seed() -> World:
    from cmdb import models as m
    from cmdb.permissions import grant_scope
    from tests.factories.cmdb import (
        AcceleratorFactory,
        AcceleratorModelFactory,
        ClusterFactory,
        FabricFactory,
        NodeFactory,
        RackFactory,
        RoomFactory,
        ServerModelFactory,
        SiteFactory,
        StockLocationFactory,
        SwitchFactory,
        TenantFactory,
        UserFactory,
    )
    from workflows.engine import ticket_create
    from workflows.models import StepRun
    from workflows.services.bootstrap import groups_bootstrap

    groups = groups_bootstrap()
    model = ServerModelFactory(name="HGX-matrix")
    card_model = AcceleratorModelFactory(name="H100-matrix")
    objects: dict[str, dict[str, models.Model]] = {}
    for prefix in ("aaa", MARK):  # site A's names are the same shapes with "aaa-"
        site = SiteFactory(code=f"{prefix}-site", name=f"{prefix}-site-name")
        room = RoomFactory(site=site, name=f"{prefix}-room")
        rack = RackFactory(room=room, name=f"{prefix}-rack")
        cluster = ClusterFactory(name=f"{prefix}-cluster", site=site)
        tenant = TenantFactory(slug=f"{prefix}-tenant", name=f"{prefix}-tenant-name")
        node = NodeFactory(
            hostname=f"{prefix}-node-0001",
            serial=f"{prefix}-ser-0001",
            site=site,
            rack=rack,
            position=1,
            server_model=model,
            cluster=cluster,
            tenant=tenant,
            status="active",
        )
        cards = [
            AcceleratorFactory(serial=f"{prefix}-card-{i:04d}", node=node, slot_index=i, model=card_model)
            for i in range(2)
        ]
        m.Accelerator.objects.filter(pk=cards[1].pk).update(health="failed")
        cards[1].refresh_from_db()
        store = StockLocationFactory(site=site, name=f"{prefix}-store")
        fabric = FabricFactory(name=f"{prefix}-fabric", site=site)
        switch = SwitchFactory(name=f"{prefix}-leaf", site=site, fabric=fabric)
        sport = m.SwitchPort.objects.create(switch=switch, name=f"{prefix}-eth1")
        nic = m.Nic.objects.create(node=node, name=f"{prefix}-nic0", kind="roce", rail=0)
        nport = m.NicPort.objects.create(nic=nic, name=f"{prefix}-p1", mac=f"b8:3f:d2:00:0{len(objects)}:01")
        link = m.Link.objects.create(
            fabric=fabric, a_nic_port=nport, b_switch_port=sport, cable_serial=f"{prefix}-cable"
        )
        component = m.Component.objects.create(
            node=node, kind="cpu", slot="0", model_name=f"{prefix}-cpu", serial=f"{prefix}-cpu-sn"
        )
        ticket = ticket_create(
            type_="repair", title=f"{prefix}-repair", requester=None, inputs={"accelerator": cards[1]}, start=True
        )
        objects[prefix] = {
            "cmdb.site": site,
            "cmdb.room": room,
            "cmdb.rack": rack,
            "cmdb.cluster": cluster,
            "cmdb.tenant": tenant,
            "cmdb.node": node,
            "cmdb.accelerator": cards[1],
            "cmdb.stocklocation": store,
            "cmdb.fabric": fabric,
            "cmdb.switch": switch,
            "cmdb.switchport": sport,
            "cmdb.nic": nic,
            "cmdb.nicport": nport,
            "cmdb.link": link,
            "cmdb.component": component,
            "workflows.ticket": ticket,
            "cmdb.acceleratorplacement": cards[1].placements.first(),
        }
    site_a = objects["aaa"]["cmdb.site"]
    users = {
        "superuser": UserFactory(username="matrix-root", is_superuser=True),
        "no_grant": UserFactory(username="matrix-nobody"),
    }
    users["site_a_view"] = UserFactory(username="matrix-viewer")
    grant_scope(scope_obj=site_a, perms=["view_scope"], users=[users["site_a_view"]])
    users["site_a_change"] = UserFactory(username="matrix-changer")
    grant_scope(scope_obj=site_a, perms=["change_scope"], users=[users["site_a_change"]])
    users["technician_a"] = UserFactory(username="matrix-tech")
    users["technician_a"].groups.add(groups["dc-technicians"])
    grant_scope(scope_obj=site_a, perms=["change_scope"], users=[users["technician_a"]])
    ticket_b = objects[MARK]["workflows.ticket"]
    return World(
        users=users,
        site_b=objects[MARK]["cmdb.site"],
        objects_b=objects[MARK],
        run_b=StepRun.objects.filter(ticket=ticket_b).first(),
    )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> Iterator[World]:
    """Seeded once per module in an outer transaction, rolled back at the end (like TestCase.setUpTestData)."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            yield _seed()
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def _site_b_snapshot(world: World) -> dict[str, dict[Any, tuple]]:
    """Every site-B row of every site-scoped model, with all its column values."""
    snap: dict[str, dict[Any, tuple]] = {}
    for label, paths in SCOPE_PATHS.items():
        path = paths.get("site")
        if path is None:
            continue
        model = apps.get_model(label)
        lookup = "pk" if path == "pk" else path
        columns = [f.attname for f in model._meta.concrete_fields]
        rows = model._default_manager.filter(**{lookup: world.site_b.pk}).values_list("pk", *columns)
        snap[label] = {row[0]: row[1:] for row in rows}
    return snap


def _client(world: World, role: str) -> Client:
    client = Client(raise_request_exception=False)
    if role != "anonymous":
        client.force_login(world.users[role])
    return client


def _kwargs(world: World, route: Route) -> dict[str, Any]:
    obj = world.objects_b.get(route.model)
    values: dict[str, Any] = {
        "pk": obj.pk if obj is not None else 999_999_999,
        "ticket_id": world.objects_b["workflows.ticket"].pk,
        "name": "cancel",
        "type_": "repair",
        "run_id": world.run_b.pk if world.run_b is not None else "00000000-0000-0000-0000-000000000000",
    }
    if route.model == "inventory_agents.report":
        values["pk"] = "00000000-0000-0000-0000-000000000000"
    for kwarg, (label, attr) in OBJECT_KWARGS.items():
        values[kwarg] = getattr(world.objects_b[label], attr)
    return {k: values[k] for k in route.kwargs}


def _body_leaks(response, echoed: set[str] = frozenset()) -> list[str]:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    text = content.decode("utf-8", "replace").lower()
    # The hyphen keeps random tokens (CSRF, hashes) and the echo of the search term itself from matching.
    found = {m.group(0) for m in re.finditer(rf"{MARK}-[\w.-]+", text)}
    return sorted(found - ECHOED - {e.lower() for e in echoed})


def _requests(route: Route, url: str) -> list[tuple[str, dict[str, Any] | None]]:
    body = WRITE_BODIES.get(route.model, DEFAULT_BODY)
    if route.is_detail:
        return [("get", None), ("patch", body), ("put", body), ("post", body), ("delete", None)]
    return [("get", None), ("get", {"q": MARK, "search": MARK}), ("post", body)]


def _send(client: Client, method: str, url: str, data: dict[str, Any] | None):
    if method == "get":
        return client.get(url, data or {})
    call = getattr(client, method)
    if url.startswith("/api/"):
        return call(url, json.dumps(data or {}), content_type="application/json")
    form = {k: v for k, v in (data or {}).items() if isinstance(v, str | int)}  # a form has no nested values
    return call(url, form) if method == "post" else call(url)


def test_routes_are_discovered():
    names = {r.name for r in ROUTES}
    for expected in ("cmdb-api:node-detail", "workflows:ticket-detail", "fabrics:fabric-cabling"):
        assert any(n.endswith(expected.split(":")[1]) for n in names), expected
    assert len(ROUTES) > 40


@pytest.mark.django_db
@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_route_leaks_nothing_of_site_b(route: Route, world: World):
    kwargs = _kwargs(world, route)
    url = reverse(route.name, kwargs=kwargs)
    echoed = {str(v) for v in kwargs.values()}  # a 404 naming the path the caller asked for is no leak
    before = _site_b_snapshot(world)
    problems = []
    for role in ROLES:
        client = _client(world, role)
        for method, data in _requests(route, url):
            response = _send(client, method, url, data)
            if response.status_code >= 500:
                problems.append(f"{role} {method.upper()} {url}: {response.status_code}")
            if leaks := _body_leaks(response, echoed):
                problems.append(f"{role} {method.upper()} {url}: shows {', '.join(leaks[:5])}")
    after = _site_b_snapshot(world)
    changed = [
        f"{label} #{pk}" for label, rows in after.items() for pk, row in rows.items() if before[label].get(pk) != row
    ] + [
        f"{label}: rows {sorted(set(before[label]) ^ set(rows))}"
        for label, rows in after.items()
        if set(before[label]) != set(rows)
    ]
    assert not problems and not changed, "\n".join([*problems, *[f"site-B row changed: {c}" for c in changed]])


@pytest.mark.django_db
@pytest.mark.parametrize("label", ADMIN_MODELS)
def test_admin_leaks_and_writes_nothing_of_site_b(label: str, world: World):
    model = apps.get_model(label)
    model_admin = admin.site._registry[model]
    info = (model._meta.app_label, model._meta.model_name)
    changelist = reverse("admin:{}_{}_changelist".format(*info))
    obj = world.objects_b.get(label)
    actions = sorted(
        {
            name
            for name in [
                *(a if isinstance(a, str) else a.__name__ for a in (model_admin.actions or ())),
                "delete_selected",
            ]
        }
    )
    before = _site_b_snapshot(world)
    problems = []
    for role in ROLES:
        client = _client(world, role)
        pages = [(changelist, None), (changelist, {"q": MARK})]
        if obj is not None:
            pages.append((reverse("admin:{}_{}_change".format(*info), args=[obj.pk]), None))
            pages.append((reverse("admin:{}_{}_history".format(*info), args=[obj.pk]), None))
        for url, data in pages:
            response = client.get(url, data or {})
            if response.status_code >= 500:
                problems.append(f"{role} GET {url}: {response.status_code}")
            if leaks := _body_leaks(response):
                problems.append(f"{role} GET {url}: shows {', '.join(leaks[:5])}")
        if obj is None:
            continue
        change_url = reverse("admin:{}_{}_change".format(*info), args=[obj.pk])
        writes = [(change_url, {"hostname": "hijacked", "name": "hijacked"})]
        writes += [(changelist, {"action": action, "_selected_action": [obj.pk], "post": "yes"}) for action in actions]
        writes.append((reverse("admin:{}_{}_delete".format(*info), args=[obj.pk]), {"post": "yes"}))
        for url, data in writes:
            response = client.post(url, data)
            if response.status_code >= 500:
                problems.append(f"{role} POST {url} {data}: {response.status_code}")
            if leaks := _body_leaks(response):
                problems.append(f"{role} POST {url} {data}: shows {', '.join(leaks[:5])}")
    after = _site_b_snapshot(world)
    changed = [f"{lbl} #{pk}" for lbl, rows in after.items() for pk, row in rows.items() if before[lbl].get(pk) != row]
    changed += [lbl for lbl, rows in after.items() if set(before[lbl]) != set(rows)]
    assert not problems and not changed, "\n".join([*problems, *[f"site-B row changed: {c}" for c in changed]])


@pytest.mark.django_db
def test_the_superuser_sees_site_b_so_the_matrix_can_see_a_leak(world: World):
    client = _client(world, "superuser")
    assert f"{MARK}-node-0001" in _body_leaks(client.get("/api/cmdb/nodes/"))
    assert f"{MARK}-node-0001" in _body_leaks(client.get("/admin/cmdb/node/"))
    assert f"{MARK}-repair" in _body_leaks(client.get(f"/tickets/{world.objects_b['workflows.ticket'].pk}/"))
