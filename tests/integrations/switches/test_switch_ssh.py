"""The netmiko adapters against a fake SSH switch (real SSH, real netmiko code paths): connect, show + parse,
config push with diff, verify, rollback, and error mapping - on NX-OS and on Cumulus Linux (NVUE, `linux`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_ssh_switch import FakeSshSwitch, SwitchState

from integrations.exceptions import PermanentError, TransientError
from integrations.ports import CliTarget, PortConfig
from integrations.switches.cli import NetmikoDeviceCli
from integrations.switches.config_push import NetmikoConfigurator

SHARED = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", Path(__file__).resolve().parents[4] / "shared" / "fixtures"))
NXOS = SHARED / "switch-cli" / "cisco_nxos"


@pytest.fixture(scope="module")
def switch():
    if not NXOS.is_dir():
        pytest.skip(f"CLI captures folder {NXOS} is absent")
    state = SwitchState(
        show_outputs={
            "show version": (NXOS / "show_version/cisco_nxos_show_version.raw").read_text(),
            "show lldp neighbors detail": (
                NXOS / "show_lldp_neighbors_detail/cisco_nxos_show_lldp_neighbors_detail.raw"
            ).read_text(),
            "show interface status": (NXOS / "show_interface_status/cisco_nxos_show_interface_status.raw").read_text(),
        },
        interfaces={"Ethernet1/1": ["description old-cable", "switchport access vlan 10", "no shutdown"]},
    )
    with FakeSshSwitch(state) as server:
        yield server


@pytest.fixture
def target(switch) -> CliTarget:
    return CliTarget(
        host=switch.host, port=switch.port, platform="cisco_nxos", username="admin", password="secret", timeout_s=10
    )


def test_show_commands_parse_through_ntc_templates(switch, target):
    cli = NetmikoDeviceCli()
    assert cli.version(target)["serial"] == "SAL1819S6LU"
    neighbours = cli.lldp_neighbors(target)
    assert ("Ethernet2/2", "N3K.cisconxapi.com", "Ethernet1/49") in [
        (n.local_port, n.remote_system, n.remote_port) for n in neighbours
    ]
    assert len(cli.interface_status(target)) == 73
    # netmiko's session preparation ran on the real channel.
    assert {"terminal width 511", "terminal length 0"} <= set(switch.state.commands_seen)


def test_push_dry_run_shows_diff_and_changes_nothing(switch, target):
    change = PortConfig("Ethernet1/1", description="gpu001 mlx5_0", vlan=20, mtu=9216)
    result = NetmikoConfigurator().push(target, change)
    assert result.applied is False
    assert result.diff.commands == (
        "interface Ethernet1/1",
        "description gpu001 mlx5_0",
        "switchport access vlan 20",
        "mtu 9216",
    )
    assert "-switchport access vlan 10" in result.diff.unified and "+mtu 9216" in result.diff.unified
    assert switch.state.interfaces["Ethernet1/1"] == [
        "description old-cable",
        "switchport access vlan 10",
        "no shutdown",
    ]


def test_push_apply_verify_and_rollback(switch, target):
    original = list(switch.state.interfaces["Ethernet1/1"])
    configurator = NetmikoConfigurator()
    change = PortConfig("Ethernet1/1", description="gpu001 mlx5_0", vlan=20, mtu=9216, enabled=False)
    result = configurator.push(target, change, dry_run=False)
    assert result.applied and result.verified, result.problems
    assert switch.state.interfaces["Ethernet1/1"] == [
        "description gpu001 mlx5_0",
        "switchport access vlan 20",
        "mtu 9216",
        "shutdown",
    ]
    assert result.rollback_commands == (
        "interface Ethernet1/1",
        "description old-cable",
        "switchport access vlan 10",
        "no mtu 9216",
        "no shutdown",
    )
    # Pushing the same change again is a no-op.
    again = configurator.push(target, change, dry_run=False)
    assert again.diff.is_empty and not again.applied

    restored = configurator.rollback(target, result)
    assert restored.verified, restored.problems
    assert sorted(switch.state.interfaces["Ethernet1/1"]) == sorted(original)


def test_wrong_password_is_permanent(target):
    bad = CliTarget(
        host=target.host, port=target.port, platform="cisco_nxos", username="admin", password="nope", timeout_s=5
    )
    with pytest.raises(PermanentError, match="authentication"):
        NetmikoDeviceCli().version(bad)


def test_closed_port_is_transient():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = CliTarget(host="127.0.0.1", port=port, platform="cisco_nxos", username="a", password="b", timeout_s=2)
    with pytest.raises(TransientError):
        NetmikoDeviceCli().version(target)


# --- Cumulus Linux 5 (platform `linux`): NVUE ---------------------------------------------------------------------

CUMULUS_SWP1 = {
    "bridge": {"domain": {"br_default": {"access": 10}}},
    "description": "old-cable",
    "link": {"state": {"up": {}}},
    "type": "swp",
}


@pytest.fixture(scope="module")
def cumulus():
    state = SwitchState(
        platform="linux", nvue={"swp1": CUMULUS_SWP1, "swp2": {"type": "swp"}}, nvue_rejects=("link mtu 99999",)
    )
    with FakeSshSwitch(state, username="cumulus") as server:
        yield server


@pytest.fixture
def cumulus_target(cumulus) -> CliTarget:
    return CliTarget(
        host=cumulus.host, port=cumulus.port, platform="linux", username="cumulus", password="secret", timeout_s=10
    )


def test_nvue_dry_run_shows_the_diff_and_changes_nothing(cumulus, cumulus_target):
    result = NetmikoConfigurator().push(cumulus_target, PortConfig("swp1", description="gpu001 mlx5_0", vlan=20))
    assert result.applied is False
    assert result.diff.commands == (
        "nv set interface swp1 description 'gpu001 mlx5_0'",
        "nv set interface swp1 bridge domain br_default access 20",
    )
    assert "-nv set interface swp1 description old-cable" in result.diff.unified
    assert cumulus.state.nvue["swp1"] == CUMULUS_SWP1 and cumulus.state.nvue_pending is None
    assert "nv show --applied interface swp1 -o json" in cumulus.state.commands_seen


def test_nvue_push_applies_verifies_and_rolls_back(cumulus, cumulus_target):
    configurator = NetmikoConfigurator()
    change = PortConfig("swp1", description="gpu001 mlx5_0", vlan=20, mtu=9216, enabled=False)
    result = configurator.push(cumulus_target, change, dry_run=False)
    assert result.applied and result.verified, result.problems
    assert cumulus.state.nvue["swp1"] == {
        "bridge": {"domain": {"br_default": {"access": 20}}},
        "description": "gpu001 mlx5_0",
        "link": {"mtu": 9216, "state": {"down": {}}},
        "type": "swp",
    }
    assert "applied [rev_id:" in result.output
    assert result.rollback_commands == (
        "nv set interface swp1 description old-cable",
        "nv set interface swp1 bridge domain br_default access 10",
        "nv unset interface swp1 link mtu",
        "nv unset interface swp1 link state",
    )
    assert configurator.push(cumulus_target, change, dry_run=False).diff.is_empty  # the same again: nothing to do

    restored = configurator.rollback(cumulus_target, result)
    assert restored.verified, restored.problems
    assert cumulus.state.nvue["swp1"] == {
        "bridge": {"domain": {"br_default": {"access": 10}}},
        "description": "old-cable",
        "type": "swp",
    }


def test_nvue_rejected_command_is_permanent_and_leaves_no_pending_revision(cumulus, cumulus_target):
    with pytest.raises(PermanentError, match="rejected"):
        NetmikoConfigurator().push(cumulus_target, PortConfig("swp2", description="x", mtu=99999), dry_run=False)
    assert cumulus.state.nvue["swp2"] == {"type": "swp"}
    nv_commands = [c for c in cumulus.state.commands_seen if c.startswith("nv ")]
    assert cumulus.state.nvue_pending is None and nv_commands[-1] == "nv config detach"
    assert "nv config apply -y" not in nv_commands[nv_commands.index("nv set interface swp2 description x") :]
