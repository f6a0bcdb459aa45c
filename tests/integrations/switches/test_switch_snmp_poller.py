"""The real pysnmp poller against a real snmpsim agent serving six recorded switches.

Proves: GETBULK walks, numeric OIDs, hex-encoded strings, masked values, ifName/ifHighSpeed, ENTITY chassis
and Juniper's jnxBox fallback, LLDP local-port resolution through lldpLocPortTable, and both SNMPv2c and v3.
"""

from __future__ import annotations

import pytest

from integrations.exceptions import PermanentError, TransientError
from integrations.ports import SnmpCredential, SnmpTarget, SwitchSnapshot
from integrations.switches.snmp import PysnmpPoller

ARISTA = "librenms_arista-eos_dcs-7050tx-128"
NXOS = "librenms_cisco-nexus-3064pq_nxos7"
CUMULUS = "librenms_cumulus-on-mellanox"
DELL = "librenms_dell-os10"
HUAWEI = "librenms_huawei-s5720_vrp"
JUNIPER = "librenms_juniper-qfx5100-48s"

# Values read from the .snmprec files (sysName is "<private>" in all six LibreNMS recordings: masked -> None).
EXPECTED = {
    ARISTA: {
        "descr": "Arista Networks EOS version 4.15.3F",
        "model": "DCS-7050S-52",
        "serial": "JPE00000000",
        "ports": 55,
        "uptime": 27933161,
        "oid": "1.3.6.1.4.1.30065.1.3011.7050.1958.128",
    },
    NXOS: {
        "descr": "Cisco NX-OS(tm) nxos.7.0.3.I7.8.bin",
        "model": "N3K-C3064PQ-10GX",
        "serial": None,
        "ports": 54,
        "uptime": 2620688,
        "oid": "1.3.6.1.4.1.9.12.3.1.3.1163",
    },
    CUMULUS: {
        "descr": "Linux mlnx-sw-1 4.19.0-cl-1-amd64",
        "model": None,
        "serial": None,
        "ports": 69,
        "uptime": None,
        "oid": "1.3.6.1.4.1.8072.3.2.10",
    },
    DELL: {
        "descr": "Dell EMC Networking OS10 Enterprise.",
        "model": "S4128F-ON",
        "serial": "CN02NK09282988AT0259",
        "ports": 36,
        "uptime": 658,
        "oid": "1.3.6.1.4.1.674.11000.5000.100.2.1.7",
    },
    HUAWEI: {
        "descr": "S5720-56C-PWR-EI-AC\nHuawei Versatile Routing Platform",
        "model": "HUAWEI S5720 Routing Switch",
        "serial": "2102359576DMHC000120",
        "ports": 65,
        "uptime": 281568,
        "oid": "1.3.6.1.4.1.2011.2.23.291",
    },
    JUNIPER: {
        "descr": "Juniper Networks, Inc. qfx5100-48s-6q",
        "model": "Juniper QFX5100-48S-6Q Switch",
        "serial": "TA3716123456",
        "ports": 50,
        "uptime": 31692298,
        "oid": "1.3.6.1.4.1.2636.1.1.1.4.82.5",
    },
}

# (local_port, remote_chassis_id, remote_port, remote_system) per recording, all rows.
NEIGHBORS = {
    ARISTA: [
        ("Ethernet1", "00:1b:21:bb:e6:f0", "00:1b:21:bb:e6:f0", ""),
        ("Ethernet3", "00:1b:21:bb:e6:ea", "00:1b:21:bb:e6:ea", ""),
        ("Ethernet5", "00:1b:21:bb:e6:f6", "00:1b:21:bb:e6:f6", ""),
        ("Ethernet6", "00:1b:21:bb:e6:f5", "00:1b:21:bb:e6:f5", ""),
        ("Ethernet47", "c4:7d:4f:d4:49:1d", "\\A 7050s-estudio Et47\\", "3750E-Estudio1.example.net"),
        ("Ethernet48", "c4:7d:4f:c4:46:c0", "Te1/3", "4900M-CORE.example.net"),
    ],
    NXOS: [("Ethernet1/49", "18:e7:28:92:28:78", "Ethernet1/49", "")],
    CUMULUS: [],
    DELL: [
        ("mgmt1/1/1", "14:18:77:dd:6f:ca", "Gi1/0/6", "1007-mnt-1"),
        ("ethernet1/1/25", "4c:d9:8f:fb:1e:fe", "ethernet1/1/25", "1007-lan-2"),
        ("ethernet1/1/26", "4c:d9:8f:fb:1e:fe", "ethernet1/1/26", "1007-lan-2"),
        ("ethernet1/1/29", "e4:fc:82:36:23:c0", "517", "core-1"),
        ("ethernet1/1/30", "f4:8e:38:55:de:f6", "TenGigabitEthernet 1/43", ""),  # sysName "Not Advertised"
    ],
    HUAWEI: [
        ("GigabitEthernet0/0/14", "14:a0:f8:cf:af:39", "GigabitEthernet0/0/7", "LNS-Huawei"),
        ("XGigabitEthernet0/0/1", "b4:fb:f9:ad:b8:81", "10GE1/0/42", "CE-NG"),
        ("XGigabitEthernet0/0/2", "48:8e:ef:71:61:60", "XGigabitEthernet0/0/1", "Zrih"),
        ("XGigabitEthernet0/0/4", "b4:fb:f9:ad:b8:81", "10GE1/0/41", "CE-NG"),
        ("MEth0/0/1", "48:8e:ef:71:68:10", "GigabitEthernet0/0/1", "pm-test"),
    ],
    JUNIPER: [
        ("xe-0/0/0", "50:c5:8d:12:34:56", "2150", "devicea"),
        ("xe-0/0/1", "80:71:1f:12:34:56", "2447", "deviceb"),
    ],
}


