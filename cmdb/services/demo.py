"""The demo fleet: a believable GPU datacenter, built with bulk inserts so the large scale (12,500 nodes,
100,000 accelerators, their HCAs, rail leaves and cables) loads in minutes on two cores.

Idempotent: each group of nodes is created only if its first hostname does not exist yet, and each group is
written in one transaction, so a run that was interrupted leaves no half-built group behind.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from gpuops.context import ChangeSource, change_context

from .. import models as m
from .accelerators import placement_build, placements_write
from .capacity import capacity_rollup
from .changelog import records_for_bulk, records_write, tracked_update
from .demo_history import (
    demo_capacity_load,
    demo_repeat_offender_load,
    demo_service_history_load,
    demo_windows_load,
)
from .firmware import firmware_baseline_save, firmware_digest
from .health_policies import health_policies_ensure
from .stock import receipts_write

Progress = Callable[[str, int], None]  # (what, how many more done)


@dataclass(frozen=True)
class Group:
    """A block of identical nodes: one site, one server model, one cluster."""

    site: str
    prefix: str
    server_model: str
    count: int
    cluster: str
    tenant: str
    fabric: str  # compute fabric name


@dataclass(frozen=True)
class SiteSpec:
    code: str
    name: str
    region: str
    timezone: str
    net: str  # BMC /16 of this site


SITES = [
    SiteSpec("sh1", "Shanghai DC1", "cn-east", "Asia/Shanghai", "10.10.0.0/16"),
    SiteSpec("bj2", "Beijing DC2", "cn-north", "Asia/Shanghai", "10.20.0.0/16"),
    SiteSpec("wh1", "Wuhan AIDC 1", "cn-central", "Asia/Shanghai", "10.30.0.0/16"),
    SiteSpec("gy1", "Guiyang AIDC 1", "cn-southwest", "Asia/Shanghai", "10.40.0.0/16"),
]

SMALL = [
    Group("sh1", "sh1-h100", "NVIDIA HGX H100 8-GPU", 24, "sh1-train", "llm-pretrain", "sh1-ib-compute"),
    Group("bj2", "bj2-a910b", "Huawei Atlas 800T A2", 16, "bj2-ascend", "llm-finetune", "bj2-roce-compute"),
    Group("bj2", "bj2-k100", "Sugon X7840 H0 (K100)", 8, "bj2-dcu", "vision", "bj2-roce-compute"),
]
LARGE = [
    Group("wh1", "wh1-h100", "NVIDIA HGX H100 8-GPU", 4096, "wh1-train", "llm-pretrain", "wh1-ib-compute"),
    Group("wh1", "wh1-h200", "NVIDIA HGX H200 8-GPU", 2048, "wh1-train2", "acme-ai", "wh1-ib-compute"),
    Group("gy1", "gy1-a910b", "Huawei Atlas 800T A2", 4096, "gy1-ascend", "llm-finetune", "gy1-roce-compute"),
    Group("gy1", "gy1-k100", "Sugon X7840 H0 (K100)", 2260, "gy1-dcu", "vision", "gy1-roce-compute"),
]

VENDORS = [
    ("nvidia", "NVIDIA", True, {"Healthy": "ok"}),
    ("ascend", "Huawei Ascend", True, {"OK": "ok", "Warning": "degraded", "Alarm": "failed", "Critical": "failed"}),
    ("hygon", "Hygon", True, {"Normal": "ok"}),
    ("supermicro", "Supermicro", False, {}),
    ("huawei", "Huawei", False, {}),
    ("sugon", "Sugon", False, {}),
    ("arista", "Arista", False, {}),
]

ACCEL_MODELS = [
    # vendor, name, memory GiB, interconnect, TDP W, form factor, tool product names
    ("nvidia", "H100-SXM5-80GB", 80, "nvswitch", 700, "sxm", ["NVIDIA H100 80GB HBM3", "H100 80GB HBM3"]),
    ("nvidia", "H200-SXM5-141GB", 141, "nvswitch", 700, "sxm", ["NVIDIA H200", "NVIDIA H200 141GB HBM3e"]),
    ("nvidia", "A100-SXM4-80GB", 80, "nvswitch", 400, "sxm", ["NVIDIA A100-SXM4-80GB"]),
    ("ascend", "Ascend 910B3", 64, "hccs", 400, "oam", ["910B3", "Ascend910B3"]),
    ("ascend", "Ascend 910B4", 32, "hccs", 350, "oam", ["910B4", "Ascend910B4"]),
    ("hygon", "Hygon K100", 64, "xgmi", 350, "pcie", ["K100", "K100_AI", "BW200"]),
    ("hygon", "Hygon Z100", 32, "xgmi", 300, "pcie", ["Z100", "Z100L"]),
]

SERVER_MODELS = [
    # vendor, name, U, kW, accelerator model, slots
    ("supermicro", "NVIDIA HGX H100 8-GPU", 8, "10.20", "H100-SXM5-80GB", 8),
    ("supermicro", "NVIDIA HGX H200 8-GPU", 8, "10.20", "H200-SXM5-141GB", 8),
    ("huawei", "Huawei Atlas 800T A2", 4, "5.60", "Ascend 910B3", 8),
    ("sugon", "Sugon X7840 H0 (K100)", 4, "4.80", "Hygon K100", 8),
]

DRIVERS = [
    # vendor, component, version, reboot, supported accelerator models
    ("nvidia", "nvidia-driver", "535.183.01", True, ["H100-SXM5-80GB", "A100-SXM4-80GB"]),
    ("nvidia", "nvidia-driver", "550.127.05", True, ["H100-SXM5-80GB", "H200-SXM5-141GB", "A100-SXM4-80GB"]),
    ("nvidia", "nvidia-driver", "570.133.20", True, ["H100-SXM5-80GB", "H200-SXM5-141GB", "A100-SXM4-80GB"]),
    ("nvidia", "cuda", "12.4.1", False, ["H100-SXM5-80GB", "H200-SXM5-141GB", "A100-SXM4-80GB"]),
    ("nvidia", "fabric-manager", "550.127.05", False, ["H100-SXM5-80GB", "H200-SXM5-141GB"]),
    ("ascend", "ascend-driver", "24.1.rc2", True, ["Ascend 910B3", "Ascend 910B4"]),
    ("ascend", "ascend-driver", "24.1.rc3", True, ["Ascend 910B3", "Ascend 910B4"]),
    ("ascend", "ascend-firmware", "7.5.0.1.129", True, ["Ascend 910B3", "Ascend 910B4"]),
    ("ascend", "cann", "8.0.RC3", False, ["Ascend 910B3", "Ascend 910B4"]),
    ("hygon", "hygon-driver", "6.3.8", True, ["Hygon K100", "Hygon Z100"]),
    ("hygon", "dtk", "24.04.3", False, ["Hygon K100", "Hygon Z100"]),
    # A firmware package: a rollout of it flashes every card's VBIOS (the install command runs the vendor's tool).
    ("nvidia", "gpu_vbios", "96.00.89.00.01", True, ["H100-SXM5-80GB", "H200-SXM5-141GB"]),
]
# Installed on every demo node of a vendor at load time.
BASELINE = {
    "nvidia": [("nvidia-driver", "550.127.05"), ("cuda", "12.4.1"), ("fabric-manager", "550.127.05")],
    "ascend": [("ascend-driver", "24.1.rc2"), ("ascend-firmware", "7.5.0.1.129"), ("cann", "8.0.RC3")],
    "hygon": [("hygon-driver", "6.3.8"), ("dtk", "24.04.3")],
}

# Firmware of the demo nodes: (component, current, older) per vendor and for the servers; a few nodes carry the
# older version so the compliance report has outdated nodes to show (docs/compliance.md).
DEMO_ACCEL_FIRMWARE = {
    "nvidia": ("gpu_vbios", "96.00.74.00.01", "96.00.61.00.01"),
    "ascend": ("npu_firmware", "7.5.0.1.129", "7.1.0.7.220"),
    "hygon": ("dcu_vbios", "113-D6650100-103", "113-D6650100-101"),
}
DEMO_SERVER_FIRMWARE = {"bios": ("2.1.6", "1.9.2"), "bmc": ("7.10.30.00", "6.10.80.00")}

NODES_PER_RACK = 4
CARDS_PER_NODE = 8
LEAF_PORTS = 64


def _now() -> dt.datetime:
    return timezone.now()


def _catalog() -> None:
    for slug, name, accel, aliases in VENDORS:
        m.Vendor.objects.get_or_create(
            slug=slug, defaults={"name": name, "makes_accelerators": accel, "health_aliases": aliases}
        )
    vendors = {v.slug: v for v in m.Vendor.objects.all()}
    for vendor, name, mem, ic, tdp, ff, aliases in ACCEL_MODELS:
        m.AcceleratorModel.objects.get_or_create(
            name=name,
            defaults={
                "vendor": vendors[vendor],
                "memory_gib": mem,
                "interconnect": ic,
                "tdp_w": tdp,
                "form_factor": ff,
                "aliases": aliases,
            },
        )
    models = {a.name: a for a in m.AcceleratorModel.objects.all()}
    for vendor, name, u, kw, accel, slots in SERVER_MODELS:
        m.ServerModel.objects.get_or_create(
            name=name,
            defaults={
                "vendor": vendors[vendor],
                "u_height": u,
                "power_draw_kw": Decimal(kw),
                "accelerator_model": models[accel],
                "accelerator_slots": slots,
            },
        )
    for vendor, component, version, reboot, supported in DRIVERS:
        pkg, created = m.DriverPackage.objects.get_or_create(
            component=component,
            version=version,
            defaults={
                "vendor": vendors[vendor],
                "requires_reboot": reboot,
                "install_command": f"/opt/gpuops/bin/install-{component} {{version}}",
                "rollback_command": f"/opt/gpuops/bin/install-{component} {{previous_version}}",
            },
        )
        if created:
            pkg.supported_models.set([models[s] for s in supported])
    for sku, name, kind in [
        ("MCX75310AAS-NEAT", "ConnectX-7 NDR 400G HCA", "nic"),
        ("MMA4Z00-NS400", "NDR 400G OSFP transceiver", "optic"),
        ("MCP4Y10-N002", "NDR DAC 2 m", "cable"),
    ]:
        m.PartModel.objects.get_or_create(sku=sku, defaults={"name": name, "kind": kind, "vendor": vendors["nvidia"]})
    _health_policies()
    _firmware_baselines(models)


def _firmware_baselines(models: dict[str, m.AcceleratorModel]) -> None:
    """Baselines of the demo: the current versions as minimums, per server and accelerator model; the driver
    packages of BASELINE for every model."""
    rows: list[tuple[str, str, str]] = []
    for server_model in m.ServerModel.objects.all():
        rows += [(component, server_model.name, current) for component, (current, _) in DEMO_SERVER_FIRMWARE.items()]
    for accel in models.values():
        component, current, _ = DEMO_ACCEL_FIRMWARE[accel.vendor.slug]
        rows.append((component, _reported_model(accel), current))
    for packages in BASELINE.values():
        rows += [(component, "", version) for component, version in packages]
    for component, model, version in rows:
        if not m.FirmwareBaseline.objects.filter(component=component, model=model).exists():
            firmware_baseline_save(m.FirmwareBaseline(component=component, model=model, versions=[version]))


def _reported_model(accel: m.AcceleratorModel) -> str:
    """The model name as the agent reports it (synthetic reports use the first alias too)."""
    aliases = [a for a in (accel.aliases or []) if a]
    return aliases[0] if aliases else accel.name


def _firmware_rows(nodes: list[m.Node], cards: list[m.Accelerator], server_model, accel_model, created: list) -> None:
    """NodeFirmware and its FirmwareComponent index for the demo nodes, as ingestion would have written them."""
    component, current, older = DEMO_ACCEL_FIRMWARE[accel_model.vendor.slug]
    reported = _reported_model(accel_model)
    by_node: dict[int, list[m.Accelerator]] = {}
    for card in cards:
        by_node.setdefault(card.node_id, []).append(card)
    firmware_rows, index_rows = [], []
    for i, node in enumerate(nodes):
        if node.status == "received":
            continue
        entries = [
            {
                "component": "bios",
                "device": "system",
                "model": server_model.name,
                "psid": "",
                "version": DEMO_SERVER_FIRMWARE["bios"][1 if i % 40 == 2 else 0],
            },
            {
                "component": "bmc",
                "device": "bmc",
                "model": server_model.name,
                "psid": "",
                "version": DEMO_SERVER_FIRMWARE["bmc"][1 if i % 60 == 5 else 0],
            },
        ]
        for card in sorted(by_node.get(node.pk, []), key=lambda c: c.slot_index or 0):
            version = older if i % 70 == 9 and card.slot_index == 0 else current
            entries.append(
                {"component": component, "device": card.pci_bus_id, "model": reported, "psid": "", "version": version}
            )
        entries.sort(key=lambda e: (e["component"], e["device"]))
        firmware_rows.append(m.NodeFirmware(node=node, components=entries, digest=firmware_digest(entries)))
        index_rows += [m.FirmwareComponent(node=node, **e) for e in entries]
    _bulk(m.NodeFirmware, firmware_rows, created, batch=2000)
    m.FirmwareComponent.objects.bulk_create(index_rows, batch_size=5000)


def _health_policies() -> None:
    """The demo grades health signals exactly as a fresh install does: the default rows (migrated already; ensured
    again here for a database whose rows were deleted). Older versions of the demo wrote NVIDIA rows of their own,
    which outranked the defaults (a vendor row is more specific) and only warned on Xid 94; they are removed when
    they are still exact copies of what the demo wrote, so an operator's edit stays."""
    nvidia = m.Vendor.objects.filter(slug="nvidia").first()
    if nvidia is not None:
        for kind, code, severity, action, fails, desc in _OLD_DEMO_NVIDIA_POLICIES:
            m.HealthPolicy.objects.filter(
                vendor=nvidia,
                kind=kind,
                code=code,
                severity=severity,
                action=action,
                marks_failed=fails,
                description=desc,
            ).delete()
    health_policies_ensure()


