"""`ibnetdiscover -p` parsing on the real captures, link de-duplication, storage (scoped to the swept subnet) and
cabling over GUIDs."""

from __future__ import annotations

import json
import logging
import os
import threading
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from cmdb.models import ChangeRecord, Fabric, Link, Nic, NicPort, Node, Switch, SwitchPort
from integrations.switches import infiniband
from integrations.switches.cabling import (
    Endpoint,
    FindingKind,
    Inventory,
    PlannedLink,
    canonical_guid,
    validate_cabling,
)
from integrations.switches.cabling_service import fabric_cabling_report
from integrations.switches.infiniband import (
    IbPort,
    ib_links,
    ib_observations,
    ibnetdiscover_apply,
    parse_ibnetdiscover_ports,
)
from integrations.switches.models import ObservedLink, PollRun
from inventory_agents.services.health import health_policies_ensure
from inventory_agents.services.tokens import agent_token_issue
from tests.inventory_agents.server.ingest_support import REPORTS_URL, make_node, report_of

SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))
IB = SHARED / "infiniband"


def _read(name: str) -> str:
    path = IB / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path.read_text()


COMPUTE = ("ib-i1l1s01", "ib-i4l1s01")  # the switches of the capture with cables (ib-i7l2s01 has none up)
STORAGE = ("ib-s1", "ib-s2", "ib-s3")


def compute_report(*, without: str = "") -> str:
    """The captured subnet; `without` a switch (powered off: neither its ports nor its cables are listed)."""
    return "".join(
        line + "\n"
        for line in _read("treydock_ibnetdiscover_test.out").splitlines()
        if not without or f"'{without}'" not in line
    )


def storage_report(*, without: str = "") -> str:
    """A second subnet with its own subnet manager: ib-s1 with ib-s2 and ib-s3 below it, one host on each. LIDs
    are per subnet, so they repeat the compute subnet's."""

    def sw(n: int, port: int) -> tuple[str, str]:
        return f"SW {1719 + n:>5} {port:>2} 0x0002c90300aa{n:04x}", f"ib-s{n}"

    def ca(n: int) -> tuple[str, str]:
        return f"CA {130 + n:>5}  1 0x0002c90300bb{n:04x}", f"s000{n} HCA-1"

    cables = [(sw(1, 1), ca(1)), (sw(1, 2), sw(2, 1)), (sw(1, 3), sw(3, 1)), (sw(2, 2), ca(2)), (sw(3, 2), ca(3))]
    lines = [f"{a[0]} 4x HDR - {b[0]} ( '{a[1]}' - '{b[1]}' )" for x, y in cables for a, b in ((x, y), (y, x))]
    return "".join(line + "\n" for line in lines if not without or f"'{without}'" not in line)


def observed(names: tuple[str, ...]) -> set[tuple[str, str]]:
    return set(
        ObservedLink.objects.filter(source="ibnetdiscover", local_device__in=names).values_list(
            "local_device", "local_port"
        )
    )


@pytest.fixture
def two_fabrics(fabric_site) -> tuple[Fabric, Fabric]:
    """The compute and the storage fabric in the CMDB, each switch in its own."""
    site, vendor = fabric_site
    compute = Fabric.objects.create(name="compute", kind="infiniband", purpose="compute", site=site)
    storage = Fabric.objects.create(name="storage", kind="infiniband", purpose="storage", site=site)
    for fabric, names in ((compute, COMPUTE), (storage, STORAGE)):
        for name in names:
            Switch.objects.create(name=name, vendor=vendor, site=site, fabric=fabric)
    return compute, storage


