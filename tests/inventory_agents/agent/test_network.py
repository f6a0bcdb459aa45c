"""PCI, NICs, InfiniBand and LLDP parsers: real lspci / lldpctl captures and the hand-written samples."""

from __future__ import annotations

import json

import pytest
from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import infiniband, lldp, nics, pci
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource, ToolError

COMMON = DATA / "node-common"


@pytest.mark.parametrize("name", ["jc_ubuntu20.10_lspci-mmv.txt", "jc_ubuntu20.10_lspci-nnmmv.txt"])
def test_lspci_captures(shared_fixtures, report_validator, name):
    text = (shared_fixtures / "lspci" / name).read_text()
    assert len(pci.parse_lspci(text)) == sum(line.startswith("Slot:") for line in text.splitlines())
    report, _ = build_report(DictSource({"lspci-vmm.txt": text}))
    assert_valid(report_validator, report)
    kept = {d["slot"]: d for d in report["pci_devices"]}
    assert set(kept) == {"0000:00:0f.0", "0000:02:01.0"}  # the VGA and the Ethernet controller
    nic = kept["0000:02:01.0"]
    assert (nic["vendor"], nic["device"]) == ("Intel Corporation", "82545EM Gigabit Ethernet Controller (Copper)")
    if "nn" in name:
        assert (nic["vendor_id"], nic["device_id"], nic["class_id"]) == ("8086", "100f", "0200")
        assert nic["subsystem_id"] == "15ad:0750"


def test_ip_link_sample():
    found = {
        n["name"]: n for n in nics.parse_ip_link((COMMON / "ip-link.json").read_text(), str(COMMON / "sys-class-net"))
    }
    assert "lo" not in found
    assert found["eno1"] == {
        "name": "eno1",
        "mac": "3c:ec:ef:4a:12:7e",
        "speed_mbps": 1000,
        "state": "up",
        "kind": "physical",
        "pci_bus_id": "0000:19:00.0",
        "mtu": 1500,
    }
    assert found["eno2"]["speed_mbps"] is None  # -1 in sysfs: link down
    assert found["ens2f0np0"]["master"] == "bond0" and found["ens2f0np0"]["kind"] == "physical"
    assert [found[n]["kind"] for n in ("bond0", "bond0.100", "docker0", "ibp94s0")] == [
        "bond",
        "vlan",
        "bridge",
        "infiniband",
    ]
    assert found["bond0"]["speed_mbps"] == 200000


def test_ip_link_garbage_is_an_error():
    with pytest.raises(ToolError):
        nics.parse_ip_link('Option "-j" is unknown, try "ip -help".')


def test_ibstat_sample():
    cas = infiniband.parse_ibstat((COMMON / "ibstat.txt").read_text())
    assert [ca["ca"] for ca in cas] == ["mlx5_0", "mlx5_1", "mlx5_bond_0"]
    hdr = cas[0]
    assert (hdr["node_guid"], hdr["firmware"], hdr["ca_type"]) == ("0xb8599f0300c81b2e", "20.39.1002", "MT4123")
    assert hdr["ports"] == [
        {
            "port": 1,
            "state": "active",
            "phys_state": "linkup",
            "rate_gbps": 200,
            "port_guid": "0xb8599f0300c81b2e",
            "link_layer": "infiniband",
            "lid": 1187,
            "sm_lid": 1,
        }
    ]
    assert cas[1]["ports"][0]["phys_state"] == "polling"
    assert cas[2]["ports"][0]["link_layer"] == "ethernet"  # RoCE


@pytest.mark.parametrize(
    "name",
    [
        "treydock_ibnetdiscover_test.out",
        "treydock_ibnetdiscover_test3.out",
        "treydock_perfquery_0x7cfe9003009ce5b0.out",
    ],
)
def test_other_infiniband_tools_output_is_rejected_cleanly(shared_fixtures, report_validator, name):
    report, _ = build_report(DictSource({"ibstat.txt": (shared_fixtures / "infiniband" / name).read_text()}))
    assert_valid(report_validator, report)
    assert report["infiniband"] == []
    assert [e["collector"] for e in report["collector_errors"]] == ["infiniband"]


def test_lldp_keyvalue_cumulus_capture(shared_fixtures):
    text = (shared_fixtures / "lldpctl" / "netboxagent_cumulus-dell-s4100.keyvalue.txt").read_text()
    first, second = lldp.parse_keyvalue(text)
    assert (first["local_port"], first["remote_chassis_id"], first["remote_system"]) == (
        "eno1",
        "e4:f0:04:b6:47:32",
        "toto-chassis.dc42",
    )
    assert (first["remote_port"], first["remote_port_description"]) == ("swp46", "BXVWNR2:lom2")
    # In this capture the eno2d1 block carries an eno1 chassis.name line: eno2d1 has no system name.
    assert (second["local_port"], second["remote_chassis_id"], second["remote_system"]) == (
        "eno2d1",
        "e4:f0:04:b6:4e:32",
        None,
    )
    assert second["remote_mgmt_ips"] == ["10.160.20.17", "fe80::e6f0:4ff:feb6:4e32"]


