"""Xid events: kernel log formats, PCI address mapping, cards nvidia-smi no longer lists, and the state file."""

from __future__ import annotations

import json

import pytest
from agent_helpers import DATA, assert_valid

from inventory_agents.agent.collectors import xid
from inventory_agents.agent.report import build_report
from inventory_agents.agent.runner import DictSource

KERNEL_LOG = (DATA / "node-common" / "kernel-log.txt").read_text()


def test_journalctl_short_iso_lines():
    events = xid.parse_kernel_log(KERNEL_LOG)
    assert [(e["xid"], e["pci_bus_id"]) for e in events] == [
        (13, "0000:01:00.0"),
        (94, "0000:01:00.0"),
        (79, "0000:b1:00.0"),
    ]
    fell_off = events[2]
    assert fell_off["message"] == "GPU has fallen off the bus."
    assert fell_off["pid"] == "<unknown>"
    assert fell_off["occurred_at"] == "2026-03-03T02:17:55Z"
    assert events[0]["process"] == "python3" and events[0]["pid"] == "48211"


@pytest.mark.parametrize(
    ("line", "bus", "code", "occurred_at"),
    [
        ("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.", "0000:3b:00.0", 79, None),
        (
            "[Tue Mar  3 02:17:55 2026] NVRM: Xid (PCI:0000:3B:00): 48, pid=1, DBE (double bit error) ECC error",
            "0000:3b:00.0",
            48,
            None,
        ),
        (
            "2026-03-03T02:17:55,123456+01:00 NVRM: Xid (PCI:0000:ca:00): 95, pid=77, name=torchrun, Uncontained",
            "0000:ca:00.0",
            95,
            "2026-03-03T01:17:55Z",
        ),
        (
            "Mar  3 02:17:55 gpu-a17 kernel: [ 99.1] NVRM: Xid (0000:18:00): 119, Timeout after 6s of waiting for RPC",
            "0000:18:00.0",
            119,
            None,
        ),
    ],
)
def test_dmesg_and_syslog_variants(line, bus, code, occurred_at):
    [event] = xid.parse_kernel_log(line)
    assert (event["pci_bus_id"], event["xid"], event["occurred_at"]) == (bus, code, occurred_at)
    assert event["timestamp_raw"]


def test_events_attach_to_cards_by_normalised_bus_id(shared_fixtures, report_validator):
    xml = (shared_fixtures / "nvidia-smi-xml" / "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml").read_text()
    report, _ = build_report(DictSource({"nvidia-smi-q-x.xml": xml, "kernel-log.txt": KERNEL_LOG}))
    assert_valid(report_validator, report)
    a100, gone = report["accelerators"]
    assert [e["xid"] for e in a100["health"]["xid_events"]] == [13, 94]
    assert a100["health"]["status"] == "failed"  # Xid 94: contained ECC error
    # The card that fell off the bus is no longer listed by nvidia-smi: it is reported from the kernel log.
    assert gone["seen_by_tool"] is False
    assert gone["pci_bus_id"] == "0000:b1:00.0"
    assert gone["serial"] is None
    assert gone["health"]["status"] == "failed"
    assert [e["xid"] for e in gone["health"]["xid_events"]] == [79]


def test_stub_takes_its_model_from_lspci():
    lspci = "Slot:\t0000:b1:00.0\nClass:\t3D controller [0302]\nVendor:\tNVIDIA Corporation [10de]\n"
    lspci += "Device:\tGH100 [H100 SXM5 80GB] [2330]\n"
    report, _ = build_report(DictSource({"kernel-log.txt": KERNEL_LOG, "lspci-vmm.txt": lspci}))
    models = {c["pci_bus_id"]: (c["model"], c.get("pci_device_id")) for c in report["accelerators"]}
    assert models["0000:b1:00.0"] == ("GH100 [H100 SXM5 80GB]", "10de:2330")


def test_from_dir_mode_counts_every_line_and_keeps_no_state():
    fragment = xid.collect(DictSource({"kernel-log.txt": KERNEL_LOG}), state_dir="/nonexistent")
    assert len(fragment["xid_events"]) == 3
    assert "_xid_state" not in fragment


def test_state_reports_each_line_once(tmp_path):
    events = xid.parse_kernel_log(KERNEL_LOG)
    assert len(xid.select_new(events, xid.load_state(str(tmp_path)))) == 3
    xid.save_state(str(tmp_path), xid.next_state({}, events))
    state = xid.load_state(str(tmp_path))
    assert state["last_at"] == "2026-03-03T02:17:55Z"
    assert xid.select_new(events, state) == []
    newer = (
        KERNEL_LOG + "2026-03-04T07:00:00+0000 gpu-a17 kernel: NVRM: Xid (PCI:0000:01:00): 63, pid=0, Row Remapper\n"
    )
    fresh = xid.select_new(xid.parse_kernel_log(newer), state)
    assert [(e["xid"], e["occurred_at"]) for e in fresh] == [(63, "2026-03-04T07:00:00Z")]


def test_damaged_state_file_means_report_everything(tmp_path):
    (tmp_path / xid.STATE_FILE).write_text("{not json")
    assert xid.load_state(str(tmp_path)) == {}


def test_live_collect_uses_state_and_returns_the_next_one(tmp_path):
    class FakeLive(DictSource):
        live = True

        def run(self, argv):
            self.argv = argv
            return KERNEL_LOG

    xid.save_state(str(tmp_path), xid.next_state({}, xid.parse_kernel_log(KERNEL_LOG)[:2]))
    source = FakeLive({})
    fragment = xid.collect(source, str(tmp_path))
    assert [e["xid"] for e in fragment["xid_events"]] == [79]
    assert "--since" in source.argv  # bounded by the last reported event, across reboots
    assert len(fragment["_xid_state"]["recent_hashes"]) == 3
    json.dumps(fragment["_xid_state"])


def _lspci_device(slot: str, cls: str, class_id: str, device: str, device_id: str) -> str:
    return (
        f"Slot:\t{slot}\nClass:\t{cls} [{class_id}]\nVendor:\tNVIDIA Corporation [10de]\n"
        f"Device:\t{device} [{device_id}]\n\n"
    )


def test_gpu_on_the_bus_but_missing_from_nvidia_smi(shared_fixtures, report_validator):
    """Expected 8, saw 7: the card lspci shows and nvidia-smi does not list stays in the report, unseen."""
    xml = (shared_fixtures / "nvidia-smi-xml" / "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml").read_text()
    lspci = _lspci_device("0000:01:00.0", "3D controller", "0302", "GA100 [A100 SXM4 80GB]", "20b2")
    lspci += _lspci_device("0000:41:00.0", "3D controller", "0302", "GA100 [A100 SXM4 80GB]", "20b2")
    lspci += _lspci_device("0000:41:00.1", "Audio device", "0403", "GA100 High Definition Audio", "1aef")
    lspci += _lspci_device("0000:c4:00.0", "Bridge", "0680", "GA100 [A100 NVSwitch]", "1af1")
    report, _ = build_report(DictSource({"nvidia-smi-q-x.xml": xml, "lspci-vmm.txt": lspci}))
    assert_valid(report_validator, report)
    listed, unseen = report["accelerators"]
    assert listed["serial"] == "1650522003820" and listed["health"]["status"] == "ok"
    assert (unseen["pci_bus_id"], unseen["model"], unseen["seen_by_tool"]) == (
        "0000:41:00.0",
        "GA100 [A100 SXM4 80GB]",
        False,
    )
    assert unseen["health"]["status"] == "unknown"
    assert unseen["health"]["reasons"] == ["not listed by nvidia-smi"]