def test_ports_report_of_a_small_fabric():
    records = parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test.out"))
    assert len(records) == 9
    first = records[0]
    assert first.local == IbPort("CA", 134, 1, "0x7cfe9003003b4bde", "o0001 HCA-1")
    assert first.peer == IbPort("SW", 1719, 10, "0x7cfe9003009ce5b0", "ib-i1l1s01")
    assert (first.width, first.speed, first.local.host) == ("4x", "EDR", "o0001")
    down = [r for r in records if r.peer is None]
    assert [(r.local.description, r.local.port, r.speed) for r in down] == [
        ("ib-i4l1s01", 37, "???"),
        ("ib-i7l2s01", 80, "SDR"),
    ]

    links = ib_links(records)
    # 3 HCA cables + 1 inter-switch cable, each listed from both ends in the report (the p0001 one from both).
    assert len(links) == 4
    assert {(link.a.description, link.a.port, link.b.host, link.b.port) for link in links} == {
        ("ib-i1l1s01", 10, "o0001", 1),
        ("ib-i1l1s01", 11, "o0002", 1),
        ("ib-i4l1s01", 35, "p0001", 1),
        ("ib-i1l1s01", 1, "ib-i1l2s01", 1),
    }


def test_unquoted_description_edge_case():
    (record,) = parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test3.out"))
    assert record.local == IbPort("SW", 479, 22, "0x0002c9020040f161", "Infiniscale-IV Mellanox Technologies")
    assert (record.speed, record.peer) == ("QDR", None)
    assert ib_links([record]) == []


def test_cabling_by_port_guid():
    observed = ib_observations(parse_ibnetdiscover_ports(_read("treydock_ibnetdiscover_test.out")))
    o1 = Endpoint("o0001", "mlx5_0/1", guids=frozenset({"0x7cfe9003003b4bde"}), hca="mlx5_0")
    o2 = Endpoint("o0002", "mlx5_0/1", guids=frozenset({"0x7cfe9003003b4b96"}), hca="mlx5_0")
    # Planned o0001 on port 11 and o0002 on port 10: the report shows them crossed.
    planned = [PlannedLink("ib-i1l1s01", "10", o2), PlannedLink("ib-i1l1s01", "11", o1)]
    findings = validate_cabling(
        planned=planned, observed=observed, inventory=Inventory([o1, o2]), polled_switches={"ib-i1l1s01"}
    )
    by_port = {f.port: f for f in findings}
    assert by_port["10"].kind == FindingKind.MISWIRED and str(by_port["10"].swap_partner) == "ib-i1l1s01:11"
    assert by_port["1"].kind == FindingKind.UNKNOWN_NEIGHBOR  # the spine is not in this inventory


def test_store_sweep(fabric_site):
    site, vendor = fabric_site
    leaf = Switch.objects.create(name="ib-i1l1s01", vendor=vendor, site=site)
    run = ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))
    rows = ObservedLink.objects.filter(source="ibnetdiscover")
    assert run.status == "ok" and rows.count() == 4 == run.neighbors_seen
    row = rows.get(switch=leaf, local_port="10")
    assert (row.remote_port_guid, row.remote_system, row.local_lid, row.remote_lid) == (
        "0x7cfe9003003b4bde",
        "o0001",
        1719,
        134,
    )
    ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))  # a new sweep replaces the old rows
    assert ObservedLink.objects.filter(source="ibnetdiscover").count() == 4


def test_storage_report_parses_like_a_capture():
    records = parse_ibnetdiscover_ports(storage_report())
    assert len(records) == 10 and len(ib_links(records)) == 5
    assert records[0].local == IbPort("SW", 1720, 1, "0x0002c90300aa0001", "ib-s1")
    assert records[0].peer == IbPort("CA", 131, 1, "0x0002c90300bb0001", "s0001 HCA-1")


@pytest.mark.parametrize("in_cmdb", [True, False], ids=["cmdb-fabrics", "not-in-cmdb"])
def test_two_subnets_swept_alternately_keep_each_others_observations(request, fabric_site, in_cmdb):
    """Each subnet is swept on its own (its own subnet manager): a sweep replaces its subnet's observations only,
    whether its switches are in CMDB fabrics or unknown to the CMDB."""
    if in_cmdb:
        request.getfixturevalue("two_fabrics")
    compute, storage = compute_report(), storage_report()
    ibnetdiscover_apply(compute)
    ibnetdiscover_apply(storage)
    rows = set(ObservedLink.objects.values_list("id", "local_device", "local_port"))
    assert observed(COMPUTE) == {("ib-i1l1s01", "1"), ("ib-i1l1s01", "10"), ("ib-i1l1s01", "11"), ("ib-i4l1s01", "35")}
    assert len(observed(STORAGE)) == 7
    for text in (compute, storage, compute):
        ibnetdiscover_apply(text)
        assert set(ObservedLink.objects.values_list("id", "local_device", "local_port")) == rows  # the same rows
    assert not ChangeRecord.objects.filter(content_type__model="observedlink", action="delete").exists()
    if in_cmdb:
        assert ObservedLink.objects.filter(switch__fabric__name="storage").count() == 7


