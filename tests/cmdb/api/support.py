"""Helpers shared by the CMDB API tests."""

from __future__ import annotations

API = "/api/cmdb"


def url(resource: str, pk: int | None = None, suffix: str = "") -> str:
    """`/api/cmdb/<resource>/[<pk>/][<suffix>/]`."""
    path = f"{API}/{resource}/"
    if pk is not None:
        path += f"{pk}/"
    if suffix:
        path += f"{suffix}/"
    return path


def bulk_fleet(n: int, *, site_code: str = "qsite") -> dict:
    """`n` racked nodes, each with one card and one NIC port cabled to a leaf port (bulk inserts; fast).

    Returns the created site and lists. Used by the query-count tests, which compare 10 against 500 rows.
    """
    from decimal import Decimal

    from cmdb import models as m
    from tests.factories.cmdb import AcceleratorModelFactory, ServerModelFactory, SiteFactory, TenantFactory

    site = SiteFactory(code=site_code)
    room = m.Room.objects.create(site=site, name=f"{site_code}-hall")
    server_model = ServerModelFactory(u_height=1)
    accel_model = AcceleratorModelFactory()
    tenant = TenantFactory(slug=f"{site_code}-tenant")
    cluster = m.Cluster.objects.create(name=f"{site_code}-cluster", site=site)
    tag = m.Tag.objects.get_or_create(slug="canary")[0]
    racks = m.Rack.objects.bulk_create(
        [
            m.Rack(room=room, name=f"{site_code}-r{i:03d}", u_height=48, power_budget_kw=Decimal(40))
            for i in range(-(-n // 40))
        ]
    )
    nodes = m.Node.objects.bulk_create(
        [
            m.Node(
                hostname=f"{site_code}-n{i:04d}",
                serial=f"{site_code}-SN{i:05d}",
                server_model=server_model,
                site=site,
                rack=racks[i // 40],
                position=1 + i % 40,
                status="active",
                health="ok",
                cluster=cluster,
                tenant=tenant,
            )
            for i in range(n)
        ]
    )
    m.Node.tags.through.objects.bulk_create([m.Node.tags.through(node_id=node.pk, tag_id=tag.pk) for node in nodes])
    cards = m.Accelerator.objects.bulk_create(
        [
            m.Accelerator(
                model=accel_model,
                serial=f"{site_code}-C{i:05d}",
                lifecycle="installed",
                health="ok",
                site=site,
                node=node,
                slot_index=0,
            )
            for i, node in enumerate(nodes)
        ]
    )
    fabric = m.Fabric.objects.create(name=f"{site_code}-ib", kind="infiniband", purpose="compute", site=site)
    vendor = m.Vendor.objects.get_or_create(slug="arista", defaults={"name": "Arista"})[0]
    leaf = m.Switch.objects.create(name=f"{site_code}-leaf", vendor=vendor, site=site, fabric=fabric)
    sports = m.SwitchPort.objects.bulk_create([m.SwitchPort(switch=leaf, name=f"p{i}") for i in range(n)])
    nics = m.Nic.objects.bulk_create([m.Nic(node=node, name="mlx5_0", kind="infiniband") for node in nodes])
    nports = m.NicPort.objects.bulk_create([m.NicPort(nic=nic, name="1") for nic in nics])
    links = m.Link.objects.bulk_create(
        [m.Link(fabric=fabric, a_nic_port=a, b_switch_port=b) for a, b in zip(nports, sports, strict=True)]
    )
    return {"site": site, "nodes": nodes, "cards": cards, "links": links, "cluster": cluster, "tenant": tenant}
