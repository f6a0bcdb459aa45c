"""Deterministic factory_boy factories for the CMDB. Tests pass the fields they assert on."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from cmdb import models as m


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    is_staff = True
    password = factory.django.Password("pw")


class VendorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Vendor
        django_get_or_create = ("slug",)

    slug = "nvidia"
    name = factory.LazyAttribute(lambda o: o.slug.title())
    makes_accelerators = True


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Site
        django_get_or_create = ("code",)

    code = factory.Sequence(lambda n: f"site{n}")
    name = factory.LazyAttribute(lambda o: f"Site {o.code}")


class RoomFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Room

    site = factory.SubFactory(SiteFactory)
    name = factory.Sequence(lambda n: f"hall{n}")


class RackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Rack

    room = factory.SubFactory(RoomFactory)
    name = factory.Sequence(lambda n: f"r{n:03d}")
    u_height = 42
    power_budget_kw = 40


class AcceleratorModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.AcceleratorModel
        django_get_or_create = ("name",)

    vendor = factory.SubFactory(VendorFactory)
    name = "H100-SXM5-80GB"
    memory_gib = 80
    interconnect = "nvswitch"
    tdp_w = 700
    form_factor = "sxm"
    aliases = factory.LazyFunction(lambda: ["NVIDIA H100 80GB HBM3"])


class ServerModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ServerModel
        django_get_or_create = ("name",)

    vendor = factory.SubFactory(VendorFactory, slug="supermicro", makes_accelerators=False)
    name = "HGX H100 8-GPU"
    u_height = 8
    power_draw_kw = 10
    accelerator_model = factory.SubFactory(AcceleratorModelFactory)
    accelerator_slots = 8


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Cluster

    name = factory.Sequence(lambda n: f"cluster{n}")
    site = factory.SubFactory(SiteFactory)


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Tenant

    slug = factory.Sequence(lambda n: f"tenant{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Node

    hostname = factory.Sequence(lambda n: f"node{n:04d}")
    serial = factory.Sequence(lambda n: f"SN{n:08d}")
    server_model = factory.SubFactory(ServerModelFactory)
    site = factory.SubFactory(SiteFactory)
    status = "active"
    health = "ok"


class StockLocationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.StockLocation

    site = factory.SubFactory(SiteFactory)
    name = factory.Sequence(lambda n: f"warehouse{n}")


class AcceleratorFactory(factory.django.DjangoModelFactory):
    """An installed card by default (pass node=...); pass stock_location=... and lifecycle='in_stock' for a spare."""

    class Meta:
        model = m.Accelerator

    model = factory.SubFactory(AcceleratorModelFactory)
    serial = factory.Sequence(lambda n: f"1654{n:09d}")
    lifecycle = "installed"
    health = "ok"
    node = factory.SubFactory(NodeFactory)
    slot_index = factory.Sequence(lambda n: n % 8)
    site = factory.LazyAttribute(
        lambda o: o.node.site if o.node else (o.stock_location.site if o.stock_location else None)
    )
    stock_location = None


class FabricFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Fabric

    name = factory.Sequence(lambda n: f"fabric{n}")
    kind = "infiniband"
    purpose = "compute"
    site = factory.SubFactory(SiteFactory)


class SwitchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Switch

    name = factory.Sequence(lambda n: f"leaf{n:03d}")
    vendor = factory.SubFactory(VendorFactory, slug="arista", makes_accelerators=False)
    site = factory.SubFactory(SiteFactory)


class DriverPackageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.DriverPackage
        django_get_or_create = ("component", "version")

    vendor = factory.SubFactory(VendorFactory)
    component = "nvidia-driver"
    version = "550.127.05"