# What older demos wrote for NVIDIA (kind, code, severity, action, marks_failed, description): removed, see above.
_OLD_DEMO_NVIDIA_POLICIES = [
    ("xid", "13", "warning", "monitor", False, "Graphics engine exception (usually the application)"),
    ("xid", "31", "warning", "monitor", False, "GPU memory page fault (usually the application)"),
    ("xid", "43", "warning", "monitor", False, "GPU stopped processing (application)"),
    ("xid", "45", "info", "monitor", False, "Preemptive cleanup after an application fault"),
    ("xid", "48", "critical", "rma", True, "Double-bit ECC error"),
    ("xid", "61", "warning", "reset", False, "Internal micro-controller breakpoint/warning"),
    ("xid", "62", "critical", "drain_repair", True, "Internal micro-controller halt"),
    ("xid", "63", "warning", "reset", False, "ECC page retirement or row remapping recorded"),
    ("xid", "64", "critical", "rma", True, "ECC page retirement or row remapping failure"),
    ("xid", "74", "critical", "drain_repair", True, "NVLink error"),
    ("xid", "79", "critical", "drain_repair", True, "GPU has fallen off the bus"),
    ("xid", "92", "critical", "drain_repair", True, "High single-bit ECC error rate"),
    ("xid", "94", "warning", "reset", False, "Contained ECC error"),
    ("xid", "95", "critical", "drain_repair", True, "Uncontained ECC error"),
    ("xid", "", "warning", "monitor", False, "Other Xid"),
]