@pytest.mark.parametrize("in_cmdb", [True, False], ids=["cmdb-fabrics", "not-in-cmdb"])
def test_a_switch_gone_from_its_subnet_loses_its_observations(request, fabric_site, in_cmdb):
    """A powered-off switch is not in its subnet's report: its observations go with that subnet's next sweep (its
    CMDB fabric says it belongs there; for a switch in no fabric, the subnet's previous sweep had stored them)
    and stay when the other subnet is swept."""
    if in_cmdb:
        request.getfixturevalue("two_fabrics")
    ibnetdiscover_apply(compute_report())
    ibnetdiscover_apply(storage_report())
    ibnetdiscover_apply(compute_report(without="ib-i4l1s01"))
    assert observed(COMPUTE) == {("ib-i1l1s01", "1"), ("ib-i1l1s01", "10"), ("ib-i1l1s01", "11")}
    assert len(observed(STORAGE)) == 7
    ibnetdiscover_apply(storage_report(without="ib-s2"))  # ib-s1's cable to it went dark too
    assert observed(STORAGE) == {("ib-s1", "1"), ("ib-s1", "3"), ("ib-s3", "1"), ("ib-s3", "2")}
    assert len(observed(COMPUTE)) == 3


def test_an_empty_report_removes_nothing(fabric_site):
    """No switch in the report (ibnetdiscover failed, or ran on a port that is down) says nothing about any subnet."""
    ibnetdiscover_apply(compute_report())
    run = ibnetdiscover_apply("ibwarn: [1234] mad_rpc_open_port: can't open UMAD port (mlx5_0:1)\n")
    assert run.status == "ok" and run.neighbors_seen == 0
    assert len(observed(COMPUTE)) == 4


def test_a_switch_in_the_wrong_cmdb_fabric_does_not_empty_that_fabric(two_fabrics, tmp_path, caplog):
    """The storage subnet holds a switch the CMDB puts in the compute fabric. Its sweep must not take the compute
    fabric for its own (which would drop every compute observation): it keeps what it did not see and says why;
    --fabric names the subnet's fabric, and then a switch gone from it loses its observations."""
    compute, _ = two_fabrics
    Switch.objects.filter(name="ib-s3").update(fabric=compute)
    ibnetdiscover_apply(compute_report())
    with caplog.at_level(logging.WARNING, logger="integrations.switches.infiniband"):
        ibnetdiscover_apply(storage_report())
    assert "several fabrics (compute: ib-s3; storage: ib-s1, ib-s2)" in caplog.text
    assert len(observed(COMPUTE)) == 4 and len(observed(STORAGE)) == 7

    ibnetdiscover_apply(storage_report(without="ib-s2"))
    assert ("ib-s2", "2") in observed(STORAGE)  # which fabric is this sweep? Not guessed: kept
    assert len(observed(COMPUTE)) == 4

    report = tmp_path / "storage.txt"
    report.write_text(storage_report(without="ib-s2"))
    call_command("ib_discover", str(report), "--fabric", "storage", stdout=StringIO(), stderr=StringIO())
    assert observed(STORAGE) == {("ib-s1", "1"), ("ib-s1", "3"), ("ib-s3", "1"), ("ib-s3", "2")}
    assert len(observed(COMPUTE)) == 4  # ib-s3 was seen, so replaced; the compute switches were not in scope