def test_lldp_keyvalue_multiline_description(shared_fixtures):
    text = (shared_fixtures / "lldpctl" / "netboxagent_dedibox2.keyvalue.txt").read_text()
    [neighbor] = lldp.parse_keyvalue(text)
    assert (neighbor["remote_system"], neighbor["remote_port"], neighbor["remote_port_description"]) == (
        "s35-b12.dc3",
        "Gi1/0/29",
        "GigabitEthernet1/0/29",
    )
    assert neighbor["remote_system_description"].endswith("Compiled Mon 16-Feb-15 08:16 by prod_rel_team")


def test_lldp_json_sample():
    first, second = lldp.parse_json((COMMON / "lldpctl.json").read_text())
    assert (first["local_port"], first["remote_system"], first["remote_port"]) == ("eno1", "mgmt-r12-a.dc1", "swp17")
    assert first["remote_chassis_id"] == "0c:42:a1:7e:55:00"
    assert first["remote_mgmt_ips"] == ["10.20.12.1", "fe80::e42:a1ff:fe7e:5500"]
    assert (second["remote_system"], second["remote_port"], second["remote_port_description"]) == (
        None,
        "Ethernet12/1",
        "gpu-a17 rail0",
    )


def test_lldp_json_single_interface_and_json0_shapes():
    single = {
        "lldp": {
            "interface": {
                "eth0": {
                    "chassis": {"sw1": {"id": {"type": "mac", "value": "aa:bb:cc:00:00:01"}}},
                    "port": {"id": {"type": "ifname", "value": "Ethernet1"}},
                }
            }
        }
    }
    [neighbor] = lldp.parse_json(json.dumps(single))
    assert (neighbor["local_port"], neighbor["remote_system"], neighbor["remote_port"]) == ("eth0", "sw1", "Ethernet1")
    json0 = {
        "lldp": [
            {
                "interface": [
                    {
                        "name": "eth0",
                        "chassis": [{"id": [{"type": "mac", "value": "aa:bb"}], "name": [{"value": "sw1"}]}],
                        "port": [{"id": [{"type": "ifname", "value": "Ethernet1"}], "descr": [{"value": "to gpu"}]}],
                    }
                ]
            }
        ]
    }
    [neighbor] = lldp.parse_json(json.dumps(json0))
    assert (neighbor["remote_system"], neighbor["remote_port"], neighbor["remote_port_description"]) == (
        "sw1",
        "Ethernet1",
        "to gpu",
    )
    assert lldp.parse_json('{"lldp": {}}') == []


def test_lldp_json_preferred_over_keyvalue(shared_fixtures):
    keyvalue = (shared_fixtures / "lldpctl" / "netboxagent_dedibox2.keyvalue.txt").read_text()
    files = {"lldpctl.json": (COMMON / "lldpctl.json").read_text(), "lldpctl.txt": keyvalue}
    report, _ = build_report(DictSource(files))
    assert [n["local_port"] for n in report["lldp_neighbors"]] == ["eno1", "ens2f0np0"]


def test_common_sample_folder(report_validator):
    report, _ = build_report(DirSource(str(COMMON)))
    assert_valid(report_validator, report)
    assert report["collector_errors"] == []
    assert len(report["nics"]) == 8 and len(report["infiniband"]) == 3 and len(report["lldp_neighbors"]) == 2


def test_ca_sysfs_facts_pair_a_roce_device_with_its_netdev(tmp_path, report_validator):
    """/sys/class/infiniband/<ca>/device -> the PCI function; device/net/ -> its netdevs (a RoCE NIC's name in
    lldpd). A CA without a sysfs entry keeps its ibstat facts only."""
    capture = tmp_path / "node"
    capture.mkdir()
    (capture / "ibstat.txt").write_text((COMMON / "ibstat.txt").read_text())
    pci = tmp_path / "devices" / "pci0000:17" / "0000:17:00.0" / "0000:1a:00.1"
    (pci / "net" / "ens1f1np1").mkdir(parents=True)
    ca = capture / "sys-class-infiniband" / "mlx5_bond_0"
    ca.mkdir(parents=True)
    (ca / "device").symlink_to(pci)
    report, _ = build_report(DirSource(str(capture)))
    assert_valid(report_validator, report)
    by_name = {c["ca"]: c for c in report["infiniband"]}
    assert (by_name["mlx5_bond_0"]["pci_bus_id"], by_name["mlx5_bond_0"]["netdevs"]) == ("0000:1a:00.1", ["ens1f1np1"])
    assert "pci_bus_id" not in by_name["mlx5_0"] and "netdevs" not in by_name["mlx5_0"]