@pytest.fixture(scope="module")
def snapshots(snmpsim) -> dict[str, SwitchSnapshot]:
    """All six recordings polled in one concurrent batch (bounded to 3 at once, to exercise the semaphore)."""
    targets = [SnmpTarget(snmpsim.host, SnmpCredential(community=c), port=snmpsim.port) for c in EXPECTED]
    results = PysnmpPoller(concurrency=3).poll_many(targets)
    for community, result in zip(EXPECTED, results, strict=True):
        assert not isinstance(result, Exception), f"{community}: {result}"
    return dict(zip(EXPECTED, results, strict=True))


@pytest.mark.parametrize("community", list(EXPECTED))
def test_system_facts(snapshots, community):
    system, want = snapshots[community].system, EXPECTED[community]
    assert system.name is None  # "<private>" in every recording
    assert system.description.startswith(want["descr"])
    assert system.object_id == want["oid"]
    assert system.model == want["model"]
    assert system.serial == want["serial"]
    assert system.uptime_s == want["uptime"]
    assert len(snapshots[community].ports) == want["ports"]


@pytest.mark.parametrize("community", list(NEIGHBORS))
def test_lldp_neighbors(snapshots, community):
    got = [
        (n.local_port, n.remote_chassis_id, n.remote_port, n.remote_system) for n in snapshots[community].lldp_neighbors
    ]
    assert got == NEIGHBORS[community]


def test_port_details(snapshots):
    arista = {p.name: p for p in snapshots[ARISTA].ports}
    assert arista["Ethernet1"].speed_mbps == 10000
    assert arista["Ethernet1"].mac == "00:1c:73:65:8e:3a"
    assert arista["Ethernet1"].alias == "\\A EDICION-1\\"
    assert (arista["Ethernet1"].admin_state, arista["Ethernet1"].oper_state) == ("up", "up")
    assert arista["Ethernet10"].admin_state == "down"
    assert arista["Ethernet10"].oper_state == "down"  # notPresent(6)
    assert arista["Vlan13"].is_physical is False

    nxos = {p.name: p for p in snapshots[NXOS].ports}
    assert nxos["Ethernet1/52"].speed_mbps == 40000
    huawei = {p.name: p for p in snapshots[HUAWEI].ports}
    assert huawei["InLoopBack0"].mac == ""  # all-zero ifPhysAddress is no MAC
    cumulus = {p.name: p for p in snapshots[CUMULUS].ports}
    # Cumulus recording: no ifHighSpeed/ifSpeed/ifPhysAddress/ifAdminStatus columns at all.
    assert cumulus["swp6"].speed_mbps is None and cumulus["swp6"].oper_state == "up"
    assert cumulus["swp6"].admin_state == "unknown"
    juniper = {p.name: p for p in snapshots[JUNIPER].ports}
    assert juniper["ge-0/0/45.0"].speed_mbps == 1000


def test_entity_modules(snapshots):
    nxos_modules = snapshots[NXOS].system.modules
    assert [m.model for m in nxos_modules][:1] == ["N3K-C3064PQ-10GX"]
    assert any(m.serial == "CN00YJWK282988AP0421" for m in snapshots[DELL].system.modules)
    assert snapshots[JUNIPER].system.modules == ()  # no ENTITY-MIB physical table


def test_snmpv3_auth_priv(snmpsim):
    # snmpsim's default USM user; the v3 context name picks the recording.
    cred = SnmpCredential(
        version="3",
        user="simulator",
        auth_key="auctoritas",
        auth_protocol="md5",
        priv_key="privatus",
        priv_protocol="des",
        context=DELL,
    )
    snapshot = PysnmpPoller().poll(SnmpTarget(snmpsim.host, cred, port=snmpsim.port))
    assert snapshot.system.serial == "CN02NK09282988AT0259"


def test_snmpv3_wrong_key_is_permanent(snmpsim):
    cred = SnmpCredential(version="3", user="simulator", auth_key="wrong-key-123", auth_protocol="md5", context=DELL)
    with pytest.raises((PermanentError, TransientError)) as info:
        PysnmpPoller().poll(SnmpTarget(snmpsim.host, cred, port=snmpsim.port, timeout_s=0.5, retries=0))
    assert "127.0.0.1" in str(info.value)


def test_wrong_community_times_out_as_transient(snmpsim):
    target = SnmpTarget(
        snmpsim.host, SnmpCredential(community="no-such-community"), port=snmpsim.port, timeout_s=0.3, retries=0
    )
    with pytest.raises(TransientError, match="no SNMP response"):
        PysnmpPoller().poll(target)


def test_one_bad_target_does_not_spoil_the_batch(snmpsim):
    good = SnmpTarget(snmpsim.host, SnmpCredential(community=JUNIPER), port=snmpsim.port)
    bad = SnmpTarget(snmpsim.host, SnmpCredential(community="nope"), port=snmpsim.port, timeout_s=0.3, retries=0)
    first, second = PysnmpPoller().poll_many([bad, good])
    assert isinstance(first, TransientError)
    assert isinstance(second, SwitchSnapshot) and second.system.serial == "TA3716123456"