def test_fabric_scopes_the_sweep_to_its_switches(two_fabrics, tmp_path):
    """--fabric compute: the compute switches' observations are replaced even those of a switch the sweep did not
    see; the storage fabric's are not touched."""
    ibnetdiscover_apply(compute_report())
    ibnetdiscover_apply(storage_report())
    report = tmp_path / "compute.txt"
    report.write_text(compute_report(without="ib-i4l1s01"))
    err = StringIO()
    call_command("ib_discover", str(report), "--fabric", "compute", stdout=StringIO(), stderr=err)
    assert "stored 3 switch-port observations" in err.getvalue()
    assert ("ib-i4l1s01", "35") not in observed(COMPUTE) and len(observed(STORAGE)) == 7


def test_fabric_refuses_a_sweep_of_another_subnet(two_fabrics, tmp_path):
    """A report with none of the named fabric's switches is another subnet (the wrong HCA port was swept): refused,
    naming the fabric and what the sweep saw, in a dry run too; nothing is stored."""
    ibnetdiscover_apply(storage_report())
    before = (set(ObservedLink.objects.values_list("id", "last_seen_at")), PollRun.objects.count())
    report = tmp_path / "compute.txt"
    report.write_text(compute_report())
    for dry_run in ([], ["--dry-run"]):
        with pytest.raises(CommandError) as refused:
            call_command("ib_discover", str(report), "--fabric", "storage", *dry_run, stdout=StringIO())
        message = str(refused.value)
        assert message.startswith("fabric storage: the sweep saw none of its switches")
        assert (
            "ib-i1l1s01 (compute), ib-i4l1s01 (compute), 'ib-i7l2s01' 0x08c0eb0300add20e (not in the CMDB)" in message
        )
    assert (set(ObservedLink.objects.values_list("id", "last_seen_at")), PollRun.objects.count()) == before
    with pytest.raises(CommandError, match="no fabric named 'storag'"):
        call_command("ib_discover", str(report), "--fabric", "storag", stdout=StringIO())


@pytest.mark.parametrize(
    "spelling", ["0x7cfe9003003b4bde", "7CFE9003003B4BDE", "7cfe:9003:003b:4bde", "0x7CFE9003003B4BDE"]
)
def test_guids_compare_by_value(spelling):
    assert canonical_guid(spelling) == "0x7cfe9003003b4bde"
    assert canonical_guid("0x2c9020040f161") == "0x0002c9020040f161"  # unpadded, as some imports have it
    assert canonical_guid("0x0") == canonical_guid("n/a") == ""


def test_a_bare_hex_guid_column_parses_too():
    (record,) = parse_ibnetdiscover_ports(
        "CA   134  1 7cfe9003003b4bde 4x EDR - SW  1719 10 0x7CFE9003009CE5B0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )"
    )
    assert (record.local.guid, record.peer.guid) == ("0x7cfe9003003b4bde", "0x7cfe9003009ce5b0")


def _ib_report(ca: str, node_guid: str, port_guid: str) -> list[dict]:
    """The agent's `infiniband` section (ibstat) for one single-port HCA."""
    return [
        {
            "ca": ca,
            "node_guid": node_guid,
            "firmware": "16.35.2000",
            "ports": [
                {
                    "port": 1,
                    "state": "active",
                    "phys_state": "linkup",
                    "rate_gbps": 100,
                    "port_guid": port_guid,
                    "link_layer": "infiniband",
                    "lid": 134,
                }
            ],
        }
    ]


