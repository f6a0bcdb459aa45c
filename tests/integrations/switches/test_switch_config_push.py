"""Port configuration rendering, diff, rollback and verification without a device: the Cumulus NVUE template of
the `linux` platform, value checks, and the PKey refusal."""

from __future__ import annotations

import json

import pytest

from integrations.exceptions import PermanentError
from integrations.ports import CliTarget, PortConfig
from integrations.switches.config_push import (
    TEMPLATES,
    interface_block,
    plan_port_change,
    running_text,
    verify_port_change,
)
from integrations.switches.fakes import FakeSwitchConfigurator

# What `nv show --applied interface swp1 -o json` answers for an access port in VLAN 10 (Cumulus Linux 5).
APPLIED = {
    "bridge": {"domain": {"br_default": {"access": 10}}},
    "description": "old-cable",
    "link": {"state": {"up": {}}},
    "type": "swp",
}


def test_nvue_block_reads_the_applied_interface_as_set_commands():
    assert interface_block("linux", "swp1", json.dumps(APPLIED)) == [
        "nv set interface swp1 bridge domain br_default access 10",
        "nv set interface swp1 description old-cable",
        "nv set interface swp1 type swp",  # `link state up` is the default: the same as no line
    ]
    assert interface_block("linux", "swp9", "Error: The requested item does not exist.") == []
    with pytest.raises(PermanentError, match="NVUE"):
        interface_block("linux", "swp1", "-bash: nv: command not found")


def test_nvue_plan_diff_and_rollback():
    change = PortConfig("swp1", description="gpu001 mlx5_0", vlan=20, mtu=9216, enabled=False)
    diff, rollback = plan_port_change("linux", change, json.dumps(APPLIED))
    assert diff.commands == (
        "nv set interface swp1 description 'gpu001 mlx5_0'",
        "nv set interface swp1 bridge domain br_default access 20",
        "nv set interface swp1 link mtu 9216",
        "nv set interface swp1 link state down",
    )
    assert rollback == (
        "nv set interface swp1 description old-cable",
        "nv set interface swp1 bridge domain br_default access 10",
        "nv unset interface swp1 link mtu",
        "nv unset interface swp1 link state",
    )
    assert "-nv set interface swp1 bridge domain br_default access 10" in diff.unified
    assert "+nv set interface swp1 link mtu 9216" in diff.unified
    # Enabling a port that is down removes the `down` line (up is NVUE's default).
    down = json.dumps({"link": {"state": {"down": {}}}})
    diff, rollback = plan_port_change("linux", PortConfig("swp1", enabled=True), down)
    assert (diff.commands, rollback) == (
        ("nv unset interface swp1 link state",),
        ("nv set interface swp1 link state down",),
    )
    assert plan_port_change("linux", PortConfig("swp1", enabled=True), "{}")[0].is_empty


def test_nvue_verify_reads_back_what_was_asked():
    change = PortConfig("swp1", description="gpu001 mlx5_0", vlan=20, mtu=9216, enabled=False)
    pushed = {
        "bridge": {"domain": {"br_default": {"access": 20}}},
        "description": "gpu001 mlx5_0",
        "link": {"mtu": 9216, "state": {"down": {}}},
        "type": "swp",
    }
    assert verify_port_change("linux", change, json.dumps(pushed)) == []
    pushed["link"]["mtu"] = 1500
    assert verify_port_change("linux", change, json.dumps(pushed)) == [
        "mtu: wanted ['nv set interface swp1 link mtu 9216'], running config has "
        "['nv set interface swp1 link mtu 1500']"
    ]


@pytest.mark.parametrize("platform", sorted(TEMPLATES))
def test_running_text_reads_back_as_the_same_lines(platform):
    interface = {"juniper_junos": "xe-0/0/1", "linux": "swp1"}.get(platform, "Ethernet1/1")
    change = PortConfig(interface, description="gpu007 mlx5_2", vlan=120, mtu=9216, enabled=False)
    diff, _ = plan_port_change(platform, change, running_text(platform, interface, []))
    assert interface_block(platform, interface, running_text(platform, interface, list(diff.after))) == list(diff.after)
    assert verify_port_change(platform, change, running_text(platform, interface, list(diff.after))) == []


def test_fake_configurator_speaks_nvue():
    target = CliTarget(host="leaf1", platform="linux", username="cumulus")
    fake = FakeSwitchConfigurator(running={"leaf1": {"swp1": ["nv set interface swp1 description old-cable"]}})
    done = fake.push(target, PortConfig("swp1", description="gpu001 mlx5_0", mtu=9216), dry_run=False)
    assert done.applied and done.verified
    assert fake.rollback(target, done).verified
    assert fake.running["leaf1"]["swp1"] == ["nv set interface swp1 description old-cable"]


@pytest.mark.parametrize("platform", ["cisco_nxos", "linux", "juniper_junos"])
def test_a_pkey_is_refused_with_where_partitions_live(platform):
    with pytest.raises(PermanentError) as error:
        plan_port_change(platform, PortConfig("p1", pkey="0x8001"), "")
    message = str(error.value)
    assert "0x8001" in message and "subnet manager" in message
    assert "UFM" in message and "partitions.conf" in message and "port GUID" in message


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (PortConfig("Ethernet1/1", vlan=4095), "VLAN 4095"),
        (PortConfig("Ethernet1/1", mtu=0), "MTU 0"),
        (PortConfig("Ethernet1/1", description="gpu001\nreload"), "control character"),
    ],
)
def test_values_a_switch_cannot_take_are_refused_before_rendering(change, problem):
    with pytest.raises(PermanentError, match=problem):
        plan_port_change("cisco_nxos", change, "")


def test_a_junos_description_cannot_close_its_quotes():
    with pytest.raises(PermanentError, match="double quote"):
        plan_port_change("juniper_junos", PortConfig("xe-0/0/1", description='a" ; delete'), "")
