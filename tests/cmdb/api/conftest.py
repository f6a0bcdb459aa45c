"""Fixtures for the CMDB API tests: clients for each kind of user, and fleets of known shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from cmdb import models as m
from cmdb.permissions import grant_scope
from cmdb.services.demo import demo_load
from tests.cmdb.api.support import url  # noqa: F401  (re-exported for fixtures)
from tests.factories.cmdb import (
    AcceleratorFactory,
    NodeFactory,
    SiteFactory,
    StockLocationFactory,
    UserFactory,
)


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def client_for() -> Callable[..., APIClient]:
    """An API client authenticated with the user's own token (the real header path, not force_authenticate)."""

    def make(user) -> APIClient:
        token, _ = Token.objects.get_or_create(user=user)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        return client

    return make


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_superuser=True)


@pytest.fixture
def root(superuser, client_for) -> APIClient:
    return client_for(superuser)


@dataclass
class TwoSites:
    """Site A (the technician's) and site B, each with a node holding two cards and a spare in stock."""

    site_a: m.Site
    site_b: m.Site
    node_a: m.Node
    node_b: m.Node
    cards_a: list[m.Accelerator]
    cards_b: list[m.Accelerator]
    stock_a: m.StockLocation
    stock_b: m.StockLocation


@pytest.fixture
def two_sites(db) -> TwoSites:
    site_a, site_b = SiteFactory(code="site-a"), SiteFactory(code="site-b")
    node_a, node_b = NodeFactory(site=site_a, hostname="a-0001"), NodeFactory(site=site_b, hostname="b-0001")
    cards_a = [AcceleratorFactory(node=node_a, slot_index=i, serial=f"A-{i}") for i in range(2)]
    cards_b = [AcceleratorFactory(node=node_b, slot_index=i, serial=f"B-{i}") for i in range(2)]
    return TwoSites(
        site_a,
        site_b,
        node_a,
        node_b,
        cards_a,
        cards_b,
        StockLocationFactory(site=site_a, name="wh-a"),
        StockLocationFactory(site=site_b, name="wh-b"),
    )


@pytest.fixture
def viewer_a(two_sites, client_for) -> APIClient:
    """Holds view_scope on site A only."""
    user = UserFactory(username="viewer-a")
    grant_scope(scope_obj=two_sites.site_a, perms=["view_scope"], users=[user])
    return client_for(user)


@pytest.fixture
def tech_a(two_sites, client_for):
    """Holds change_scope on site A only (a site technician)."""
    user = UserFactory(username="tech-a")
    grant_scope(scope_obj=two_sites.site_a, perms=["change_scope"], users=[user])
    client = client_for(user)
    client.user = user
    return client


@pytest.fixture
def nobody(db, client_for) -> APIClient:
    """Authenticated, no grant at all."""
    return client_for(UserFactory(username="nobody"))


@pytest.fixture
def global_node_editor(db, client_for) -> APIClient:
    """Holds the global cmdb.view_node/change_node/add_node/delete_node permissions (no scope)."""
    user = UserFactory(username="node-editor")
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="cmdb", codename__in=["view_node", "change_node", "add_node", "delete_node"]
        )
    )
    return client_for(user)


@pytest.fixture
def fleet(db) -> None:
    """The small demo fleet: 3 sites' worth of groups, 48 nodes, 3 accelerator vendors, links, drivers."""
    demo_load(scale="small")