def test_hcas_resolve_by_the_agents_port_guids(fabric_site, settings, client, django_capture_on_commit_callbacks):
    """ibnetdiscover's host ends are the HCA ports the node agents reported - whether the agent report came before
    the sweep or after it - and cabling validation judges them by those ports."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    health_policies_ensure()
    site, vendor = fabric_site
    fabric = Fabric.objects.create(name="ib-a", kind="infiniband", purpose="compute", site=site)
    leaf = Switch.objects.create(name="ib-i1l1s01", vendor=vendor, site=site, fabric=fabric)
    leaf4 = Switch.objects.create(name="ib-i4l1s01", vendor=vendor, site=site, fabric=fabric)
    o1, o2, p1 = (make_node(h, cards=0, nics=0, site=site) for h in ("o0001", "o0002", "p0001"))
    # Provisioning planned each node's HCA before any agent ran: placeholder ports without GUIDs.
    planned = {}
    for node, switch, port in ((o1, leaf, "10"), (o2, leaf, "11"), (p1, leaf4, "35")):
        nic = Nic.objects.create(node=node, name="mlx5_0", kind="infiniband", rail=0)
        planned[node.hostname] = NicPort.objects.create(nic=nic, name="1")
        Link.objects.create(
            fabric=fabric,
            a_nic_port=planned[node.hostname],
            b_switch_port=SwitchPort.objects.create(switch=switch, name=port),
        )
    # p0001's HCA came from an import that knows only the node GUID, spelled its own way (port 1 carries it).
    Nic.objects.filter(node=p1).update(node_guid="506B4B0300CC02A6")

    def report(node: Node, port_guid: str) -> None:
        node_guid = f"{port_guid[:-1]}0"  # not a port GUID of the sweep: only the port GUID can match
        body = json.dumps(report_of(node, infiniband=_ib_report("mlx5_0", node_guid, port_guid)))
        with django_capture_on_commit_callbacks(execute=True):
            response = client.generic(
                "POST",
                REPORTS_URL,
                body.encode(),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {agent_token_issue(node=node).token}",
            )
        assert response.json().get("status") == "applied", response.content

    report(o1, "0x7cfe9003003b4bde")  # o0001's agent reported before the sweep
    ibnetdiscover_apply(_read("treydock_ibnetdiscover_test.out"))
    rows = {r.local_port: r for r in ObservedLink.objects.filter(source="ibnetdiscover").select_related("nic_port")}
    assert rows["10"].nic_port == planned["o0001"] and rows["10"].node == o1
    assert rows["35"].nic_port == planned["p0001"]  # by node GUID + port number
    assert rows["11"].nic_port is None  # o0002's agent has not reported yet

    report(o2, "0x7cfe9003003b4b96")  # ... now it has: the sweep's observation points at its HCA port
    rows["11"].refresh_from_db()
    assert rows["11"].nic_port == planned["o0002"] and rows["11"].node == o2

    report(o2, "0x7cfe9003003b4b97")  # the HCA was replaced: the old sweep no longer describes this node
    rows["11"].refresh_from_db()
    assert (rows["11"].nic_port, rows["11"].node) == (None, None)

    kinds = {(f.switch, f.port): f.kind for f in fabric_cabling_report(fabric)}
    assert kinds[("ib-i1l1s01", "10")] == kinds[("ib-i4l1s01", "35")] == FindingKind.OK
    assert kinds[("ib-i1l1s01", "11")] == FindingKind.UNKNOWN_NEIGHBOR


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_store_one_after_the_other(monkeypatch):
    """A second sweep starting while the first is still storing (cron plus a manual run) waits for it, then keeps
    the rows the first wrote instead of inserting them again (which failed on the unique constraint)."""
    text = _read("treydock_ibnetdiscover_test.out")
    sync = infiniband.observations_sync
    stored, release = threading.Event(), threading.Event()

    def sync_then_hold(**kwargs):
        result = sync(**kwargs)
        if threading.current_thread().name == "first":  # hold the first sweep's transaction open
            stored.set()
            release.wait(timeout=30)
        return result

    monkeypatch.setattr(infiniband, "observations_sync", sync_then_hold)
    errors: dict[str, BaseException] = {}

    def sweep() -> None:
        name = threading.current_thread().name
        try:
            ibnetdiscover_apply(text, task_id=name)
        except BaseException as exc:  # reported by the assertion below
            errors[name] = exc
        finally:
            connection.close()

    first = threading.Thread(target=sweep, name="first")
    first.start()
    assert stored.wait(timeout=30)
    second = threading.Thread(target=sweep, name="second")
    second.start()
    second.join(timeout=1)
    assert second.is_alive()  # waiting for the first sweep
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert errors == {}
    rows = ObservedLink.objects.filter(source="ibnetdiscover")
    assert rows.count() == 4
    assert set(rows.values_list("poll_run__task_id", flat=True)) == {"second"}  # kept and touched by the second
    assert ChangeRecord.objects.filter(action="create", correlation_id="first").count() == 4
    assert not ChangeRecord.objects.filter(correlation_id="second").exists()