def _site(spec: SiteSpec) -> m.Site:
    site, _ = m.Site.objects.get_or_create(
        code=spec.code, defaults={"name": spec.name, "region": spec.region, "timezone": spec.timezone}
    )
    return site


def _orgs(group: Group, site: m.Site) -> tuple[m.Cluster, m.Tenant]:
    kind = "kubernetes" if "ascend" in group.cluster or "dcu" in group.cluster else "slurm"
    cluster, _ = m.Cluster.objects.get_or_create(name=group.cluster, defaults={"site": site, "kind": kind})
    tenant, _ = m.Tenant.objects.get_or_create(
        slug=group.tenant,
        defaults={
            "name": group.tenant.replace("-", " ").title(),
            "kind": "customer" if "acme" in group.tenant else "team",
        },
    )
    return cluster, tenant


def _fabrics(site: m.Site, compute_name: str) -> m.Fabric:
    ib = "ib" in compute_name
    compute, _ = m.Fabric.objects.get_or_create(
        name=compute_name,
        defaults={
            "site": site,
            "kind": "infiniband" if ib else "roce",
            "purpose": "compute",
            "is_rail_optimized": True,
            "rail_count": CARDS_PER_NODE,
            "scalable_unit_size": 32,
        },
    )
    m.Fabric.objects.get_or_create(
        name=f"{site.code}-roce-storage", defaults={"site": site, "kind": "roce", "purpose": "storage"}
    )
    m.Fabric.objects.get_or_create(
        name=f"{site.code}-mgmt", defaults={"site": site, "kind": "ethernet", "purpose": "management"}
    )
    return compute


