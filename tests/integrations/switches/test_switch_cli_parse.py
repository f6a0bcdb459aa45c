"""CLI parsing on every real capture in ../shared/fixtures/switch-cli, and LLDP normalisation across platforms."""

from __future__ import annotations

import json
import os
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from integrations.exceptions import PermanentError
from integrations.switches.cli_parse import (
    canonical_interface,
    normalize_lldp,
    parse_cli,
    platform_spec,
)

SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))
CLI_DIR = SHARED / "switch-cli"
CAPTURES = sorted(CLI_DIR.glob("*/*/*.raw")) if CLI_DIR.is_dir() else []


def _platform_command(raw: Path) -> tuple[str, str]:
    # Layout: <ntc platform>/<command with underscores>/<name>.raw, as in ntc-templates' own tests.
    return raw.parent.parent.name, raw.parent.name.replace("_", " ")


@pytest.mark.skipif(not CAPTURES, reason=f"no CLI captures under {CLI_DIR}")
@pytest.mark.parametrize("raw", CAPTURES, ids=lambda p: p.name)
def test_parse_equals_recorded_expectation(raw: Path):
    platform, command = _platform_command(raw)
    expected = yaml.safe_load(raw.with_suffix(".yml").read_text())["parsed_sample"]
    assert parse_cli(platform, command, raw.read_text()) == expected


@pytest.mark.skipif(not CAPTURES, reason=f"no CLI captures under {CLI_DIR}")
@pytest.mark.parametrize("raw", [p for p in CAPTURES if "lldp" in p.parent.name], ids=lambda p: p.name)
def test_switch_parse_command_prints_normalised_neighbours(raw: Path):
    platform, command = _platform_command(raw)
    out = StringIO()
    call_command("switch_parse", str(raw), "--platform", platform, "--command", command, "--json", stdout=out)
    neighbours = json.loads(out.getvalue())
    expected = yaml.safe_load(raw.with_suffix(".yml").read_text())["parsed_sample"]
    assert len(neighbours) == len(expected)
    for row in neighbours:
        assert set(row) >= {"local_port", "remote_system", "remote_port", "remote_chassis_id"}
        assert row["local_port"] and row["remote_port"]


def test_switch_parse_plain_rows_for_other_commands():
    raw = CLI_DIR / "cisco_nxos/show_version/cisco_nxos_show_version.raw"
    if not raw.exists():
        pytest.skip(f"{raw} is absent")
    out = StringIO()
    call_command(
        "switch_parse", str(raw), "--platform", "cisco_nxos", "--command", "show version", "--json", stdout=out
    )
    assert json.loads(out.getvalue())[0]["serial"] == "SAL1819S6LU"


def test_switch_parse_rejects_unknown_platform(tmp_path):
    f = tmp_path / "out.txt"
    f.write_text("x")
    with pytest.raises(CommandError, match="unsupported platform"):
        call_command("switch_parse", str(f), "--platform", "nokia_sros", "--command", "show version")


def _one(platform: str, command: str, name: str):
    raw = CLI_DIR / platform / command.replace(" ", "_") / name
    if not raw.exists():
        pytest.skip(f"{raw} is absent")
    return normalize_lldp(platform, parse_cli(platform, command, raw.read_text()))


def test_normalised_nxos_detail():
    got = _one("cisco_nxos", "show lldp neighbors detail", "cisco_nxos_show_lldp_neighbors_detail.raw")
    # NX-OS abbreviates local ports (Eth2/2) in LLDP tables; we spell them as IF-MIB/running-config do.
    assert ("Ethernet2/2", "N3K.cisconxapi.com", "Ethernet1/49", "54:7f:ee:af:78:18") in [
        (n.local_port, n.remote_system, n.remote_port, n.remote_chassis_id) for n in got
    ]


