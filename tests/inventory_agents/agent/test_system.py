"""System facts: every real dmidecode capture, os-release, and the /proc fallback when dmidecode needs root."""

from __future__ import annotations

import pytest
from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import system
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource, DirSource

DMIDECODE_EXPECTED = {
    "netboxagent_dell-poweredge-m630.txt": (
        "Dell Inc.",
        "PowerEdge M630",
        "4242",
        "1.2.5",
        "Intel(R) Xeon(R) CPU E5-2683 v3 @ 2.00GHz",
        2,
        64,
    ),
    "netboxagent_hp-proliant-dl380p-gen8.txt": (
        "HP",
        "ProLiant DL380p Gen8",
        "4242",
        "P70",
        "Intel(R) Xeon(R) CPU E5-2620 0 @ 2.00GHz",
        2,
        64,
    ),
    "netboxagent_hpe-proliant-bl460c-gen10-graphics-exp.txt": (
        "HPE",
        "ProLiant BL460c Gen10 Graphics Exp",
        "4242",
        "I41",
        "Intel(R) Xeon(R) Gold 6132 CPU @ 2.60GHz",
        2,
        128,
    ),
    "netboxagent_hpe-proliant-bl460c-gen10.txt": (
        "HPE",
        "ProLiant BL460c Gen10",
        "4242",
        "I41",
        "Intel(R) Xeon(R) Gold 6126 CPU @ 2.60GHz",
        2,
        64,
    ),
    "netboxagent_supermicro-ssg-6028r.txt": (
        "Supermicro",
        "SSG-6028R-OSD072P",
        "S212101X7A18218",
        "2.0b",
        "Intel(R) Xeon(R) CPU E5-2620 v4 @ 2.10GHz",
        1,
        64,
    ),
    "netboxagent_supermicro-sys-5039ms-h12trf.txt": (
        "Supermicro",
        "SYS-5039MS-H12TRF-OS012",
        "E235735X6B01665",
        "2.2",
        "Intel(R) Xeon(R) CPU E3-1245 v5 @ 3.50GHz",
        1,
        32,
    ),
}


def test_every_dmidecode_capture_is_covered(shared_fixtures):
    assert {p.name for p in (shared_fixtures / "dmidecode").iterdir()} == set(DMIDECODE_EXPECTED)


@pytest.mark.parametrize("name", sorted(DMIDECODE_EXPECTED))
def test_dmidecode_capture(shared_fixtures, report_validator, name):
    report, _ = build_report(DictSource({"dmidecode.txt": (shared_fixtures / "dmidecode" / name).read_text()}))
    assert_valid(report_validator, report)
    s = report["system"]
    got = (s["vendor"], s["product"], s["serial"], s["bios_version"], s["cpu_model"], s["cpu_count"], s["memory_gib"])
    assert got == DMIDECODE_EXPECTED[name]
    assert s["serial_raw"] == s["serial"]


def test_unpopulated_socket_is_not_counted(shared_fixtures):
    text = (shared_fixtures / "dmidecode" / "netboxagent_supermicro-ssg-6028r.txt").read_text()
    assert "Status: Unpopulated" in text
    assert system.system_from_dmidecode(text)["cpu_count"] == 1


def test_placeholder_system_serial():
    text = "Handle 0x0001, DMI type 1, 27 bytes\nSystem Information\n\tManufacturer: Inspur\n"
    text += "\tProduct Name: NF5688M7\n\tSerial Number: To Be Filled By O.E.M.\n"
    s = system.system_from_dmidecode(text)
    assert (s["vendor"], s["product"], s["serial"], s["serial_raw"]) == (
        "Inspur",
        "NF5688M7",
        None,
        "To Be Filled By O.E.M.",
    )


def test_os_release_kernel_hostname_from_dir(report_validator):
    report, _ = build_report(DirSource(str(DATA / "node-common")))
    assert_valid(report_validator, report)
    assert report["hostname"] == "gpu-a17.dc1.example.net"
    s = report["system"]
    assert (s["os_name"], s["os_version"], s["kernel"]) == ("Ubuntu", "22.04", "5.15.0-105-generic")


def test_proc_fallback_without_dmidecode():
    cpuinfo = "processor\t: 0\nphysical id\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
    cpuinfo += "processor\t: 1\nphysical id\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
    meminfo = "MemTotal:       1584834560 kB\nMemFree:        1500000000 kB\n"
    report, _ = build_report(DictSource({"cpuinfo": cpuinfo, "meminfo": meminfo}))
    s = report["system"]
    assert (s["cpu_model"], s["cpu_count"], s["memory_gib"]) == ("AMD EPYC 9654 96-Core Processor", 2, None)
    assert s["memory_gib_usable"] == 1511.4


def test_dmidecode_failure_does_not_lose_os_facts():
    report, _ = build_report(DictSource({"os-release": 'NAME="Rocky Linux"\nVERSION_ID="9.3"\n', "dmidecode.txt": 42}))
    assert report["system"]["os_name"] == "Rocky Linux"
    assert [e["collector"] for e in report["collector_errors"]] == ["dmidecode"]