def _stock(site: m.Site) -> m.StockLocation:
    wh, _ = m.StockLocation.objects.get_or_create(site=site, name="warehouse", defaults={"kind": "warehouse"})
    m.StockLocation.objects.get_or_create(site=site, name="spares-shelf-A", defaults={"kind": "shelf", "parent": wh})
    return wh


def _bulk(model, rows, created: list, batch: int = 2000) -> list:
    objs = model.objects.bulk_create(rows, batch_size=batch)
    created.extend(objs)
    return objs


@transaction.atomic
def _load_group(group: Group, spec: SiteSpec, progress: Progress, small: bool) -> int:
    """Create one group of nodes with racks, cards, HCAs, rail leaves and cables. Returns nodes created."""
    now = _now()
    site = _site(spec)
    cluster, tenant = _orgs(group, site)
    fabric = _fabrics(site, group.fabric)
    warehouse = _stock(site)
    server_model = m.ServerModel.objects.select_related("accelerator_model__vendor").get(name=group.server_model)
    accel_model = server_model.accelerator_model
    vendor = accel_model.vendor
    created: list = []  # everything, for the change records

    room, _ = m.Room.objects.get_or_create(site=site, name=f"hall-{group.prefix.split('-')[1]}")
    rack_count = -(-group.count // NODES_PER_RACK)
    racks = _bulk(
        m.Rack,
        [
            m.Rack(
                room=room,
                name=f"{group.prefix}-r{r + 1:03d}",
                row=f"row-{r // 10 + 1:02d}",
                u_height=48,
                power_budget_kw=Decimal("45.00"),
                cooling="liquid" if vendor.slug == "nvidia" else "air",
            )
            for r in range(rack_count)
        ],
        created,
    )

    net = ipaddress.ip_network(spec.net)
    existing_bmc = m.Node.objects.filter(site=site).count()
    nodes = []
    for i in range(group.count):
        rack = racks[i // NODES_PER_RACK]
        status = "active"
        if small and i == group.count - 1:
            status = "received"  # waits for provisioning
        elif small and i == group.count - 2:
            status = "burn_in"
        racked = status != "received"
        nodes.append(
            m.Node(
                hostname=f"{group.prefix}-{i + 1:04d}",
                serial=f"{vendor.slug[:2].upper()}{group.prefix[-4:].upper()}{i + 1:06d}",
                asset_tag=f"AT-{spec.code.upper()}-{group.prefix[-4:].upper()}-{i + 1:05d}",
                server_model=server_model,
                bmc_address=str(net[existing_bmc + i + 10]),
                status=status,
                health="ok",
                role="compute",
                site=site,
                rack=rack if racked else None,
                position=(1 + (i % NODES_PER_RACK) * server_model.u_height) if racked else None,
                cluster=cluster if racked else None,
                tenant=tenant if racked else None,
                os_name="Ubuntu 22.04.4 LTS" if vendor.slug == "nvidia" else "openEuler 22.03 LTS SP3",
                kernel="5.15.0-119-generic" if vendor.slug == "nvidia" else "5.10.0-182.0.0.95.oe2203sp3.aarch64",
                cpu_model="Intel Xeon Platinum 8480+"
                if vendor.slug == "nvidia"
                else ("HiSilicon Kunpeng 920 7265" if vendor.slug == "ascend" else "Hygon C86 7390"),
                cpu_count=2,
                memory_gib=2048 if vendor.slug == "nvidia" else 1536,
                last_seen_at=now if racked else None,
                po_number=f"PO-2026-{group.prefix[-4:].upper()}",
                supplier={"nvidia": "Supermicro", "ascend": "Huawei", "hygon": "Sugon"}[vendor.slug],
                purchase_date=dt.date(2026, 3, 1),
                warranty_end=dt.date(2029, 3, 1),
            )
        )
    nodes = _bulk(m.Node, nodes, created)
    progress("nodes", len(nodes))
    m.RackUnit.objects.bulk_create(
        [
            m.RackUnit(rack_id=n.rack_id, face=n.face, unit=u, node=n)
            for n in nodes
            if n.rack_id
            for u in range(n.position, n.position + server_model.u_height)
        ],
        batch_size=5000,
    )
    _bulk(
        m.Component,
        [
            m.Component(node=n, kind="cpu", slot=f"CPU{s}", model_name=n.cpu_model, vendor_name=n.cpu_model.split()[0])
            for n in nodes
            for s in range(n.cpu_count)
        ],
        created,
        batch=5000,
    )

    cards = []
    prefix = {"nvidia": "1654", "ascend": "1023", "hygon": "HG"}[vendor.slug]
    for n_i, n in enumerate(nodes):
        for slot in range(CARDS_PER_NODE):
            serial = f"{prefix}{spec.code.upper()}{group.prefix[-4:].upper()}{n_i:05d}{slot}"
            bus = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"][slot]
            cards.append(
                m.Accelerator(
                    model=accel_model,
                    serial=serial,
                    uuid=f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, serial)}" if vendor.slug == "nvidia" else None,
                    lifecycle="installed",
                    health="ok",
                    site=site,
                    node=n,
                    slot_index=slot,
                    pci_bus_id=f"0000:{bus}:00.0",
                    firmware_version="96.00.74.00.01" if vendor.slug == "nvidia" else "",
                    driver_version=BASELINE[vendor.slug][0][1],
                    last_seen_at=n.last_seen_at,
                    po_number=n.po_number,
                    supplier=n.supplier,
                    purchase_date=n.purchase_date,
                    warranty_end=n.warranty_end,
                )
            )
    cards = _bulk(m.Accelerator, cards, created, batch=5000)
    progress("accelerators", len(cards))
    placements_write(opened=[placement_build(accelerator=c, note="demo fleet", at=now) for c in cards], batch_size=5000)

    # Spares at the site's warehouse: about 1.5% of the installed base, at least 4.
    spares = _bulk(
        m.Accelerator,
        [
            m.Accelerator(
                model=accel_model,
                serial=f"{prefix}{spec.code.upper()}{group.prefix[-4:].upper()}S{s:04d}",
                lifecycle="in_stock",
                health="ok",
                site=site,
                stock_location=warehouse,
                po_number=f"PO-2026-SPARE-{spec.code.upper()}",
                supplier=nodes[0].supplier,
            )
            for s in range(max(4, len(cards) * 15 // 1000))
        ],
        created,
        batch=5000,
    )
    placements_write(
        opened=[placement_build(accelerator=c, note="demo spare", at=now) for c in spares], batch_size=5000
    )
    # Their receipts on the stock ledger, which the stock overview and the minimum-stock check count.
    receipts_write(cards=spares, reason=f"demo fleet: spares of {group.prefix}", at=now)

    packages = {(p.component, p.version): p for p in m.DriverPackage.objects.all()}
    _bulk(
        m.InstalledSoftware,
        [
            m.InstalledSoftware(node=n, component=c, version=v, package=packages.get((c, v)))
            for n in nodes
            if n.status != "received"
            for c, v in BASELINE[vendor.slug]
        ],
        created,
        batch=5000,
    )

    _firmware_rows(nodes, cards, server_model, accel_model, created)
    _fabric_build(group, site, fabric, nodes, vendor, created)
    progress("links", 0)

    records_write(records_for_bulk(created=created, reason=f"demo fleet: {group.prefix}"))

    # A few failed cards, each with its health event, so the repair workflow has work to do (recorded after the
    # creations, so each object's history reads create, then update).
    if small:
        failed = [cards[3], cards[CARDS_PER_NODE * 5 + 6]]
        for card in failed:
            card.health, card.health_detail, card.health_changed_at = (
                "failed",
                "XID 79: GPU has fallen off the bus"
                if vendor.slug == "nvidia"
                else "Health Critical (error code 0x80E18401)",
                now,
            )
            tracked_update(
                m.Accelerator.objects.filter(pk=card.pk),
                reason="demo data",
                health=card.health,
                health_detail=card.health_detail,
                health_changed_at=now,
            )
            tracked_update(m.Node.objects.filter(pk=card.node_id), reason="demo data", health="failed")
            kind, code = ("xid", "79") if vendor.slug == "nvidia" else ("vendor_health", "critical")
            m.HealthEvent.objects.create(
                node_id=card.node_id,
                accelerator=card,
                kind=kind,
                code=code,
                severity="critical",
                action="drain_repair",
                message=card.health_detail,
                dedup_key=f"{card.pk}:{kind}:{code}",
                first_seen_at=now,
                last_seen_at=now,
            )
    return len(nodes)


def _fabric_build(
    group: Group, site: m.Site, fabric: m.Fabric, nodes: list[m.Node], vendor: m.Vendor, created: list
) -> None:
    """HCA i of every node in a scalable unit -> rail leaf i of that unit (rail-optimised), one cable each."""
    switch_vendor = m.Vendor.objects.get(slug="nvidia" if "ib" in fabric.name else "arista")
    su_size = fabric.scalable_unit_size
    su_count = -(-len(nodes) // su_size)
    first_su = (
        m.Switch.objects.filter(fabric=fabric)
        .values_list("scalable_unit", flat=True)
        .order_by("-scalable_unit")
        .first()
    )
    first_su = (first_su or 0) + 1
    leaves = []
    for su in range(su_count):
        for rail in range(CARDS_PER_NODE):
            leaves.append(
                m.Switch(
                    name=f"{fabric.name}-su{first_su + su:03d}-leaf{rail}",
                    vendor=switch_vendor,
                    model_name="QM9700" if switch_vendor.slug == "nvidia" else "7060X5-64PE",
                    os_name="MLNX-OS" if switch_vendor.slug == "nvidia" else "EOS",
                    # netmiko device types: MLNX-OS (Onyx) on the Quantum IB leaves, EOS on the RoCE leaves.
                    platform="mellanox_mlnxos" if switch_vendor.slug == "nvidia" else "arista_eos",
                    role="leaf",
                    fabric=fabric,
                    rail=rail,
                    scalable_unit=first_su + su,
                    site=site,
                )
            )
    leaves = _bulk(m.Switch, leaves, created)
    ports = _bulk(
        m.SwitchPort,
        [
            m.SwitchPort(switch=leaf, name=f"p{p}", speed_mbps=400000, admin_state="up", oper_state="up")
            for leaf in leaves
            for p in range(1, su_size + 1)
        ],
        created,
        batch=5000,
    )
    port_by = {(p.switch_id, p.name): p for p in ports}
    nic_kind = "infiniband" if fabric.kind == "infiniband" else "roce"
    nics = _bulk(
        m.Nic,
        [
            m.Nic(
                node=n,
                name=f"mlx5_{rail}" if vendor.slug != "ascend" else f"hccn{rail}",
                kind=nic_kind,
                model_name="ConnectX-7" if vendor.slug != "ascend" else "Ascend integrated RoCE",
                rail=rail,
                node_guid=f"0x{n.pk:08x}{rail:04x}a0" if nic_kind == "infiniband" else "",
            )
            for n in nodes
            for rail in range(CARDS_PER_NODE)
        ],
        created,
        batch=5000,
    )
    nports = _bulk(
        m.NicPort,
        [
            m.NicPort(
                nic=nic,
                name="1",
                speed_mbps=400000 if vendor.slug != "ascend" else 200000,
                link_state="up",
                guid=f"0x{nic.node_id:08x}{nic.rail:04x}a1" if nic_kind == "infiniband" else "",
                mac=""
                if nic_kind == "infiniband"
                else f"b8:3f:d2:{(nic.node_id >> 8) & 0xFF:02x}:{nic.node_id & 0xFF:02x}:{nic.rail:02x}",
            )
            for nic in nics
        ],
        created,
        batch=5000,
    )
    links = []
    for idx, (nic, nport) in enumerate(zip(nics, nports, strict=True)):
        node_i = idx // CARDS_PER_NODE
        su, pos = divmod(node_i, su_size)
        leaf = leaves[su * CARDS_PER_NODE + nic.rail]
        links.append(
            m.Link(
                fabric=fabric,
                a_nic_port=nport,
                b_switch_port=port_by[(leaf.pk, f"p{pos + 1}")],
                cable_type="aoc" if "ib" in fabric.name else "dac",
                status="connected",
            )
        )
    _bulk(m.Link, links, created, batch=5000)


def planner_statistics_refresh() -> None:
    """ANALYZE: right after a bulk load the tables have no planner statistics until autovacuum gets to them, and
    PostgreSQL picks nested loops over 100,000-row joins (a cluster's rollout facts: 6 s, not 0.07 s)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def demo_load(*, scale: str = "small", progress: Progress | None = None, only: str | None = None) -> dict[str, int]:
    """Load the demo fleet (idempotent). Returns counts of what this run created."""
    progress = progress or (lambda what, n: None)
    groups = SMALL if scale == "small" else LARGE
    specs = {s.code: s for s in SITES}
    result = {"groups_created": 0, "nodes_created": 0}
    with change_context(source=ChangeSource.IMPORT):
        with transaction.atomic():
            _catalog()
        for group in groups:
            if only and group.prefix != only:
                continue
            if m.Node.objects.filter(hostname=f"{group.prefix}-0001").exists():
                continue
            result["nodes_created"] += _load_group(group, specs[group.site], progress, small=scale == "small")
            result["groups_created"] += 1
        # The large fleet's sites keep a weekly window; the small demo's sites have none, so a tour of the demo (and
        # the suite) can start rollouts and provisioning at any hour.
        demo_windows_load(sorted({g.site for g in groups if g in LARGE}))
        if result["groups_created"]:
            demo_service_history_load()
        if scale == "small":
            demo_repeat_offender_load()
        if result["groups_created"]:
            # Card-hours of the months the demo's history covers (the hourly beat task keeps the last two current).
            demo_capacity_load()
            capacity_rollup(months=7)
    return result


def demo_totals(scale: str) -> dict[str, int]:
    groups = SMALL if scale == "small" else LARGE
    nodes = sum(g.count for g in groups)
    return {"nodes": nodes, "accelerators": nodes * CARDS_PER_NODE}