def test_normalised_huawei_uses_port_id_not_description():
    (n,) = _one("huawei_vrp", "display lldp neighbor", "huawei_vrp_display_lldp_neighbor3.raw")
    assert (n.local_port, n.remote_port, n.remote_port_description) == ("GE1/0/25", "Gi2/0/10", "GigabitEthernet2/0/10")
    assert n.remote_chassis_id == "aa:aa:aa:aa:aa:aa"  # Huawei writes MACs as aaaa-aaaa-aaaa


def test_normalised_junos_and_eos():
    junos = _one("juniper_junos", "show lldp neighbors", "juniper_junos_show_lldp_neighbors.raw")
    assert [(n.local_port, n.remote_system, n.remote_port) for n in junos] == [
        ("ge-0/0/1", "vmx2", "ge-0/0/1"),
        ("ge-0/0/0", "vmx3", "ge-0/0/0"),
    ]
    eos = _one("arista_eos", "show lldp neighbors detail", "arista_eos_show_lldp_neighbors_detail.raw")
    assert eos[0].remote_chassis_id == "2c:c2:60:81:ea:f9" and eos[0].remote_system == "spine2.company.com"


def test_lldpctl_keyvalue_from_linux_switches():
    raw = SHARED / "lldpctl" / "netboxagent_cumulus-dell-s4100.keyvalue.txt"
    if not raw.exists():
        pytest.skip(f"{raw} is absent")
    got = normalize_lldp("linux", parse_cli("linux", "sudo lldpctl -f keyvalue", raw.read_text()))
    assert [(n.local_port, n.remote_port, n.remote_chassis_id) for n in got] == [
        ("eno1", "swp46", "e4:f0:04:b6:47:32"),
        ("eno2d1", "swp46", "e4:f0:04:b6:4e:32"),
    ]
    assert got[0].remote_system == "toto-chassis.dc42"


def test_field_name_aliases_of_older_templates():
    rows = [{"local_port": "Eth1/7", "neighbor": "spine1", "port_id": "Ethernet1/1", "chassis_id": "0011.2233.4455"}]
    (n,) = normalize_lldp("cisco_nxos", rows)
    assert n == n.__class__("Ethernet1/7", "00:11:22:33:44:55", "Ethernet1/1", "spine1")


def test_platform_map():
    assert platform_spec("huawei").ntc_platform == "huawei_vrp"
    assert platform_spec("juniper_junos").lldp == "show lldp neighbors"
    assert canonical_interface("Et3/1", platform_spec("arista_eos").abbreviations) == "Ethernet3/1"
    with pytest.raises(PermanentError):
        platform_spec("nokia_sros")


@pytest.mark.filterwarnings("ignore::DeprecationWarning:netmiko.*")  # its pkg_resources lookup of ntc-templates
def test_why_the_live_path_does_not_use_netmiko_textfsm():
    """cli.send_show parses raw output itself. If this fails, netmiko's use_textfsm=True has learnt to tell an
    empty table from a missing template and to find Huawei's templates: the live path could switch to it."""
    from netmiko.utilities import structured_data_converter

    huawei = CLI_DIR / "huawei_vrp" / "display_lldp_neighbor" / "huawei_vrp_display_lldp_neighbor1.raw"
    if not huawei.exists():
        pytest.skip(f"{huawei} is absent")
    raw = huawei.read_text()

    def netmiko(platform: str, command: str, output: str):
        return structured_data_converter(raw_data=output, command=command, platform=platform, use_textfsm=True)

    assert isinstance(netmiko("huawei", "display lldp neighbor", raw), str)  # netmiko's device type: no template
    assert parse_cli("huawei", "display lldp neighbor", raw)[0]["neighbor_name"] == "ROUTER2"
    # No neighbours and no template look the same to a caller of netmiko; parse_cli says [] and raises.
    assert netmiko("cisco_nxos", "show lldp neighbors detail", "\n") == "\n"
    assert parse_cli("cisco_nxos", "show lldp neighbors detail", "\n") == []
    with pytest.raises(PermanentError):
        parse_cli("cisco_nxos", "show something unheard of", "\n")
